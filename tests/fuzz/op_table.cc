#include "tests/fuzz/op_table.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/fuzz/ref_ops.h"

namespace fusebox::fuzz {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string Num(double x) { return absl::StrCat(x); }

// ------------------------------------------------------------- pointwise

double Relu(double a) { return a < 0 ? 0.0 : a; }
double Sigmoid(double a) { return 1.0 / (1.0 + std::exp(-a)); }
double Gelu(double a) { return 0.5 * a * (1.0 + std::erf(a / std::sqrt(2.0))); }
double GeluTanh(double a) {
  return 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (a + 0.044715 * a * a * a)));
}
double Rsqrt(double a) { return 1.0 / std::sqrt(a); }
double Neg(double a) { return -a; }
double Abs(double a) { return std::fabs(a); }
double Exp(double a) { return std::exp(a); }
double Log(double a) { return std::log(a); }
double Tanh(double a) { return std::tanh(a); }
double Sqrt(double a) { return std::sqrt(a); }

OpDef GeluOp(const char* name, bool tanh_approx) {
  return {name, Category::kUnary,
          [=](const Refs& a, const Step&) {
            RequireFloat(a[0], name);
            // The float32 form 0.5 x (1 + tanh(z)) (as PyTorch's) cancels where tanh(z) ~ -1:
            // an absolute error of about |x| u32, allowed here (FINDINGS.md #6).
            return Map({&a[0]}, a[0].dtype, [=](const VE* x) {
              VE y = Interval(tanh_approx ? GeluTanh : Gelu, x[0], 1.13);
              y.e += 4 * kU32 * std::fabs(x[0].v);
              // After a GEMM on CUDA the tanh gelu is cuBLASLt's GELU epilogue,
              // whose own approximation is ~3e-5 relative off (FINDINGS.md #17).
              if (tanh_approx) y.e += 4e-5 * std::fabs(y.v) + 4e-7;
              return y;
            });
          },
          [=](const Tensors& t, const Step&) { return gelu(t[0], tanh_approx ? "tanh" : "none"); },
          [=](const Names& n, const Ranks&, const Step&) {
            return absl::StrCat("gelu(", n[0], tanh_approx ? ", \"tanh\")" : ")");
          }};
}

OpDef PowScalar() {
  return {"pow_scalar", Category::kUnary,
          [](const Refs& a, const Step& s) {
            RequireFloat(a[0], "pow");
            const double p = s.scalar;
            return Map({&a[0]}, a[0].dtype, [p](const VE* x) {
              // A negative power has a pole at 0, which the interval's ends do not see.
              if (p < 0 && std::fabs(x[0].v) <= x[0].e) return VE{std::pow(x[0].v, p), kInf};
              return Interval([p](double v) { return std::pow(v, p); }, x[0]);
            });
          },
          [](const Tensors& t, const Step& s) { return pow(t[0], s.scalar); },
          [](const Names& n, const Ranks&, const Step& s) { return absl::StrCat("pow(", n[0], ", ", Num(s.scalar), ")"); }};
}

// x (op) scalar, or scalar (op) x with `flag`; ints[0]: 0 add, 1 sub, 2 mul, 3 div.
OpDef ScalarOp() {
  return {"scalar", Category::kScalar,
          [](const Refs& a, const Step& s) {
            RequireFloat(a[0], "scalar op");
            const VE c{s.scalar, 0};
            const int64_t k = s.ints[0];
            const bool left = s.flag;
            return Map({&a[0]}, a[0].dtype, [=](const VE* x) {
              const VE l = left ? c : x[0], r = left ? x[0] : c;
              switch (k) {
                case 0: return Add(l, r);
                case 1: return Add(l, {-r.v, r.e});
                case 2: return Mul(l, r);
                default: return Div(l, r);
              }
            });
          },
          [](const Tensors& t, const Step& s) {
            const double c = s.scalar;
            switch (s.ints[0]) {
              case 0: return s.flag ? c + t[0] : t[0] + c;
              case 1: return s.flag ? c - t[0] : t[0] - c;
              case 2: return s.flag ? c * t[0] : t[0] * c;
              default: return s.flag ? c / t[0] : t[0] / c;
            }
          },
          [](const Names& n, const Ranks&, const Step& s) {
            const char* op[] = {" + ", " - ", " * ", " / "};
            return s.flag ? absl::StrCat("(", Num(s.scalar), op[s.ints[0]], n[0], ")")
                          : absl::StrCat("(", n[0], op[s.ints[0]], Num(s.scalar), ")");
          }};
}

