#include "backend/cuda/row_layout.h"

#include <algorithm>

#include "backend/cuda/cache_hints.h"
#include "backend/cuda/cuda_printer.h"
#include "fusion/plan.h"

namespace fusebox::backend {

bool PersistentRows(const Kernel& k) { return k.kind == fusion::KernelKind::kPersistent; }

namespace {

// Times a row is read: once per pass, once more for the element stores.
size_t RowReads(const Kernel& k) { return k.passes.size() + (k.elementwise.empty() ? 0 : 1); }

// Values per thread a persistent block row aims at (kCudaRowValuesPerThread):
// the short rows' count for rows read once (a sum).
int TunedRowValues(const Kernel& k, const TuningSnapshot& tuning) {
  if (const int64_t tuned = tuning.Get(Knob::kRowValues); tuned > 0) return static_cast<int>(tuned);
  return k.row_length <= kCudaShortRowLength || RowReads(k) == 1 ? kCudaShortRowValuesPerThread : kCudaRowValuesPerThread;
}

// Element size of a dtype whose accesses may be vectorized (2 or 4 bytes), else 0.
int VectorElementSize(DType dtype) {
  const int size = DTypeSize(dtype);
  return size == 2 || size == 4 ? size : 0;
}

// Whether `index` walks a row: j plus a part that varies with the row (not
// an operand broadcast over the rows, nor a gather).
bool WalksRow(const IndexExpr& index) { return index.IsVarPlusMultipleOf("j", 1) && index.DependsOn("r") && !index.HasTemp(); }

// Calls `visit` on each access of the passes, then of the per-element stores.
template <typename F>
void EachRowAccess(const Kernel& k, F visit) {
  for (const Pass& p : k.passes) {
    for (const Stmt& s : p.body) {
      if (s.is_access()) visit(s);
    }
  }
  for (const Stmt& s : k.elementwise) {
    if (s.is_access()) visit(s);
  }
}

struct RowVectors {
  int v = 1;
  bool aligned_groups = false;
};

// V: 16 bytes of the narrowest access that is contiguous in j, halved until
// it divides the row; 1 when no access qualifies. Where that leaves the row
// accesses narrower than 16 bytes (odd rows), aligned groups (the knob's
// rule) give them 16 bytes: V of the narrowest row access.
RowVectors ChooseRowVectors(const Kernel& k, const TuningSnapshot& tuning) {
  int size = 0;
  EachRowAccess(k, [&](const Stmt& s) {
    const int bytes = VectorElementSize(k.buffers[s.buffer].dtype);
    if (bytes != 0 && s.index.IsVarPlusMultipleOf("j", 16 / bytes)) size = size == 0 ? bytes : std::min(size, bytes);
  });
  RowVectors r;
  if (size != 0) {
    r.v = 16 / size;
    while (r.v > 1 && k.row_length % r.v != 0) r.v /= 2;
  }
  // Knob::kAlignedRowGroups 1 (the rule): rows read once, nothing stored
  // per element (a sum). Measured on the H200 (bench/NOTES.md, ms, scalar /
  // aligned): sum [1023, 16411] bf16 0.0197 / 0.0143, [453439, 37] bf16
  // 0.0215 / 0.0144, [16273, 1031] f32 0.0295 / 0.0226; rows read again or
  // stored per element lost (softmax [1023, 16411] bf16 0.0367 / 0.0511,
  // rms_norm [16273, 1031] bf16 0.0383 / 0.0904): the masks in each pass and
  // the partial groups' element stores cost more than the wider loads gain.
  const int mode = tuning.GetInt(Knob::kAlignedRowGroups);
  const bool applies = mode == 2 || (mode == 1 && RowReads(k) == 1);
  const AlignedGroupLead lead = ChooseAlignedGroupLead(k);
  // Rows of fewer than two vectors gain nothing from a masked head.
  if (applies && lead.buffer >= 0 && r.v * lead.element_size < 16 && k.row_length >= 32 / lead.element_size) {
    r.v = 16 / lead.element_size;
    r.aligned_groups = true;
  }
  return r;
}

// Whether a row loop of `k` loads an operand broadcast over the rows (a
// norm's weight).
bool ReadsBroadcastOperand(const Kernel& k) {
  for (size_t l = 0; l < k.NumRowLoops(); ++l) {
    for (const Stmt& s : k.RowLoop(l)) {
      if (s.kind == StmtKind::kLoad && BroadcastOverRows(s.index)) return true;
    }
  }
  return false;
}

// What both one-group loops (LoopsWideRows, LoopsNormRows) need: persistent
// block rows with a static row count, read more than once, in groups of 4 or
// more.
bool MayLoopOneGroupPerStep(const Kernel& k, const CudaRowSpread& spread, const TuningSnapshot& tuning) {
  return spread.strategy == RowStrategy::kBlockPerRow && PersistentRows(k) && RowReads(k) > 1 &&
         !k.dynamic_extent && ChooseRowVectors(k, tuning).v >= 4;
}

}  // namespace

std::set<int> PreloadedSlots(const Kernel& k) {
  std::set<int> slots;
  for (const Pass& p : k.passes) {
    for (const Stmt& s : p.body) {
      if (s.kind == StmtKind::kLoad && s.cache_slot >= 0) slots.insert(s.cache_slot);
    }
  }
  return slots;
}

bool Vectorizable(DType dtype, const IndexExpr& index, int v) {
  const int size = VectorElementSize(dtype);
  return v > 1 && size != 0 && index.IsVarPlusMultipleOf("j", std::min(v, 16 / size));
}

AlignedGroupLead ChooseAlignedGroupLead(const Kernel& k) {
  AlignedGroupLead lead;
  EachRowAccess(k, [&](const Stmt& s) {
    const int bytes = VectorElementSize(k.buffers[s.buffer].dtype);
    if (bytes == 0 || !WalksRow(s.index) || (lead.buffer >= 0 && bytes >= lead.element_size)) return;
    lead = {s.buffer, s.index, bytes};
  });
  return lead;
}


int CudaLanesPerRow(int64_t row_length, int vector_width, int64_t min_elements) {
  const int64_t per_lane = std::max<int64_t>(min_elements, vector_width);
  int lanes = 1;
  while (lanes < 32 && row_length >= 2 * lanes * per_lane) lanes *= 2;
  return lanes;
}

bool UsesCudaRowLayout(const Kernel& k, const CudaRowSpread& spread) {
  return k.is_reduction() && spread.split <= 1 && spread.strategy != RowStrategy::kThreadPerRow;
}

bool LoopsReadingTwice(const Kernel& k, const CudaRowSpread& spread) {
  return spread.strategy == RowStrategy::kBlockPerRow && RowReads(k) == 2 && k.row_length <= kCudaTwoReadLoopLimit &&
         !k.dynamic_extent;
}

bool LoopsWideRows(const Kernel& k, const CudaRowSpread& spread, const TuningSnapshot& tuning) {
  return tuning.On(Knob::kWideRowLoop) && MayLoopOneGroupPerStep(k, spread, tuning) && k.row_length > kCudaShortRowLength &&
         k.row_length <= kCudaWideLoopRowLimit && !ReadsBroadcastOperand(k);
}

bool LoopsNormRows(const Kernel& k, const CudaRowSpread& spread, const TuningSnapshot& tuning) {
  return tuning.On(Knob::kNormRowLoop) && MayLoopOneGroupPerStep(k, spread, tuning) && k.row_length >= kCudaNormLoopMinLength &&
         k.row_length <= kCudaShortRowLength && ReadsBroadcastOperand(k);
}

bool LoopsOneGroupPerStep(const Kernel& k, const CudaRowSpread& spread, const TuningSnapshot& tuning) {
  return LoopsWideRows(k, spread, tuning) || LoopsNormRows(k, spread, tuning);
}

CudaRowLayout ChooseCudaRowLayout(const Kernel& k, const CudaRowSpread& spread, const TuningSnapshot& tuning) {
  CudaRowLayout layout;
  const RowVectors vectors = ChooseRowVectors(k, tuning);
  const int v = layout.vector_width = vectors.v;
  layout.aligned_groups = vectors.aligned_groups;
  const int64_t cached = static_cast<int64_t>(PreloadedSlots(k).size());
  // Values each thread holds per cached input, with `threads` per row
  // (aligned groups cover the row and up to V - 1 elements before it).
  const int64_t span = k.row_length + (layout.aligned_groups ? v - 1 : 0);
  auto values = [&](int64_t threads) { return (span + threads * v - 1) / (threads * v) * v; };
  const bool wide_loop = LoopsOneGroupPerStep(k, spread, tuning);  // block rows only
  if (spread.strategy == RowStrategy::kBlockPerRow) {
    int threads = 256;
    // Knob::kOnChipRowLimit (A/B runs; 0: none): longer block rows loop.
    const int64_t on_chip_limit = tuning.Get(Knob::kOnChipRowLimit);
    const bool may_hold = (on_chip_limit <= 0 || k.row_length <= on_chip_limit) && !LoopsReadingTwice(k, spread) && !wide_loop;
    while (PersistentRows(k) && threads < 1024 && values(threads) > TunedRowValues(k, tuning)) threads *= 2;
    const int budget = threads >= 1024 ? kCudaRowRegisterBudget / 2 : kCudaRowRegisterBudget;
    layout.on_chip = may_hold && PersistentRows(k) && values(threads) * cached <= budget;
    const bool rereads = RowReads(k) > 1;
    int64_t row_bytes = 0;
    for (const BufferParam& b : k.buffers) row_bytes = std::max<int64_t>(row_bytes, k.row_length * DTypeSize(b.dtype));
    // Re-read rows past the register budget: registers and shared memory of
    // a 1024-thread block, or else the grid-stride walk through the L2.
    if (may_hold && !layout.on_chip && rereads && !k.dynamic_extent && cached > 0 && tuning.On(Knob::kSharedRows)) {
      threads = 1024;
      const int64_t groups = values(threads) / v;
      const int64_t register_groups = std::min<int64_t>(groups, kCudaRowRegisterBudget / 2 / cached / v);
      int64_t bytes = 0;
      for (int slot : PreloadedSlots(k)) {
        bytes += (groups - register_groups) * v * threads * DTypeSize(ComputeDType(k.cached_loads[slot].dtype));
      }
      if (register_groups > 0 && bytes <= CudaRowSharedBytes(k.cuda_arch)) {
        layout.on_chip = true;
        layout.shared_groups = groups - register_groups;
        layout.shared_bytes = bytes;
      }
    }
    layout.grid_stride = !layout.on_chip && rereads && !k.dynamic_extent && k.row_length > fusion::kPersistentRowLimit &&
                         row_bytes <= kCudaL2RowBytes;
    const int long_row_threads = 1024 / tuning.GetInt(Knob::kLongRowBlocks);
    layout.threads_per_row = layout.block_size =
        layout.on_chip ? threads : layout.grid_stride ? long_row_threads : wide_loop ? kCudaWideLoopThreads : tuning.GetInt(Knob::kLoopThreads);
    layout.rows_per_block = 1;
  } else {
    // Warp rows: L lanes each, 32 / L rows per warp.
    const int lanes = layout.threads_per_row = CudaLanesPerRow(k.row_length, v, tuning.Get(Knob::kLaneElements));
    layout.on_chip = PersistentRows(k) && values(lanes) * cached <= kCudaRowRegisterBudget;
    const int warps = lanes == 32 ? tuning.GetInt(Knob::kWarpRowsPerBlock) : tuning.GetInt(Knob::kShortRowWarps);
    layout.rows_per_block = warps * (32 / lanes);
    layout.block_size = 32 * warps;
  }
  // An SM's 1024 grid-stride threads have 64 registers each: two groups
  // ahead, not four, and one where several inputs are loaded per element.
  layout.groups = layout.on_chip      ? values(layout.threads_per_row) / v
                  : layout.grid_stride ? (cached > 1 ? 1 : 2)
                  : wide_loop          ? 1
                                       : tuning.GetInt(Knob::kLoopGroups);
  // Knob::kLoopMinBlocks=N (A/B runs): every looped block row asks for N
  // blocks per SM (0: none); -1, the default: the rule below.
  const int64_t min_blocks = tuning.Get(Knob::kLoopMinBlocks);
  if (spread.strategy == RowStrategy::kBlockPerRow && !layout.on_chip && !layout.grid_stride) {
    layout.min_blocks = min_blocks >= 0 ? static_cast<int>(min_blocks) : wide_loop ? kCudaOneGroupLoopMinBlocks : 0;
  }
  return layout;
}

// Under each device's opt-in limit per block: sm_90 227 KB, sm_80 163 KB,
// sm_86/89 99 KB; below sm_80, within the default 48 KB.
int64_t CudaRowSharedBytes(int cuda_arch) {
  if (cuda_arch == 0 || cuda_arch >= 90) return kCudaRowSharedBytes;
  if (cuda_arch == 80) return int64_t{128} << 10;
  return cuda_arch > 80 ? int64_t{64} << 10 : int64_t{32} << 10;
}

int CudaRowBlockSize(const Kernel& k, const CudaRowSpread& spread, const TuningSnapshot& tuning) {
  return ChooseCudaRowLayout(k, spread, tuning).block_size;
}
}  // namespace fusebox::backend
