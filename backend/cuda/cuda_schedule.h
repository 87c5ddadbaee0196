// A CUDA kernel's schedule as one value: every launch decision (kind, threads
// per block, how many iterations a block takes, how rows spread over threads,
// the split and its partial kernel, the column tiles, the row layout, the
// cluster, the grid cap, dynamic shared memory), chosen once per kernel by
// ChooseCudaSchedule from the kernel IR's target-neutral facts, the device
// (Kernel::cuda_arch, cuda_sm_count) and the tuning, and read by the launch,
// KernelInfo, explain() and FUSEBOX_DEBUG=schedule. CompileAhead chooses it,
// PrintCuda dispatches on it (the row, outer, column-tile and cluster
// printers take their spread and layouts from it) and the launch reads the
// same value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "backend/cuda/cuda_cluster.h"
#include "backend/cuda/outer_reduction.h"
#include "backend/cuda/row_layout.h"
#include "backend/cuda/row_spread.h"
#include "backend/kernel_ir.h"
#include "backend/tuning.h"

namespace fusebox::backend {

enum class CudaScheduleKind {
  kPointwise,        // 256 threads of 4 elements, a block-width apart
  kPointwiseVector,  // 256 threads of 16 bytes of consecutive elements per buffer
  kBlockPerRow,      // a block (or its split chunks) per contiguous row
  kWarpPerRow,       // L lanes of a warp per contiguous row (rows->threads_per_row)
  kThreadPerRow,     // a thread per row across the reduced (outer) dims
  kColumnTiles,      // thread per row, read as 2-D tiles (column_tiles.h), split
  kCluster,          // a thread-block cluster per row (cuda_cluster.h)
  kOuterTiles,       // column tiles with lanes along the reduced dim, per pass (outer_reduction.h)
};
const char* CudaScheduleKindName(CudaScheduleKind kind);

struct CudaSchedule {
  CudaScheduleKind kind = CudaScheduleKind::kPointwise;
  int block = 0;         // threads per block (the final kernel's, when split)
  int vector_width = 1;  // elements each access moves (kPointwiseVector, rows)
  // Grid: ceil(iterations / per_block) * blocks_each blocks, or fixed_grid
  // when set; capped at blocks_per_sm per SM when blocks_per_sm > 0 (rows
  // walked grid-stride). Iterations: elements, or rows for reductions.
  int64_t per_block = 1;
  int64_t blocks_each = 1;
  int64_t fixed_grid = 0;
  int blocks_per_sm = 0;
  int64_t shared_bytes = 0;  // dynamic shared memory per block
  // Reductions: the threads per row, the split, the column tiles (chosen
  // first; the layouts below follow from it).
  CudaRowSpread spread;
  // Split reductions (spread.split > 1): a partial kernel per pass
  // (<name>_partial, then <name>_partial1, ... for column reductions of
  // several passes; grid as above, its own block size), then a combine of
  // combine_grid blocks of `block` threads (it also runs the per-element
  // stores, over the same chunks, where the kernel has them).
  int partial_block = 0;
  int partial_launches = 0;
  // Sums of exp(x - max) fold online in their max's pass (online_exp_sums.h,
  // the CUDA pass of that name): split columns, a launch fewer each; rows
  // not held in registers that the fold leaves read once (`rows` is the
  // folded kernel's layout).
  bool online_exp_sums = false;
  int64_t combine_grid = 0;
  std::optional<CudaRowLayout> rows;  // reductions along contiguous rows
  ClusterLayout cluster;
  std::optional<CudaOuterLayout> outer;  // multi-pass reductions over outer dims

  // Whether PrintCuda prints the kernel with the row printer (row_printer.h).
  bool row_printer() const { return kind != CudaScheduleKind::kCluster && spread.split <= 1 && !outer && rows.has_value(); }

  int64_t Grid(int64_t iterations, int sm_count) const;
  std::string ToString() const;
  friend bool operator==(const CudaSchedule&, const CudaSchedule&) = default;
};

// The schedule of a lowered kernel (not an extern one) under `tuning`.
CudaSchedule ChooseCudaSchedule(const Kernel& kernel, const TuningSnapshot& tuning);

}  // namespace fusebox::backend