VE PowVE(VE a, VE b) {
  const double v = std::pow(a.v, b.v);
  if (std::isinf(a.e) || std::isinf(b.e)) return {v, kInf};
  if (a.e == 0 && b.e == 0) return {v, 0};
  // A negative base: whether the rounded exponent is an integer decides NaN or not.
  if (b.e > 0 && a.v - a.e < 0) return {v, kInf};
  // A power that may be negative has a pole at 0, which the ends do not see.
  if (b.v - b.e < 0 && std::fabs(a.v) <= a.e) return {v, kInf};
  double d = 0;
  for (double x : {a.v - a.e, a.v + a.e}) {
    for (double y : {b.v - b.e, b.v + b.e}) {
      const double c = std::pow(x, y);
      if (std::isnan(c) != std::isnan(v) || std::isinf(c) || std::isinf(v)) return {v, kInf};
      if (!std::isnan(c)) d = std::max(d, std::fabs(c - v));
    }
  }
  return {v, d};
}
VE MaxVE(VE a, VE b, bool is_max) {
  if (std::isnan(a.v) || std::isnan(b.v)) return {NAN, (std::isinf(a.e) || std::isinf(b.e)) ? kInf : 0};
  return {is_max ? std::max(a.v, b.v) : std::min(a.v, b.v), std::max(a.e, b.e)};
}

// ints[0]: 0 add, 1 sub, 2 mul, 3 div, 4 maximum, 5 minimum, 6 pow; flag: operator spelling.
OpDef BinaryOp() {
  return {"binary", Category::kBinary,
          [](const Refs& a, const Step& s) {
            RequireFloat(a[0], "binary op");
            RequireFloat(a[1], "binary op");
            const int64_t k = s.ints[0];
            return Map({&a[0], &a[1]}, ResultType({&a[0], &a[1]}), [k](const VE* x) {
              switch (k) {
                case 0: return Add(x[0], x[1]);
                case 1: return Add(x[0], {-x[1].v, x[1].e});
                case 2: return Mul(x[0], x[1]);
                case 3: return Div(x[0], x[1]);
                case 4: return MaxVE(x[0], x[1], true);
                case 5: return MaxVE(x[0], x[1], false);
                default: return PowVE(x[0], x[1]);
              }
            });
          },
          [](const Tensors& t, const Step& s) {
            switch (s.ints[0]) {
              case 0: return s.flag ? t[0] + t[1] : add(t[0], t[1]);
              case 1: return s.flag ? t[0] - t[1] : sub(t[0], t[1]);
              case 2: return s.flag ? t[0] * t[1] : mul(t[0], t[1]);
              case 3: return s.flag ? t[0] / t[1] : div(t[0], t[1]);
              case 4: return maximum(t[0], t[1]);
              case 5: return minimum(t[0], t[1]);
              default: return pow(t[0], t[1]);
            }
          },
          [](const Names& n, const Ranks&, const Step& s) {
            const char* fn[] = {"add", "sub", "mul", "div", "maximum", "minimum", "pow"};
            const char* op[] = {" + ", " - ", " * ", " / "};
            if (s.flag && s.ints[0] < 4) return absl::StrCat("(", n[0], op[s.ints[0]], n[1], ")");
            return absl::StrCat(fn[s.ints[0]], "(", n[0], ", ", n[1], ")");
          }};
}

