#include "backend/cuda/row_access_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "backend/row_invariants.h"

namespace fusebox::backend {
namespace {

// The temporaries of `body` that HoistRowInvariant computes once per row.
std::set<int> RowInvariantTemps(std::vector<Stmt> body, const std::set<int>& varying) {
  std::vector<Stmt> once;
  HoistRowInvariant(&body, &once, varying);
  std::set<int> temps;
  for (const Stmt& s : once) {
    if (s.result >= 0) temps.insert(s.result);
  }
  return temps;
}

// Whether load `s` can be staged (loaded a group at a time before the
// element loop): unmasked, its index's temporaries all computed per row.
bool StagesAlongRow(const Stmt& s, const std::set<int>& per_row) {
  if (s.mask >= 0) return false;
  for (int t : s.index.Temps()) {
    if (!per_row.contains(t)) return false;
  }
  return true;
}

}  // namespace

RowAccessPlanner::RowAccessPlanner(const Kernel& k, const CudaRowLayout& layout, const TuningSnapshot& tuning)
    : k_(k), layout_(layout), tuning_(tuning), v_(layout.vector_width),
      preloaded_(layout.on_chip ? PreloadedSlots(k) : std::set<int>{}),
      lead_(layout.aligned_groups ? ChooseAlignedGroupLead(k) : AlignedGroupLead{}),
      rereads_rows_(CudaCacheHintLevel(tuning) >= 1 && RereadsRows()) {}

// Whether a loop from `next_loop` on reads element (buffer, index) from
// memory again.
bool RowAccessPlanner::ReadAgain(int buffer, const IndexExpr& index, size_t next_loop) const {
  for (size_t l = next_loop; l < k_.NumRowLoops(); ++l) {
    for (const Stmt& s : k_.RowLoop(l)) {
      const bool from_registers = layout_.on_chip && s.cache_slot >= 0 && preloaded_.contains(s.cache_slot);
      if (s.kind == StmtKind::kLoad && s.buffer == buffer && !from_registers && s.index == index) return true;
    }
  }
  return false;
}

// Whether the kernel re-reads rows: some per-element load is read again.
bool RowAccessPlanner::RereadsRows() const {
  for (size_t l = 0; l < k_.NumRowLoops(); ++l) {
    for (const Stmt& s : k_.RowLoop(l)) {
      if (s.kind == StmtKind::kLoad && TouchesEachElementOnce(s.index) && ReadAgain(s.buffer, s.index, l + 1)) return true;
    }
  }
  return false;
}

// The cache hint (cache_hints.h) of a load, in the loop before
// `next_loop`, of an element of `buffer` at `index` that a row touches
// once per pass: kept while a later loop reads it again, else streamed.
CacheHint RowAccessPlanner::LoadHint(int buffer, const IndexExpr& index, size_t next_loop) const {
  if (index.HasTemp()) return CacheHint::kNormal;  // a gathered row: other rows may gather it too
  if (!TouchesEachElementOnce(index)) {
    const bool kept = rereads_rows_ && BroadcastOverRows(index) && (CudaL1HintBits(tuning_) & 4);
    return kept ? CacheHint::kKeep : CacheHint::kNormal;
  }
  if (!rereads_rows_) return k_.elementwise.empty() ? StreamReadOnlyReduction(tuning_) : StreamEverywhere(tuning_);
  if (ReadAgain(buffer, index, next_loop)) return CacheHint::kKeep;
  return (CudaL1HintBits(tuning_) & 2) ? CacheHint::kLastRead : CacheHint::kStream;
}

CacheHint RowAccessPlanner::StoreHint(const IndexExpr& index) const {
  if (!TouchesEachElementOnce(index)) return CacheHint::kNormal;
  if (!rereads_rows_) return StreamEverywhere(tuning_);
  return (CudaL1HintBits(tuning_) & 8) ? CacheHint::kNormal : CacheHint::kStream;
}

// Whether an access of `dtype` at `index` moves whole groups: with aligned
// groups, those at the lead's index and element size.
bool RowAccessPlanner::MovesVectors(DType dtype, const IndexExpr& index) const {
  if (!layout_.aligned_groups) return Vectorizable(dtype, index, v_);
  return DTypeSize(dtype) == lead_.element_size && index == lead_.index;
}

RowAccess RowAccessPlanner::CachedAccess(int slot, size_t next_loop) const {
  const CachedLoad& c = k_.cached_loads[slot];
  return {c.buffer, c.index, slot, MovesVectors(c.dtype, c.index), LoadHint(c.buffer, c.index, next_loop)};
}

bool RowAccessPlanner::AsyncPreload(const RowLoopPlan& preload) const {
  if (layout_.shared_groups == 0 || (k_.cuda_arch != 0 && k_.cuda_arch < 80) || preload.loads.empty()) return false;
  for (const RowAccess& a : preload.loads) {
    const DType dtype = k_.buffers[a.buffer].dtype;
    if (!a.vector || ComputeDType(dtype) != dtype || v_ * DTypeSize(dtype) != 16) return false;
  }
  return true;
}

std::string RowAccessPlanner::AlignedPointers() const {
  std::set<int> buffers;
  auto visit = [&](const std::vector<Stmt>& block) {
    for (const Stmt& s : block) {
      if (s.is_access() && MovesVectors(k_.buffers[s.buffer].dtype, s.index)) buffers.insert(s.buffer);
    }
  };
  for (const Pass& p : k_.passes) visit(p.body);
  visit(k_.elementwise);
  if (buffers.empty()) return "";
  std::string mask;
  if (layout_.aligned_groups) {
    // The groups follow the lead's alignment: every vector buffer must share
    // its pointer's low 4 bits (they share its index and element size).
    const std::string lead = absl::StrCat("(unsigned long long)", k_.buffers[lead_.buffer].name);
    for (int b : buffers) {
      if (b != lead_.buffer) absl::StrAppend(&mask, mask.empty() ? "" : " | ", "((unsigned long long)", k_.buffers[b].name, " ^ ", lead, ")");
    }
    return mask.empty() ? "true" : absl::StrCat("((", mask, ") & 15) == 0");
  }
  for (int b : buffers) {
    const int align = std::min(16, v_ * DTypeSize(k_.buffers[b].dtype));
    absl::StrAppend(&mask, mask.empty() ? "" : " | ", "((unsigned long long)", k_.buffers[b].name, " & ", align - 1, ")");
  }
  return absl::StrCat("(", mask, ") == 0");
}

RowLoopPlan RowAccessPlanner::Plan(size_t loop) const {
  RowLoopPlan plan{.lanes = k_, .body = k_.RowLoop(loop)};
  const std::set<int> varying = loop < k_.passes.size() ? AccumulatorTemps(k_.passes[loop].accumulators) : std::set<int>{};
  const bool hoists = MayHoistRowInvariants(k_);
  const std::set<int> per_row = hoists ? RowInvariantTemps(plan.body, varying) : std::set<int>{};
  std::set<int> staged;
  for (Stmt& s : plan.body) {
    if (s.kind == StmtKind::kLoad && layout_.on_chip && s.cache_slot >= 0) {
      if (!preloaded_.contains(s.cache_slot) && staged.insert(s.cache_slot).second) {
        plan.loads.push_back(CachedAccess(s.cache_slot, loop + 1));
      }
    } else if (s.kind == StmtKind::kLoad) {
      s.cache_slot = -1;  // a plain load, unless staged below
      // Masked loads, and gathered ones whose index changes along the row,
      // stay in the body after their index and mask. A gathered row (an
      // embedding's: the token id once per row, then its row of the table)
      // is staged and moved in vectors as the row's own loads are.
      // (Rows held on chip give every such row a slot: lower_reduction.cc.)
      if (!s.index.DependsOn("j") || layout_.on_chip || !StagesAlongRow(s, per_row)) continue;
      s.cache_slot = static_cast<int>(plan.loads.size());
      plan.loads.push_back({s.buffer, s.index, s.cache_slot, MovesVectors(k_.buffers[s.buffer].dtype, s.index),
                            LoadHint(s.buffer, s.index, loop + 1)});
    } else if (s.kind == StmtKind::kStore && s.cache_slot < 0 && MovesVectors(k_.buffers[s.buffer].dtype, s.index)) {
      const int array = static_cast<int>(plan.stores.size());
      plan.stores.push_back({s.buffer, s.index, array, true, StoreHint(s.index)});
      plan.lanes.buffers.push_back({absl::StrCat("s", array), k_.buffers[s.buffer].dtype, true});
      s.buffer = static_cast<int>(plan.lanes.buffers.size()) - 1;
      s.index = IndexExpr::Var("e", v_);
    }
  }
  if (hoists) HoistRowInvariant(&plan.body, &plan.once, varying);
  return plan;
}

}  // namespace fusebox::backend
