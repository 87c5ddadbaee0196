#include "backend/cuda/row_spread.h"

#include <algorithm>

#include "backend/cuda/column_tiles.h"
#include "backend/cuda/cuda_printer.h"

namespace fusebox::backend {
namespace {

RowStrategy ChooseStrategy(const Kernel& k, const TuningSnapshot& tuning) {
  if (k.is_column_reduction()) return RowStrategy::kThreadPerRow;
  return k.row_length <= tuning.Get(Knob::kWarpRowLimit) ? RowStrategy::kWarpPerRow : RowStrategy::kBlockPerRow;
}

// Too few rows to fill a GPU: split single-pass rows with no per-element
// stores across ~1000 blocks in all.
int64_t ChooseSplit(const Kernel& k, const CudaRowSpread& spread, const TuningSnapshot& tuning) {
  if (k.passes.size() != 1 || !k.elementwise.empty() || k.kind != fusion::KernelKind::kReduction) return 0;
  // Few long rows, a block per row: chunks of at least 8192 elements.
  if (spread.strategy == RowStrategy::kBlockPerRow && k.num_rows < 128 && k.row_length >= (1 << 16)) {
    return std::clamp<int64_t>(1024 / k.num_rows, 2, k.row_length / 8192);
  }
  // Columns: 2-D tiles where an access moves 4 adjacent columns at once
  // (column_tiles.h), else a thread per column in 256-column blocks: those
  // split the columns into chunks of at least 64 rows for ~512 blocks in
  // all (~4 per SM of an H200's 132, all resident at once). Measured on the
  // H200 with 8192 x 8192 f32 under a read flush:
  // 512 blocks 4090 GB/s, 256 or 1024 3920, 4096 3650.
  // Knob::kColumnBlocks (FUSEBOX_TUNE_COLUMN_BLOCKS) is the 512.
  if (spread.strategy == RowStrategy::kThreadPerRow) {
    if (spread.column_tiles) return CudaColumnTileSplit(k);  // groups of 256-row tile steps
    const int64_t blocks = tuning.Get(Knob::kColumnBlocks);
    const int64_t tiles = (k.num_rows + kCudaBlockSize - 1) / kCudaBlockSize;
    const int64_t split = std::min(blocks / tiles, k.row_length / 64);
    if (split < 2) return 0;
    // Chunks are whole unrolled steps (CudaColumnChunk): none left empty.
    const int64_t chunk = CudaColumnChunk(k.row_length, split, tuning);
    return (k.row_length + chunk - 1) / chunk;
  }
  return 0;
}

}  // namespace

CudaRowSpread ChooseCudaRowSpread(const Kernel& k, const TuningSnapshot& tuning) {
  CudaRowSpread s;
  if (!k.is_reduction()) return s;
  s.strategy = ChooseStrategy(k, tuning);
  if (k.dynamic_extent) return s;
  s.column_tiles = s.strategy == RowStrategy::kThreadPerRow && CudaColumnTilesFit(k, tuning);
  if (const int64_t split = ChooseSplit(k, s, tuning); split > 1) s.split = split;
  return s;
}

}  // namespace fusebox::backend
