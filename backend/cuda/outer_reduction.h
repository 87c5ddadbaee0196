// CUDA reductions over outer dims with more than one loop over the reduced
// dim (softmax, log_softmax, norms over dim 0 or a middle dim; Inductor's
// "outer" reduction hint). A block covers a tile of adjacent columns (the
// output positions) with `lanes` threads on each column walking the reduced
// dim, so a warp reads whole 32-byte sectors of a row; a pass's partials
// combine in shared memory, and across a thread-block cluster where the tile
// is split over several blocks (sm_90+). Where the column's share fits, each
// thread holds its elements in registers between passes, so HBM is read once.
// Single-pass column sums keep their own split layouts (column_tiles.h).
#pragma once

#include <optional>
#include <string>

#include "backend/cuda/row_spread.h"
#include "backend/kernel_ir.h"
#include "backend/tuning.h"

namespace fusebox::backend {

// A warp covers `columns` adjacent columns x (32 / columns) lanes; `warps`
// warps share a column group (their lanes stack), and a block holds
// `groups` column groups side by side. A pass combines a column's lanes by
// shuffles inside the warp, then (warps > 1) through shared memory, then
// (blocks > 1) over the cluster's blocks.
struct CudaOuterLayout {
  int columns = 0;  // adjacent columns per warp: Knob::kOuterWarpColumns (at least a sector), or half that
  int warps = 1;    // warps per column group (a power of two)
  int groups = 1;   // column groups per block
  int blocks = 1;   // blocks per tile: a cluster along the reduced dim (1: none)
  int slots = 0;    // elements each thread holds per held load; 0: each pass reloads
  int lanes_per_warp() const { return 32 / columns; }
  int lanes() const { return lanes_per_warp() * warps; }  // a column's threads in a block
  int threads() const { return 32 * warps * groups; }
  int block_columns() const { return columns * groups; }
  friend bool operator==(const CudaOuterLayout&, const CudaOuterLayout&) = default;
};

// Pure: the layout of a column (RowStrategy::kThreadPerRow) kernel that is
// neither split nor single-pass without per-element stores, from the kernel
// and its device (Kernel::cuda_arch, CudaSmCount in cuda_cluster.h); nullopt for
// every other kernel (and argmax/argmin, which keep a thread per column).
std::optional<CudaOuterLayout> ChooseCudaOuterLayout(const Kernel& kernel, const CudaRowSpread& spread,
                                                     const TuningSnapshot& tuning);

// The kernel's CUDA source in that layout; PrintCuda calls it. One launch of
// ceil(columns / layout.block_columns()) * layout.blocks blocks of
// layout.threads().
std::string PrintCudaOuter(const Kernel& kernel, const CudaOuterLayout& layout, const TuningSnapshot& tuning);

}  // namespace fusebox::backend
