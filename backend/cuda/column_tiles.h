// CUDA column reductions (RowStrategy::kThreadPerRow: the reduced dims are
// not the innermost, as in sum(x, 0)) split over groups of rows and read as
// short-lived 2-D tiles: a block of 16 x 64 threads covers 64 columns, each
// thread 4 adjacent columns in one 16-byte access, and kCudaColumnTileSteps
// rows (64 apart) loaded at once; the block folds its 64 partial rows in
// shared memory and writes one partial row per group, which the split's
// combine kernel folds (CudaRowSpread::split, cuda_printer.cc). Against a thread per
// column (the scalar layout, still used where no access is a run of 4
// columns) this measured 3837-3884 GB/s for the partial launch of an 8192 x
// 8192 f32 sum on the H200, against 3666 (bench/experiments/sums.cu).
#pragma once

#include <cstdint>
#include <string>

#include "backend/cuda/row_spread.h"
#include "backend/kernel_ir.h"
#include "backend/tuning.h"

namespace fusebox::backend {

inline constexpr int kCudaColumnTileWidth = 4;     // adjacent columns per thread (16 bytes of f32)
inline constexpr int kCudaColumnTileThreadsX = 16;  // threads along the columns
inline constexpr int kCudaColumnTileThreadsY = 64;  // threads along the reduced dim
inline constexpr int kCudaColumnTileSteps = 4;      // rows each thread loads at once, 64 apart
inline constexpr int kCudaColumnTileBlock = kCudaColumnTileThreadsX * kCudaColumnTileThreadsY;
inline constexpr int kCudaColumnTileColumns = kCudaColumnTileThreadsX * kCudaColumnTileWidth;  // per block: 64
inline constexpr int kCudaColumnTileRows = kCudaColumnTileThreadsY * kCudaColumnTileSteps;     // per step: 256
// The combine walks one partial per group for each column: at most this
// many groups (longer columns loop over several tile steps per group).
inline constexpr int64_t kCudaColumnTileMaxGroups = 64;

// Whether a column reduction's (kThreadPerRow) split prints as tiles: one pass with no
// per-element stores and no index accumulators (argmax keeps the scalar
// layout), at most two accumulators (16 KB of shared memory each), a static
// extent, columns in whole groups of 4 and at least one full tile's worth
// (64), at least two groups of 256 rows, and a 4-byte access whose 4
// adjacent columns are adjacent in memory; and Knob::kColumnTiles is on.
// ChooseCudaRowSpread records the answer in CudaRowSpread::column_tiles.
bool CudaColumnTilesFit(const Kernel& kernel, const TuningSnapshot& tuning);
// Split kernels printed as tiles (CudaRowSpread::column_tiles, and the split
// that CudaColumnTileSplit chose).
bool UsesCudaColumnTiles(const CudaRowSpread& spread);
// The split of a kernel that fits: groups of whole 256-row steps, at most
// kCudaColumnTileMaxGroups of them.
int64_t CudaColumnTileSplit(const Kernel& kernel);
// Tile steps (256 rows each) per group.
int64_t CudaColumnTileStepsPerGroup(const Kernel& kernel);
// The partial kernel's grid: 64-column strips times groups.
int64_t CudaColumnTileGridSize(const Kernel& kernel, const CudaRowSpread& spread);

// The partial kernel `<name>_partial(params)`, where `params` ends with the
// partial buffers fb_part<c>; the caller prints the prelude and the combine.
std::string PrintCudaColumnTiles(const Kernel& kernel, const std::string& params, const TuningSnapshot& tuning);

}  // namespace fusebox::backend
