#include "backend/cuda/cuda_schedule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "backend/cuda/column_tiles.h"
#include "backend/cuda/cuda_cluster.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/online_exp_sums.h"

namespace fusebox::backend {

const char* CudaScheduleKindName(CudaScheduleKind kind) {
  const char* names[] = {"pointwise", "pointwise-vector", "block-per-row", "warp-per-row",
                         "thread-per-row", "column-tiles", "cluster", "outer-tiles"};
  return names[static_cast<int>(kind)];
}

namespace {

// Knob::kClusters: 0 never; 1 (the rule) rows a block would loop over that
// are fewer than the SMs: a block per row leaves the rest idle, where a
// cluster's blocks share each row; 2 every row CudaClusterLayout takes (the
// looped kernel won where the rows fill the device: 2395 GB/s beside the
// cluster's 1544 on 1024 x 65536).
bool UsesCudaCluster(const Kernel& k, const CudaRowSpread& spread, const TuningSnapshot& tuning) {
  const int clusters = tuning.GetInt(Knob::kClusters);
  if (clusters != 1) return clusters == 2;
  return UsesCudaRowLayout(k, spread) && k.num_rows < CudaSmCount(k) && !ChooseCudaRowLayout(k, spread, tuning).on_chip;
}

}  // namespace

CudaSchedule ChooseCudaSchedule(const Kernel& k, const TuningSnapshot& tuning) {
  CudaSchedule s;
  // How the rows spread first: every layout below follows from it.
  const CudaRowSpread& spread = s.spread = ChooseCudaRowSpread(k, tuning);
  s.block = CudaBlockSize(k, spread, tuning);
  if (const int v = CudaVectorWidth(k); v > 1) {
    s.kind = CudaScheduleKind::kPointwiseVector;
    s.vector_width = v;
    s.per_block = int64_t{kCudaBlockSize} * v;
    return s;
  }
  if (!k.is_reduction()) {
    s.per_block = int64_t{kCudaBlockSize} * CudaPointwiseElementsPerThread(k, tuning);
    return s;
  }
  // Rows a block would loop over, on sm_90+: a thread-block cluster per row
  // (cuda_cluster.h) where the rows are too few for the device's SMs.
  if (UsesCudaCluster(k, spread, tuning)) {
    if (const ClusterLayout c = CudaClusterLayout(k, spread, k.cuda_arch); c.blocks > 1) {
      s.kind = CudaScheduleKind::kCluster;
      s.cluster = c;
      s.block = c.threads;
      s.blocks_each = c.blocks;
      return s;
    }
  }
  if (UsesCudaRowLayout(k, spread)) {
    s.rows = ChooseCudaRowLayout(k, spread, tuning);
    // Rows not held in registers alone that the online exp sums leave read
    // once (a logsumexp: cross-entropy's over the vocabulary) fold them
    // online and take the read-once layout: streamed, many rows per SM,
    // rather than held in shared memory one row per SM or re-read.
    if (const Kernel folded = FoldExpSumsOnline(k); tuning.On(Knob::kOnlineExpSums) &&
        folded.passes.size() < k.passes.size() && folded.passes.size() == 1 && folded.elementwise.empty() &&
        (!s.rows->on_chip || s.rows->shared_groups > 0)) {
      s.online_exp_sums = true;
      s.rows = ChooseCudaRowLayout(folded, spread, tuning);
      s.block = s.rows->block_size;
    }
    s.vector_width = s.rows->vector_width;
    if (s.rows->grid_stride) s.blocks_per_sm = tuning.GetInt(Knob::kLongRowBlocks);
    s.shared_bytes = s.rows->shared_bytes;
  }
  if (spread.split > 1) {
    s.partial_block = CudaPartialBlockSize(k, spread, tuning);
    s.partial_launches = static_cast<int>(k.passes.size());
    s.combine_grid = CudaCombineGridSize(k, spread);
  }
  switch (spread.strategy) {
    case RowStrategy::kBlockPerRow:
      s.kind = CudaScheduleKind::kBlockPerRow;
      s.blocks_each = std::max<int64_t>(spread.split, 1);
      break;
    case RowStrategy::kWarpPerRow:
      s.kind = CudaScheduleKind::kWarpPerRow;
      s.per_block = s.rows->rows_per_block;  // 32 / L rows per warp (CudaRowLayout::threads_per_row = L)
      break;
    case RowStrategy::kThreadPerRow:
      if (UsesCudaColumnTiles(spread)) {
        s.kind = CudaScheduleKind::kColumnTiles;
        s.fixed_grid = CudaColumnTileGridSize(k, spread);
      } else if (const std::optional<CudaOuterLayout> outer = ChooseCudaOuterLayout(k, spread, tuning)) {
        s.kind = CudaScheduleKind::kOuterTiles;
        s.per_block = outer->block_columns();
        s.blocks_each = outer->blocks;
        s.outer = outer;
      } else {
        s.kind = CudaScheduleKind::kThreadPerRow;
        s.per_block = kCudaBlockSize / spread.column_lanes;
        s.blocks_each = std::max<int64_t>(spread.split, 1);
        // A split column's passes each read it from HBM: fold the sums of
        // exp(x - max) online where the kernel has them (online_exp_sums.h),
        // with the spread's column lanes. Measured on the H200
        // (bench/NOTES.md, ms, two passes / online with 4 lanes): softmax
        // [16411, 1023] f32 0.0925 / 0.0793, bf16 0.0668 / 0.0613,
        // [33, 16411, 31] f32 0.0985 / 0.0927, bf16 0.0702 / 0.0652.
        if (spread.split > 1 && FoldsExpSumsOnline(k, tuning)) {
          s.online_exp_sums = true;
          s.partial_launches = static_cast<int>(PassesAfterOnlineExpSums(k));
        }
      }
      break;
  }
  return s;
}

int64_t CudaSchedule::Grid(int64_t iterations, int sm_count) const {
  int64_t grid = fixed_grid > 0 ? fixed_grid : (iterations + per_block - 1) / per_block * blocks_each;
  if (blocks_per_sm > 0) grid = std::min<int64_t>(grid, int64_t{blocks_per_sm} * sm_count);
  return grid;
}

std::string CudaSchedule::ToString() const {
  std::string s = absl::StrCat(CudaScheduleKindName(kind), ", block ", block);
  if (vector_width > 1) absl::StrAppend(&s, ", vector ", vector_width);
  if (fixed_grid > 0) {
    absl::StrAppend(&s, ", grid ", fixed_grid);
  } else {
    absl::StrAppend(&s, ", ", per_block, " per block");
    if (blocks_each > 1) absl::StrAppend(&s, " x ", blocks_each, " blocks");
  }
  if (blocks_per_sm > 0) absl::StrAppend(&s, ", at most ", blocks_per_sm, " blocks per SM (grid-stride)");
  if (shared_bytes > 0) absl::StrAppend(&s, ", shared ", shared_bytes, " B");
  if (spread.split > 1) {
    absl::StrAppend(&s, ", split ", spread.split, " (partial block ", partial_block,
                    partial_launches > 1 ? absl::StrCat(", ", partial_launches, " partial launches") : "",
                    online_exp_sums ? ", online exp sums" : "",
                    spread.column_lanes > 1 ? absl::StrCat(", ", spread.column_lanes, " lanes per column") : "",
                    ", combine grid ", combine_grid, ")");
  }
  if (rows) {
    const CudaRowLayout& l = *rows;
    absl::StrAppend(&s, ", rows: ", l.threads_per_row, " threads/row, ", l.rows_per_block, " rows/block, ",
                    l.on_chip ? "on chip" : "looped", ", groups ", l.groups);
    if (l.aligned_groups) absl::StrAppend(&s, " aligned to 16 bytes");
    if (l.shared_groups > 0) absl::StrAppend(&s, ", shared groups ", l.shared_groups);
    if (l.min_blocks > 0) absl::StrAppend(&s, ", min blocks ", l.min_blocks);
    if (online_exp_sums) absl::StrAppend(&s, ", online exp sums");
  }
  if (outer) {
    absl::StrAppend(&s, ", outer: warps of ", outer->columns, " columns x ", outer->lanes_per_warp(), " lanes, ",
                    outer->warps, " warps per column, ", outer->groups, " groups, ", outer->blocks, " blocks per tile, ",
                    outer->slots > 0 ? absl::StrCat(outer->slots, " held slots") : "reloaded");
  }
  if (cluster.blocks > 1) {
    absl::StrAppend(&s, ", cluster ", cluster.blocks, " x ", cluster.threads, " threads, ", cluster.slots, " slots");
  }
  return s;
}

}  // namespace fusebox::backend
