// How the CUDA row printer (row_printer.h) moves a row kernel's data: which
// loads and stores of each loop over the row are staged through registers a
// group at a time, their cache hints (cache_hints.h), which move 16-byte
// vectors, and the run-time test that the pointers are aligned for them.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "backend/cuda/cache_hints.h"
#include "backend/cuda/row_layout.h"
#include "backend/kernel_ir.h"
#include "backend/tuning.h"

namespace fusebox::backend {

// One row access staged through registers: a load into array c<array>, or a
// store from array s<array> (one group).
struct RowAccess {
  int buffer;
  IndexExpr index;
  int array;
  bool vector;
  CacheHint hint = CacheHint::kNormal;  // of its 16-byte accesses (cache_hints.h)
};

// One loop over the row: its body with staged loads reading c<array>[k] and
// staged stores writing s<array>[e], and what to stage.
struct RowLoopPlan {
  Kernel lanes;  // the kernel's buffers, then the store staging arrays
  std::vector<Stmt> once;  // computed once before the loop (backend/row_invariants.h)
  std::vector<Stmt> body;
  std::vector<RowAccess> loads, stores;
};

// The plans of one kernel in one layout (the schedule's).
class RowAccessPlanner {
 public:
  RowAccessPlanner(const Kernel& k, const CudaRowLayout& layout, const TuningSnapshot& tuning);

  // Which loads of loop `loop` (the passes, then the elementwise loop) are
  // staged (looped rows: every per-element load; persistent rows: cached
  // values the passes did not preload) and which stores are (the
  // vectorizable ones).
  RowLoopPlan Plan(size_t loop) const;
  // The staged load of cache slot `slot`, hinted for the loops from `next_loop` on.
  RowAccess CachedAccess(int slot, size_t next_loop) const;
  // Whether the preload copies the shared-memory groups with cp.async: every
  // preloaded value moves as a 16-byte group of the type it is held in
  // (float: no conversion on the way), on sm_80+.
  bool AsyncPreload(const RowLoopPlan& preload) const;
  // Whether every buffer with a vectorized access is aligned for it (the
  // kernel's choice of `fb_vec`), as a condition; "" without such accesses.
  std::string AlignedPointers() const;
  const std::set<int>& preloaded() const { return preloaded_; }  // on-chip rows: slots loaded before the passes
  const AlignedGroupLead& lead() const { return lead_; }          // aligned groups: the access that places them

 private:
  bool ReadAgain(int buffer, const IndexExpr& index, size_t next_loop) const;
  bool RereadsRows() const;
  CacheHint LoadHint(int buffer, const IndexExpr& index, size_t next_loop) const;
  CacheHint StoreHint(const IndexExpr& index) const;
  bool MovesVectors(DType dtype, const IndexExpr& index) const;

  const Kernel& k_;
  const CudaRowLayout layout_;
  const TuningSnapshot& tuning_;
  const int v_;
  const std::set<int> preloaded_;
  const AlignedGroupLead lead_;
  const bool rereads_rows_;  // hints on, and rows are read from memory more than once
};

}  // namespace fusebox::backend
