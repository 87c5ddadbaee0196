#include "backend/cuda/row_spread.h"

#include <algorithm>
#include <bit>
#include <optional>

#include "backend/cuda/column_tiles.h"
#include "backend/cuda/cuda_cluster.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/cuda/outer_reduction.h"
#include "backend/online_exp_sums.h"

namespace fusebox::backend {
namespace {

// Column reductions with more than one loop over the column (softmax,
// norms over dim 0) split as single-pass ones do, a launch per pass
// (split_printer.h), where Knob::kOuterSplit says so: 2 always, 0 never (the
// outer layout: one kernel holding or reloading each column,
// outer_reduction.h), 1 by this rule. The outer layout reads HBM once but
// its cost follows the elements (a 4-byte register and a load per element,
// whatever the type, bound by the load queue) and the cluster exchanges of
// each pass; the split re-reads each column per pass, a cost in bytes, and
// adds a launch per pass. Measured on the H200 (bench/NOTES.md): the split
// ran 1.24-1.95x faster where a cluster of 8 blocks holds each column
// ([16411, 1023], [33, 16411, 31]), 1.10-1.43x in 16-bit where 2 do
// ([1031, 16273], [33, 1031, 493]) but 0.79-1.11x in f32 there, and 0.4-0.6x
// on kernels of one wave ([1031, 129], [5, 129, 33]: the launches dominate).
// So: split where the held grid takes more than one wave of the device's SMs
// and the cluster has at least as many blocks as the widest element has
// bytes (4 for f32, 2 for 16-bit types). Since online exp sums fold softmax's
// two passes into one launch, a split of one partial launch (then the
// stores) also won over dim 0 in f32 on 2-block clusters (H200, session 24,
// ms held / split on [1031, 16273]: softmax 0.0927 / 0.0744, log_softmax
// 0.0927 / 0.0779, rms_norm 0.0786 / 0.0698; layer_norm's two launches
// 0.0820 / 0.0915), but not over a middle dim ([33, 1031, 493]: 0.0766 /
// 0.0777 softmax, rms_norm 0.065 / 0.076), where each load splits the column
// index (r / 493, r % 493) and a warp's columns cross the inner dim's end.
// So such a split also takes a cluster of 2 where the columns are dense
// (DenseColumns).

// Whether neighbouring columns sit at neighbouring addresses in every access
// that varies with the column: its index is r plus a part free of r.
bool DenseColumns(const Kernel& k) {
  auto dense = [](const std::vector<Stmt>& body) {
    return std::all_of(body.begin(), body.end(), [](const Stmt& s) {
      return !s.is_access() || !s.index.DependsOn("r") || s.index.IsVarPlusMultipleOf("r", 1);
    });
  };
  return std::all_of(k.passes.begin(), k.passes.end(), [&](const Pass& p) { return dense(p.body); }) &&
         dense(k.elementwise);
}

// The launches before the stores' of a split: a pass each, online exp sums
// folded into their max's.
size_t PartialLaunches(const Kernel& k, const TuningSnapshot& tuning) {
  return FoldsExpSumsOnline(k, tuning) ? PassesAfterOnlineExpSums(k) : k.passes.size();
}

bool SplitsPasses(const Kernel& k, const CudaRowSpread& spread, const TuningSnapshot& tuning) {
  if (spread.strategy != RowStrategy::kThreadPerRow || spread.column_tiles) return false;
  for (const Pass& pass : k.passes) {
    for (const Accumulator& a : pass.accumulators) {
      if (a.index_temp >= 0) return false;
    }
  }
  const int64_t mode = tuning.Get(Knob::kOuterSplit);
  if (mode != 1) return mode == 2;
  const std::optional<CudaOuterLayout> held = ChooseCudaOuterLayout(k, spread, tuning);
  if (!held) return false;
  int element = 1;
  for (const BufferParam& b : k.buffers) element = std::max(element, DTypeSize(b.dtype));
  const int64_t tiles = (k.num_rows + held->block_columns() - 1) / held->block_columns();
  if (tiles * held->blocks <= CudaSmCount(k)) return false;
  return held->blocks >= element || (held->blocks >= 2 && PartialLaunches(k, tuning) == 1 && DenseColumns(k));
}

RowStrategy ChooseStrategy(const Kernel& k, const TuningSnapshot& tuning) {
  if (k.is_column_reduction()) return RowStrategy::kThreadPerRow;
  return k.row_length <= tuning.Get(Knob::kWarpRowLimit) ? RowStrategy::kWarpPerRow : RowStrategy::kBlockPerRow;
}

// Too few rows to fill a GPU: split single-pass rows with no per-element
// stores across ~1000 blocks in all.
int64_t ChooseSplit(const Kernel& k, const CudaRowSpread& spread, const TuningSnapshot& tuning) {
  if (k.kind != fusion::KernelKind::kReduction || k.passes.empty()) return 0;
  const bool single = k.passes.size() == 1 && k.elementwise.empty();
  if (!single && !SplitsPasses(k, spread, tuning)) return 0;
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
    const int64_t tiles = CudaColumnTiles(k);
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
  const bool multi = k.passes.size() > 1 || !k.elementwise.empty();
  if (s.split > 1 && s.strategy == RowStrategy::kThreadPerRow && !s.column_tiles && multi) {
    const int forced = tuning.GetInt(Knob::kColumnLanes);
    s.column_lanes = forced > 0                          ? static_cast<int>(std::bit_floor(static_cast<unsigned>(forced)))
                     : FoldsExpSumsOnline(k, tuning) ? kCudaOnlineColumnLanes
                                                     : 1;
  }
  return s;
}

}  // namespace fusebox::backend
