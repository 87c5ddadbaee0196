#include "backend/row_invariants.h"

#include <utility>

namespace fusebox::backend {

void HoistRowInvariant(std::vector<Stmt>* body, std::vector<Stmt>* once, std::set<int> varying) {
  auto invariant_temp = [&](int t) { return t < 0 || !varying.contains(t); };
  std::vector<Stmt> rest;
  for (Stmt& s : *body) {
    bool invariant = s.kind != StmtKind::kStore && s.cache_slot < 0 && invariant_temp(s.mask);
    for (const char* var : {"j", "e", "k", "i"}) invariant = invariant && !s.index.DependsOn(var);
    for (int t : s.index.Temps()) invariant = invariant && invariant_temp(t);
    for (int t : s.args) invariant = invariant && invariant_temp(t);
    if (!invariant && s.result >= 0) varying.insert(s.result);
    (invariant ? once : &rest)->push_back(std::move(s));
  }
  *body = std::move(rest);
}

bool MayHoistRowInvariants(const Kernel& kernel) { return kernel.row_length > 0; }

std::set<int> AccumulatorTemps(const std::vector<Accumulator>& accumulators) {
  std::set<int> temps;
  for (const Accumulator& a : accumulators) temps.insert({a.temp, a.index_temp});
  return temps;
}

}  // namespace fusebox::backend
