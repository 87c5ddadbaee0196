#include "backend/index_expr.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tensor/error.h"

namespace fusebox::backend {
namespace {

int64_t SaturatingAdd(int64_t a, int64_t b) {
  return std::min(std::min(a, IndexExpr::kUnbounded) + std::min(b, IndexExpr::kUnbounded), IndexExpr::kUnbounded);
}
int64_t SaturatingMul(int64_t a, int64_t b) {
  return a != 0 && b > IndexExpr::kUnbounded / a ? IndexExpr::kUnbounded : std::min(a * b, IndexExpr::kUnbounded);
}

}  // namespace

struct IndexExpr::Rep {
  Kind kind;
  int64_t value;  // kConst: the value; kMul/kDiv/kMod: the constant operand
  int64_t bound;
  IndexExpr a, b;
  const char* name = "i";  // kVar
};

IndexExpr IndexExpr::Make(Kind kind, int64_t value, int64_t bound, IndexExpr a, IndexExpr b) {
  return IndexExpr(std::make_shared<const Rep>(Rep{kind, value, bound, std::move(a), std::move(b)}));
}

IndexExpr IndexExpr::Var(int64_t bound) { return Var("i", bound); }

IndexExpr IndexExpr::Var(const char* name, int64_t bound) {
  return IndexExpr(std::make_shared<const Rep>(Rep{Kind::kVar, 0, bound, {}, {}, name}));
}

IndexExpr IndexExpr::Const(int64_t value) {
  // Built without Make's default IndexExpr members to end the recursion.
  auto rep = std::shared_ptr<Rep>(new Rep{Kind::kConst, value, value + 1, IndexExpr(nullptr), IndexExpr(nullptr)});
  return IndexExpr(std::move(rep));
}

IndexExpr IndexExpr::Temp(int temp, int64_t bound) {
  return IndexExpr(std::make_shared<const Rep>(Rep{Kind::kTemp, temp, bound, {}, {}}));
}

const char* SizeArgName(int32_t symbol) {
  static constexpr const char* kNames[IndexExpr::kMaxSizeArgs] = {
      "fb_s0", "fb_s1", "fb_s2",  "fb_s3",  "fb_s4",  "fb_s5",  "fb_s6",  "fb_s7",
      "fb_s8", "fb_s9", "fb_s10", "fb_s11", "fb_s12", "fb_s13", "fb_s14", "fb_s15"};
  FUSEBOX_CHECK(symbol >= 0 && symbol < IndexExpr::kMaxSizeArgs, "no size argument for symbol ", symbol);
  return kNames[symbol];
}

IndexExpr IndexExpr::Size(int32_t symbol) { return Var(SizeArgName(symbol), kUnbounded); }

bool operator==(const IndexExpr& a, const IndexExpr& b) {
  const IndexExpr::Rep* x = a.rep_.get();
  const IndexExpr::Rep* y = b.rep_.get();
  if (x == y) return true;
  if (x == nullptr || y == nullptr || x->kind != y->kind || x->value != y->value) return false;
  switch (x->kind) {
    // A loop index has one bound per kernel: its name is its identity.
    case IndexExpr::Kind::kVar: return std::strcmp(x->name, y->name) == 0;
    case IndexExpr::Kind::kConst:
    case IndexExpr::Kind::kTemp: return true;
    default: return x->a == y->a && x->b == y->b;
  }
}

size_t IndexExpr::StructuralHash() const {
  if (rep_ == nullptr) return 0;
  size_t h = std::hash<int64_t>()(rep_->value) * 31 + static_cast<size_t>(rep_->kind);
  if (rep_->kind == Kind::kVar) return h * 31 + std::hash<std::string_view>()(rep_->name);
  if (rep_->kind == Kind::kConst || rep_->kind == Kind::kTemp) return h;
  return (h * 31 + rep_->a.StructuralHash()) * 31 + rep_->b.StructuralHash();
}

bool IndexExpr::is_const() const { return rep_->kind == Kind::kConst; }
int64_t IndexExpr::const_value() const { return rep_->value; }
int64_t IndexExpr::bound() const { return rep_->bound; }

int64_t IndexExpr::Eval(const std::function<int64_t(const char* var)>& var,
                        const std::function<int64_t(int temp)>& temp) const {
  switch (rep_->kind) {
    case Kind::kVar: return var(rep_->name);
    case Kind::kConst: return rep_->value;
    case Kind::kTemp: return temp(static_cast<int>(rep_->value));
    case Kind::kAdd: return rep_->a.Eval(var, temp) + rep_->b.Eval(var, temp);
    case Kind::kMul: return rep_->a.Eval(var, temp) * rep_->value;
    case Kind::kDiv: return rep_->a.Eval(var, temp) / rep_->value;
    case Kind::kMod: return rep_->a.Eval(var, temp) % rep_->value;
    case Kind::kDivBy: return rep_->a.Eval(var, temp) / rep_->b.Eval(var, temp);
    case Kind::kModBy: return rep_->a.Eval(var, temp) % rep_->b.Eval(var, temp);
    case Kind::kMulBy: return rep_->a.Eval(var, temp) * rep_->b.Eval(var, temp);
  }
  return 0;
}

bool IndexExpr::IsMultipleOf(int64_t d) const {
  switch (rep_->kind) {
    case Kind::kConst: return rep_->value % d == 0;
    case Kind::kMul: return rep_->value % d == 0 || rep_->a.IsMultipleOf(d / std::gcd(rep_->value, d));
    case Kind::kAdd: return rep_->a.IsMultipleOf(d) && rep_->b.IsMultipleOf(d);
    case Kind::kMulBy: return rep_->a.IsMultipleOf(d) || rep_->b.IsMultipleOf(d);
    default: return d == 1;
  }
}

std::pair<std::optional<IndexExpr>, std::optional<IndexExpr>> IndexExpr::SplitTermsWhere(
    const std::function<bool(const IndexExpr&)>& multiple) const {
  std::optional<IndexExpr> multiples, rest;
  std::vector<const IndexExpr*> stack = {this};
  while (!stack.empty()) {
    const IndexExpr* e = stack.back();
    stack.pop_back();
    if (e->rep_->kind == Kind::kAdd) {
      stack.push_back(&e->rep_->b);
      stack.push_back(&e->rep_->a);
      continue;
    }
    std::optional<IndexExpr>& sum = multiple(*e) ? multiples : rest;
    sum = sum.has_value() ? *sum + *e : *e;
  }
  return {multiples, rest};
}

std::pair<std::optional<IndexExpr>, std::optional<IndexExpr>> IndexExpr::SplitTerms(int64_t d) const {
  return SplitTermsWhere([d](const IndexExpr& e) { return e.IsMultipleOf(d); });
}

std::pair<std::optional<IndexExpr>, std::optional<IndexExpr>> IndexExpr::SplitTermsBy(const IndexExpr& s) const {
  return SplitTermsWhere([&s](const IndexExpr& e) { return e.rep_->kind == Kind::kMulBy && e.rep_->b == s; });
}

IndexExpr operator+(const IndexExpr& a, const IndexExpr& b) {
  if (a.is_const() && b.is_const()) return IndexExpr::Const(a.const_value() + b.const_value());
  if (a.is_const() && a.const_value() == 0) return b;
  if (b.is_const() && b.const_value() == 0) return a;
  // x / d * d + x % d (either order) is x, for a constant d and a run-time
  // one alike: both keep the divisor in b (Make's second operand).
  using K = IndexExpr::Kind;
  for (const auto& [q, r] : {std::pair(&a, &b), std::pair(&b, &a)}) {
    const IndexExpr::Rep& mul = *q->rep_;
    const IndexExpr::Rep& mod = *r->rep_;
    if ((mul.kind != K::kMul || mod.kind != K::kMod) && (mul.kind != K::kMulBy || mod.kind != K::kModBy)) continue;
    const IndexExpr::Rep& div = *mul.a.rep_;
    if ((div.kind == K::kDiv || div.kind == K::kDivBy) && div.b == mul.b && mod.b == mul.b && div.a == mod.a) {
      return div.a;
    }
  }
  return IndexExpr::Make(IndexExpr::Kind::kAdd, 0, SaturatingAdd(a.bound(), b.bound()) - 1, a, b);
}

IndexExpr operator*(const IndexExpr& a, int64_t c) {
  if (c == 0) return IndexExpr::Const(0);
  if (c == 1) return a;
  if (a.is_const()) return IndexExpr::Const(a.const_value() * c);
  return IndexExpr::Make(IndexExpr::Kind::kMul, c, SaturatingMul(a.bound() - 1, c) + 1, a, IndexExpr::Const(c));
}

IndexExpr operator/(const IndexExpr& a, int64_t d) {
  FUSEBOX_CHECK(d > 0, "index division by ", d, " in ", a.ToString());
  if (d == 1) return a;
  if (a.is_const()) return IndexExpr::Const(a.const_value() / d);
  if (a.bound() <= d) return IndexExpr::Const(0);
  if (a.rep_->kind == IndexExpr::Kind::kDiv) return a.rep_->a / (a.rep_->value * d);
  if (a.rep_->kind == IndexExpr::Kind::kMul && a.rep_->value % d == 0) return a.rep_->a * (a.rep_->value / d);
  // (k d + y) / d = k + y / d for y >= 0: a sum splits where terms are multiples of d.
  if (auto [multiples, rest] = a.SplitTerms(d); multiples.has_value() && rest.has_value()) {
    return *multiples / d + *rest / d;
  } else if (multiples.has_value() && a.rep_->kind == IndexExpr::Kind::kAdd) {  // every term: each divides exactly
    return a.rep_->a / d + a.rep_->b / d;
  }
  return IndexExpr::Make(IndexExpr::Kind::kDiv, d, (a.bound() - 1) / d + 1, a, IndexExpr::Const(d));
}

IndexExpr operator%(const IndexExpr& a, int64_t m) {
  FUSEBOX_CHECK(m > 0, "index modulo by ", m, " in ", a.ToString());
  if (m == 1) return IndexExpr::Const(0);
  if (a.is_const()) return IndexExpr::Const(a.const_value() % m);
  if (a.bound() <= m) return a;
  if (a.IsMultipleOf(m)) return IndexExpr::Const(0);
  // (k m + y) % m = y % m; (x % (k m)) % m = x % m.
  if (auto [multiples, rest] = a.SplitTerms(m); multiples.has_value() && rest.has_value()) return *rest % m;
  if (a.rep_->kind == IndexExpr::Kind::kMod && a.rep_->value % m == 0) return a.rep_->a % m;
  return IndexExpr::Make(IndexExpr::Kind::kMod, m, m, a, IndexExpr::Const(m));
}

IndexExpr operator/(const IndexExpr& a, const IndexExpr& d) {
  if (d.is_const()) return a / d.const_value();
  if (a.is_const() && a.const_value() == 0) return a;
  if (a.rep_->kind == IndexExpr::Kind::kMulBy && a.rep_->b == d) return a.rep_->a;  // k s / s
  if (a.rep_->kind == IndexExpr::Kind::kModBy && a.rep_->b == d) return IndexExpr::Const(0);  // (x % s) / s
  // (k s + y) / s = k + y / s for y >= 0.
  if (auto [multiples, rest] = a.SplitTermsBy(d); multiples.has_value() && rest.has_value()) {
    return *multiples / d + *rest / d;
  }
  return IndexExpr::Make(IndexExpr::Kind::kDivBy, 0, a.bound(), a, d);
}

IndexExpr operator%(const IndexExpr& a, const IndexExpr& m) {
  if (m.is_const()) return a % m.const_value();
  if (a.is_const() && a.const_value() == 0) return a;
  if (a.rep_->kind == IndexExpr::Kind::kMulBy && a.rep_->b == m) return IndexExpr::Const(0);  // k s % s
  if (a.rep_->kind == IndexExpr::Kind::kModBy && a.rep_->b == m) return a;                    // (x % s) % s
  // (k s + y) % s = y % s.
  if (auto [multiples, rest] = a.SplitTermsBy(m); multiples.has_value() && rest.has_value()) return *rest % m;
  return IndexExpr::Make(IndexExpr::Kind::kModBy, 0, std::min(a.bound(), m.bound()), a, m);
}

IndexExpr operator*(const IndexExpr& a, const IndexExpr& s) {
  if (s.is_const()) return a * s.const_value();
  if (a.is_const() && a.const_value() == 0) return a;
  return IndexExpr::Make(IndexExpr::Kind::kMulBy, 0, IndexExpr::kUnbounded, a, s);
}

std::string IndexExpr::Operand(const IndexExpr& e, const TempName& temp_name) {
  return e.rep_->kind == Kind::kAdd ? absl::StrCat("(", e.ToString(temp_name), ")") : e.ToString(temp_name);
}

std::string IndexExpr::ToString() const { return ToString(nullptr); }

std::string IndexExpr::ToString(const TempName& temp_name) const {
  auto literal = [](int64_t v) { return v > INT_MAX ? absl::StrCat(v, "LL") : absl::StrCat(v); };
  switch (rep_->kind) {
    case Kind::kVar: return rep_->name;
    case Kind::kConst: return literal(rep_->value);
    case Kind::kAdd: return absl::StrCat(rep_->a.ToString(temp_name), " + ", rep_->b.ToString(temp_name));
    // * / % share a precedence and group left to right, so only a sum on the
    // left needs parentheses.
    case Kind::kMul: return absl::StrCat(Operand(rep_->a, temp_name), " * ", literal(rep_->value));
    case Kind::kDiv: return absl::StrCat(Operand(rep_->a, temp_name), " / ", literal(rep_->value));
    case Kind::kMod: return absl::StrCat(Operand(rep_->a, temp_name), " % ", literal(rep_->value));
    // A divisor that is not a leaf is parenthesized: x / (s * 4).
    case Kind::kDivBy:
    case Kind::kModBy:
    case Kind::kMulBy: {
      const Kind d = rep_->b.rep_->kind;
      const std::string divisor = rep_->b.ToString(temp_name);
      const char* op = rep_->kind == Kind::kDivBy ? " / " : rep_->kind == Kind::kModBy ? " % " : " * ";
      return absl::StrCat(Operand(rep_->a, temp_name), op,
                          d == Kind::kVar || d == Kind::kConst || d == Kind::kTemp ? divisor : "(" + divisor + ")");
    }
    case Kind::kTemp: {
      const int t = static_cast<int>(rep_->value);
      return temp_name ? temp_name(t) : absl::StrCat("t", t);
    }
  }
  return "?";
}

bool IndexExpr::DependsOn(const char* var) const {
  switch (rep_->kind) {
    case Kind::kVar: return std::strcmp(rep_->name, var) == 0;
    case Kind::kConst:
    case Kind::kTemp: return false;
    case Kind::kAdd: return rep_->a.DependsOn(var) || rep_->b.DependsOn(var);
    case Kind::kMul:
    case Kind::kDiv:
    case Kind::kMod: return rep_->a.DependsOn(var);
    case Kind::kDivBy:
    case Kind::kModBy:
    case Kind::kMulBy: return rep_->a.DependsOn(var) || rep_->b.DependsOn(var);
  }
  return true;
}

bool IndexExpr::HasTemp() const {
  switch (rep_->kind) {
    case Kind::kTemp: return true;
    case Kind::kVar:
    case Kind::kConst: return false;
    case Kind::kAdd: return rep_->a.HasTemp() || rep_->b.HasTemp();
    case Kind::kMul:
    case Kind::kDiv:
    case Kind::kMod: return rep_->a.HasTemp();
    case Kind::kDivBy:
    case Kind::kModBy:
    case Kind::kMulBy: return rep_->a.HasTemp() || rep_->b.HasTemp();
  }
  return true;
}

std::vector<int> IndexExpr::Temps() const {
  std::vector<int> temps;
  std::vector<const IndexExpr*> stack = {this};
  while (!stack.empty()) {
    const IndexExpr* e = stack.back();
    stack.pop_back();
    switch (e->rep_->kind) {
      case Kind::kTemp: temps.push_back(static_cast<int>(e->rep_->value)); break;
      case Kind::kVar:
      case Kind::kConst: break;
      case Kind::kAdd:
      case Kind::kDivBy:
      case Kind::kModBy:
      case Kind::kMulBy: stack.push_back(&e->rep_->b); [[fallthrough]];
      case Kind::kMul:
      case Kind::kDiv:
      case Kind::kMod: stack.push_back(&e->rep_->a); break;
    }
  }
  return temps;
}

bool IndexExpr::IsVarPlusMultipleOf(const char* var, int64_t m) const {
  // Terms of the top-level sum.
  std::vector<const IndexExpr*> terms, stack = {this};
  while (!stack.empty()) {
    const IndexExpr* e = stack.back();
    stack.pop_back();
    if (e->rep_->kind == Kind::kAdd) {
      stack.push_back(&e->rep_->a);
      stack.push_back(&e->rep_->b);
    } else {
      terms.push_back(e);
    }
  }
  auto multiple = [m](auto& self, const IndexExpr& e) -> bool {
    if (m == 1) return true;
    switch (e.rep_->kind) {
      case Kind::kConst: return e.rep_->value % m == 0;
      case Kind::kMul: return e.rep_->value % m == 0 || self(self, e.rep_->a);
      case Kind::kAdd: return self(self, e.rep_->a) && self(self, e.rep_->b);
      default: return false;
    }
  };
  int vars = 0;
  for (const IndexExpr* t : terms) {
    if (t->rep_->kind == Kind::kVar && std::strcmp(t->rep_->name, var) == 0) {
      ++vars;
    } else if (t->DependsOn(var) || !multiple(multiple, *t)) {
      return false;
    }
  }
  return vars == 1;
}

IndexExpr::RunProps IndexExpr::PropsOverAlignedRun(const char* var, int64_t v) const {
  // Two properties over an aligned run b, b + 1, ..., b + v - 1 of `var`:
  // same(e): e has one value over the run; run(e): e takes e(b), e(b) + 1, ...
  // with e(b) a multiple of v. multiple(e): e is always a multiple of v.
  auto is_var = [var](const IndexExpr& e) { return e.rep_->kind == Kind::kVar && std::strcmp(e.rep_->name, var) == 0; };
  auto multiple = [v](auto& self, const IndexExpr& e) -> bool {
    switch (e.rep_->kind) {
      case Kind::kConst: return e.rep_->value % v == 0;
      case Kind::kMul: return e.rep_->value % v == 0 || self(self, e.rep_->a);
      case Kind::kAdd: return self(self, e.rep_->a) && self(self, e.rep_->b);
      case Kind::kMod: return e.rep_->value % v == 0 && self(self, e.rep_->a);
      default: return false;
    }
  };
  auto props = [&](auto& self, const IndexExpr& e) -> RunProps {
    const Rep& r = *e.rep_;
    switch (r.kind) {
      case Kind::kConst: return {true, false};
      case Kind::kTemp: return {false, false};  // varies with the loaded index
      case Kind::kVar: return {!is_var(e), is_var(e)};
      case Kind::kAdd: {
        const RunProps a = self(self, r.a), b = self(self, r.b);
        return {a.same && b.same,
                (a.run && b.same && multiple(multiple, r.b)) || (b.run && a.same && multiple(multiple, r.a))};
      }
      case Kind::kMul: return {self(self, r.a).same, false};  // Make folds * 1 away
      case Kind::kDiv: {
        // (e(b) + k) / d == e(b) / d when v divides both e(b) and d.
        const RunProps a = self(self, r.a);
        return {a.same || (a.run && r.value % v == 0), false};
      }
      case Kind::kMod: {
        // (e(b) + k) % m == e(b) % m + k when v divides both e(b) and m.
        const RunProps a = self(self, r.a);
        return {a.same, a.run && r.value % v == 0};
      }
      // By a run-time size: one value where both are one, else unknown.
      case Kind::kDivBy:
      case Kind::kModBy:
      case Kind::kMulBy: return {self(self, r.a).same && self(self, r.b).same, false};
    }
    return {false, false};
  };
  if (v < 1) return {false, false};
  return props(props, *this);
}

bool IndexExpr::IsAlignedRunOf(const char* var, int64_t v) const { return PropsOverAlignedRun(var, v).run; }

bool IndexExpr::IsUniformOverAlignedRunOf(const char* var, int64_t v) const { return PropsOverAlignedRun(var, v).same; }

}  // namespace fusebox::backend