const char* kCompareNames[] = {"eq", "ne", "lt", "le", "gt", "ge"};
double Compare(int64_t k, double a, double b) {
  switch (k) {
    case 0: return a == b;
    case 1: return a != b;
    case 2: return a < b;
    case 3: return a <= b;
    case 4: return a > b;
    default: return a >= b;
  }
}
VE CompareVE(int64_t k, VE a, VE b) {
  const double v = Compare(k, a.v, b.v);
  const double e = a.e + b.e;
  if (std::isnan(a.v) || std::isnan(b.v)) return {v, e > 0 && std::isinf(e) ? kInf : 0};
  return {v, (e > 0 && !(std::fabs(a.v - b.v) > e)) ? kInf : 0};
}
template <typename B>  // a Tensor or a double
Tensor CompareFb(int64_t k, const Tensor& a, const B& b) {
  switch (k) {
    case 0: return eq(a, b);
    case 1: return ne(a, b);
    case 2: return lt(a, b);
    case 3: return le(a, b);
    case 4: return gt(a, b);
    default: return ge(a, b);
  }
}

// ints[0]: which comparison; the scalar form compares with `scalar`.
OpDef CompareOp(bool with_scalar) {
  return {with_scalar ? "compare_scalar" : "compare", with_scalar ? Category::kCompareScalar : Category::kCompare,
          [=](const Refs& a, const Step& s) {
            const int64_t k = s.ints[0];
            if (with_scalar) {
              const double c = s.scalar;
              return Map({&a[0]}, DType::kBool, [=](const VE* x) { return CompareVE(k, x[0], {c, 0}); });
            }
            // Compared in the operands' common dtype (a 0-d f32 operand of a bf16 one is rounded to bf16).
            return Map({&a[0], &a[1]}, DType::kBool, [=](const VE* x) { return CompareVE(k, x[0], x[1]); },
                       ResultType({&a[0], &a[1]}));
          },
          [=](const Tensors& t, const Step& s) {
            return with_scalar ? CompareFb(s.ints[0], t[0], s.scalar) : CompareFb(s.ints[0], t[0], t[1]);
          },
          [=](const Names& n, const Ranks&, const Step& s) {
            return absl::StrCat(kCompareNames[s.ints[0]], "(", n[0], ", ", with_scalar ? Num(s.scalar) : n[1], ")");
          }};
}

// where(c, a, b); with one arg less, ints[0] = 1 puts `scalar` first, 2 second.
OpDef WhereOp() {
  return {"where", Category::kWhere,
          [](const Refs& a, const Step& s) {
            if (a[0].dtype != DType::kBool) throw RefError("where: condition must be bool");
            auto pick = [](const VE* x, VE l, VE r) {
              if (std::isinf(x[0].e)) return VE{x[0].v != 0 ? l.v : r.v, kInf};
              return x[0].v != 0 ? l : r;
            };
            if (s.ints[0] == 0) {
              return Map({&a[0], &a[1], &a[2]}, ResultType({&a[1], &a[2]}),
                         [=](const VE* x) { return pick(x, x[1], x[2]); });
            }
            const VE c{s.scalar, 0};
            const bool first = s.ints[0] == 1;
            return Map({&a[0], &a[1]}, a[1].dtype,
                       [=](const VE* x) { return first ? pick(x, c, x[1]) : pick(x, x[1], c); });
          },
          [](const Tensors& t, const Step& s) {
            if (s.ints[0] == 0) return where(t[0], t[1], t[2]);
            return s.ints[0] == 1 ? where(t[0], s.scalar, t[1]) : where(t[0], t[1], s.scalar);
          },
          [](const Names& n, const Ranks&, const Step& s) {
            if (s.ints[0] == 0) return absl::StrCat("where(", n[0], ", ", n[1], ", ", n[2], ")");
            return s.ints[0] == 1 ? absl::StrCat("where(", n[0], ", ", Num(s.scalar), ", ", n[1], ")")
                                  : absl::StrCat("where(", n[0], ", ", n[1], ", ", Num(s.scalar), ")");
          }};
}

