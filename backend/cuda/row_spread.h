// How a CUDA reduction spreads its rows over the GPU: the threads that share
// a row (a block, a warp's lanes, or one thread), how many chunks each row is
// split into, and whether column sums read 2-D tiles. ChooseCudaSchedule
// chooses it first, from the kernel IR's neutral facts (Kernel::axis, the
// shapes) and the tuning; every CUDA layout rule and printer then reads it
// from the schedule (CudaSchedule::spread), never from the kernel IR.
#pragma once

#include <cstdint>

#include "backend/kernel_ir.h"
#include "backend/tuning.h"

namespace fusebox::backend {

enum class RowStrategy {
  kBlockPerRow,   // long rows: 256 threads stride along a row, then combine
  kWarpPerRow,    // short rows: L lanes of a warp each (CudaLanesPerRow, 1 to 32), shuffles only
  kThreadPerRow,  // column reductions (Kernel::is_column_reduction): one thread walks a
                  // row alone, and neighbouring threads read neighbouring addresses
};

struct CudaRowSpread {
  RowStrategy strategy = RowStrategy::kBlockPerRow;  // pointwise kernels: unused
  // Too few rows (or columns) to fill the GPU: each row is split into
  // `split` chunks whose partial results a first kernel (<name>_partial)
  // writes to scratch, then a second (<name>) combines each row's partials
  // and runs row_body. kBlockPerRow: a block per (row, chunk), then a block
  // per row. kThreadPerRow: a block per (256 columns, chunk), or per (64
  // columns, group) where `column_tiles`, then a thread per column. 0: not
  // split.
  int64_t split = 0;
  // Column reductions read as 2-D tiles of 4 adjacent columns
  // (column_tiles.h), with the split CudaColumnTileSplit gives.
  bool column_tiles = false;
  // Split columns of several passes (a thread per column): threads per
  // column in a block, each walking its share of the column's chunk, their
  // folds combined in shared memory before the chunk's one partial
  // (Knob::kColumnLanes): 256 / column_lanes columns per block.
  int column_lanes = 1;
  friend bool operator==(const CudaRowSpread&, const CudaRowSpread&) = default;
};

// Column lanes of split columns whose exp sums fold online (softmax,
// log_softmax; FoldsExpSumsOnline); other splits (norms) keep 1. Measured on
// the H200 (bench/NOTES.md, ms, 1 / 2 / 4 lanes): softmax [16411, 1023] f32
// 0.0925 / 0.0887 / 0.0793, [33, 16411, 31] f32 0.0985 / 0.1044 / 0.0932;
// with 4 lanes 16-bit columns fold online too (bf16 [16411, 1023] 0.0668
// two passes, 0.0613 online): the online pass's exp and rescale per element
// leave one thread per column too few loads in flight. Norms lost with
// lanes (layer_norm [16411, 1023] bf16 0.0673 / 0.0822 / 0.0788): their
// passes' light folds already keep the loads issuing, and the lanes' shared
// memory combine costs each pass.
inline constexpr int kCudaOnlineColumnLanes = 4;

// Pure: the spread of a lowered kernel under `tuning`. Rows up to
// Knob::kWarpRowLimit (1024) take a warp each, or for short rows a few of its
// lanes; longer ones a block; column reductions a thread per row. Only
// static row counts split (a run-time count may be large).
CudaRowSpread ChooseCudaRowSpread(const Kernel& kernel, const TuningSnapshot& tuning);

}  // namespace fusebox::backend
