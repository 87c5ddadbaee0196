#include "backend/online_exp_sums.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "backend/c_printer.h"

namespace fusebox::backend {
namespace {

// The statements of one loop body by the temp each defines.
using Defs = absl::flat_hash_map<int, const Stmt*>;

Defs DefsOf(const std::vector<Stmt>& body) {
  Defs defs;
  for (const Stmt& s : body) {
    if (s.result >= 0) defs[s.result] = &s;
  }
  return defs;
}

// Whether temp `a` of one body and temp `b` of another compute the same
// value: the same statements over the same loads, compared structurally; a
// temp neither body defines (an earlier pass's result) only as itself.
// Data-movement statements are never taken as equal (their index checks
// have an effect of their own).
bool SameValue(const Defs& da, int a, const Defs& db, int b) {
  auto ia = da.find(a), ib = db.find(b);
  if (ia == da.end() || ib == db.end()) return ia == da.end() && ib == db.end() && a == b;
  const Stmt &x = *ia->second, &y = *ib->second;
  if (x.is_data_dependent() || y.is_data_dependent()) return false;
  if (x.kind != y.kind || x.dtype != y.dtype || x.args.size() != y.args.size()) return false;
  switch (x.kind) {
    case StmtKind::kLoad:
      return x.buffer == y.buffer && x.index == y.index;
    case StmtKind::kConstant:
      return x.constant == y.constant;
    case StmtKind::kCompute:
      if (x.op != y.op) return false;
      for (size_t k = 0; k < x.args.size(); ++k) {
        if (!SameValue(da, x.args[k], db, y.args[k])) return false;
      }
      return true;
    default:
      return false;
  }
}

// The online form of pass `q`'s accumulators (each paired with a max of
// pass q - 1), or nothing where some accumulator is not a sum of
// exp(y - M) or the pass computes anything else.
std::optional<std::vector<Accumulator>> OnlineSums(const Kernel& k, size_t q) {
  const Pass& before = k.passes[q - 1];
  const Pass& pass = k.passes[q];
  if (pass.accumulators.empty()) return std::nullopt;
  const Defs defs = DefsOf(pass.body), defs_before = DefsOf(before.body);
  std::vector<Accumulator> sums;
  std::vector<int> paired;  // the max temps already taken: one online sum per max
  std::vector<int> cone;    // the temps the sums read: the body must be nothing else
  for (const Accumulator& b : pass.accumulators) {
    if (b.op != graph::Op::kSum || b.index_temp >= 0 || !IsFloating(b.dtype)) return std::nullopt;
    auto exp = defs.find(b.value);
    if (exp == defs.end() || exp->second->kind != StmtKind::kCompute || exp->second->op != graph::Op::kExp) {
      return std::nullopt;
    }
    auto sub = defs.find(exp->second->args.at(0));
    if (sub == defs.end() || sub->second->kind != StmtKind::kCompute || sub->second->op != graph::Op::kSub) {
      return std::nullopt;
    }
    const Accumulator* max = nullptr;
    for (const Accumulator& a : before.accumulators) {
      if (a.temp == sub->second->args.at(1) && a.op == graph::Op::kMax && a.index_temp < 0) max = &a;
    }
    if (max == nullptr || !SameValue(defs, sub->second->args.at(0), defs_before, max->value)) return std::nullopt;
    // Float compute types only: the printed fold spells expf.
    const char* type = ComputeCType(b.dtype);
    if (type != std::string_view("float")) return std::nullopt;
    for (const Stmt* s : {exp->second, sub->second}) {
      if (ComputeCType(s->dtype) != std::string_view(type)) return std::nullopt;
    }
    if (ComputeCType(max->dtype) != std::string_view(type)) return std::nullopt;
    for (int t : paired) {
      if (t == max->temp) return std::nullopt;
    }
    paired.push_back(max->temp);
    Accumulator online = b;
    online.value = max->value;
    online.online_max = max->temp;
    sums.push_back(online);
    // y's statements (a copy of what the max's pass computes), sub, exp.
    std::vector<int> stack = {b.value};
    while (!stack.empty()) {
      const int t = stack.back();
      stack.pop_back();
      auto it = defs.find(t);
      if (it == defs.end() || std::find(cone.begin(), cone.end(), t) != cone.end()) continue;
      cone.push_back(t);
      for (int arg : it->second->args) stack.push_back(arg);
    }
  }
  // The body computes only what the sums fold (lowering emits nothing
  // else); anything more keeps the pass.
  if (cone.size() != pass.body.size()) return std::nullopt;
  return sums;
}

}  // namespace

Kernel FoldExpSumsOnline(Kernel kernel) {
  for (size_t q = 1; q < kernel.passes.size();) {
    std::optional<std::vector<Accumulator>> sums = OnlineSums(kernel, q);
    if (!sums) {
      ++q;
      continue;
    }
    // Appended after the pass's own accumulators: every accumulator keeps
    // its place in the order across passes (the split's partial buffers).
    for (Accumulator& a : *sums) kernel.passes[q - 1].accumulators.push_back(a);
    kernel.passes.erase(kernel.passes.begin() + static_cast<std::ptrdiff_t>(q));
  }
  return kernel;
}

size_t PassesAfterOnlineExpSums(const Kernel& kernel) { return FoldExpSumsOnline(kernel).passes.size(); }

bool FoldsExpSumsOnline(const Kernel& k, const TuningSnapshot& tuning) {
  return tuning.On(Knob::kOnlineExpSums) && PassesAfterOnlineExpSums(k) < k.passes.size();
}

}  // namespace fusebox::backend