OpDef CastOp() {
  return {"cast", Category::kCast,
          [](const Refs& a, const Step& s) {
            return Map({&a[0]}, static_cast<DType>(s.ints[0]), [](const VE* x) { return x[0]; });
          },
          [](const Tensors& t, const Step& s) { return t[0].to(static_cast<DType>(s.ints[0])); },
          [](const Names& n, const Ranks&, const Step& s) {
            return absl::StrCat(n[0], ".to(", DTypeSpelling(static_cast<DType>(s.ints[0])), ")");
          }};
}

}  // namespace

OpDef Unary(const char* name, double (*f)(double), Tensor (*fb)(const Tensor&), double lipschitz) {
  return {name, Category::kUnary,
          [=](const Refs& a, const Step&) {
            RequireFloat(a[0], name);
            return Map({&a[0]}, a[0].dtype, [=](const VE* x) { return Interval(f, x[0], lipschitz); });
          },
          [=](const Tensors& t, const Step&) { return fb(t[0]); },
          [=](const Names& n, const Ranks&, const Step&) { return absl::StrCat(name, "(", n[0], ")"); }};
}

std::string DTypeSpelling(DType d) {
  switch (d) {
    case DType::kFloat32: return "DType::kFloat32";
    case DType::kFloat16: return "DType::kFloat16";
    case DType::kBFloat16: return "DType::kBFloat16";
    case DType::kInt32: return "DType::kInt32";
    case DType::kInt64: return "DType::kInt64";
    default: return "DType::kBool";
  }
}

DType ResultType(const std::vector<const RefArray*>& operands) {
  // Float dtypes only here: dimensioned operands decide; all 0-d: they do.
  bool any_dimensioned = false;
  for (const RefArray* x : operands) any_dimensioned |= x->rank() > 0;
  bool have = false;
  DType out = DType::kFloat32;
  for (const RefArray* x : operands) {
    if (any_dimensioned && x->rank() == 0) continue;
    if (!have) {
      out = x->dtype;
      have = true;
    } else if (out != x->dtype) {
      out = DType::kFloat32;  // f16 with bf16, or either with f32
    }
  }
  return out;
}

std::vector<OpDef> ViewOps();       // tests/fuzz/op_table_views.cc
std::vector<OpDef> ReductionOps();  // tests/fuzz/op_table_reductions.cc
std::vector<OpDef> ModelOps();      // tests/fuzz/op_table_model.cc

const std::vector<OpDef>& OpTable() {
  static const std::vector<OpDef> table = [] {
    std::vector<OpDef> t = {
        Unary("exp", Exp, fusebox::exp),
        Unary("log", Log, fusebox::log),
        Unary("tanh", Tanh, fusebox::tanh),
        Unary("sigmoid", Sigmoid, fusebox::sigmoid),
        Unary("relu", Relu, fusebox::relu),
        GeluOp("gelu", false),
        GeluOp("gelu_tanh", true),
        Unary("sqrt", Sqrt, fusebox::sqrt),
        Unary("rsqrt", Rsqrt, fusebox::rsqrt),
        Unary("abs", Abs, fusebox::abs, 1.0),
        Unary("neg", Neg, fusebox::neg),
        PowScalar(),
        ScalarOp(),
        BinaryOp(),
        CompareOp(false),
        CompareOp(true),
        WhereOp(),
        CastOp(),
    };
    for (auto& v : {ViewOps(), ReductionOps(), ModelOps()}) t.insert(t.end(), v.begin(), v.end());
    return t;
  }();
  return table;
}

int OpIndex(const std::string& name) {
  const auto& t = OpTable();
  for (size_t i = 0; i < t.size(); ++i) {
    if (name == t[i].name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace fusebox::fuzz
