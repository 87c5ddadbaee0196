#include "backend/tuning.h"

#include <atomic>
#include <climits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "tensor/debug.h"
#include "tensor/error.h"
#include "tensor/mutex.h"

extern char** environ;

namespace fusebox::backend {
namespace {

using enum KnobType;
constexpr int64_t kBig = int64_t{1} << 30;

// Defaults are the values the code had before the registry (kernels unchanged).
constexpr KnobInfo kKnobs[] = {
    {Knob::kWarpRowLimit, "FUSEBOX_TUNE_WARP_ROW_LIMIT", kInt, 1024, 1, kBig,
     "reductions over the innermost dim with rows up to this long take a warp per row on CUDA, longer ones a block "
     "(`backend/cuda/row_spread.h`)"},
    {Knob::kWarpRowsPerBlock, "FUSEBOX_TUNE_WARP_ROWS_PER_BLOCK", kInt, 1, 1, 32,
     "CUDA: rows per block of the warp-per-row layout where a row takes a whole warp (so blocks of 32 x that many "
     "threads)"},
    {Knob::kLaneElements, "FUSEBOX_TUNE_LANE_ELEMENTS", kPowerOfTwo, 4, 1, 128,
     "CUDA warp rows: a row takes the most lanes (a power of two up to 32) that leave each lane at least this many "
     "elements, or one 16-byte group (`CudaLanesPerRow`, `backend/cuda/row_layout.h`); 1 keeps 32 lanes from rows "
     "of 32 on, 128 gives rows under 256 a thread each"},
    {Knob::kShortRowWarps, "FUSEBOX_TUNE_SHORT_ROW_WARPS", kPowerOfTwo, 8, 1, 32,
     "CUDA warp rows of fewer than 32 lanes (several rows per warp): warps per block"},
    {Knob::kRowValues, "FUSEBOX_TUNE_ROW_VALUES", kInt, 0, 0, 4096,
     "CUDA persistent block-per-row kernels: threads per row double from 256 (to 1024) while a thread would hold more "
     "than this many values per cached input; 0: 8 for rows up to 4096 or read once, 16 beyond "
     "(`backend/cuda/row_layout.h`)"},
    {Knob::kOnChipRowLimit, "FUSEBOX_TUNE_ON_CHIP_ROW_LIMIT", kInt, 0, 0, kBig,
     "CUDA: block-per-row kernels with longer rows are never held on chip (registers or shared memory) but loop over "
     "the row, re-reading it from the L2; 0: no limit"},
    {Knob::kSharedRows, "FUSEBOX_TUNE_SHARED_ROWS", kBool, 1, 0, 1,
     "CUDA: long re-read rows may be held in registers and dynamic shared memory of a 1024-thread block "
     "(`CudaRowLayout::shared_groups`); 0: they walk the grid through the L2 as before"},
    {Knob::kHeldValues, "FUSEBOX_TUNE_HELD_VALUES", kBool, 1, 0, 1,
     "CUDA: rows held on chip keep a value the last pass computed (`backend/cuda/held_row_values.h`); 0: they keep "
     "their input elements and later loops recompute (softmax then computes exp twice per element)"},
    {Knob::kWideRowLoop, "FUSEBOX_TUNE_WIDE_ROW_LOOP", kBool, 1, 0, 1,
     "CUDA: re-read rows of 4097-8192 without a broadcast operand (softmax over 8192) loop with 512 threads and one "
     "group per step (`LoopsWideRows`); 0: held on chip as before"},
    {Knob::kNormRowLoop, "FUSEBOX_TUNE_NORM_ROW_LOOP", kBool, 1, 0, 1,
     "CUDA: re-read rows of 2049-4096 that read a broadcast operand (layer_norm with its weights) loop with 512 "
     "threads and one group per step (`LoopsNormRows`); 0: held on chip as before"},
    {Knob::kCountedLoop, "FUSEBOX_TUNE_COUNTED_LOOP", kBool, 1, 0, 1,
     "CUDA: looped rows count their steps (a constant trip count) and drop the group guards where the steps tile the "
     "row (looped layer_norm: 609 -> 390 PTX lines, 39 -> 34 registers); 0: they test `jc < n`"},
    {Knob::kLoopThreads, "FUSEBOX_TUNE_LOOP_THREADS", kPowerOfTwo, 256, 32, 1024,
     "CUDA: threads per row of looped block rows (neither held on chip nor walked grid-stride)"},
    {Knob::kLoopGroups, "FUSEBOX_TUNE_LOOP_GROUPS", kInt, 4, 1, 16,
     "CUDA: groups each thread loads per step of looped block rows"},
    {Knob::kLoopMinBlocks, "FUSEBOX_TUNE_LOOP_MIN_BLOCKS", kInt, -1, -1, 32,
     "CUDA: every looped block row is compiled with `__launch_bounds__(threads, N)` (0: no bound); -1: 4 for the "
     "one-group loops (`LoopsWideRows`, `LoopsNormRows`) and none for the others"},
    {Knob::kLongRowBlocks, "FUSEBOX_TUNE_LONG_ROW_BLOCKS", kInt, 1, 1, 4,
     "CUDA: blocks per SM, sharing 1024 threads, of the kernels that walk long re-read rows over the grid "
     "(`CudaRowLayout::grid_stride`); launch-time too"},
    {Knob::kClusters, "FUSEBOX_TUNE_CLUSTERS", kInt, 1, 0, 2,
     "CUDA, sm_90+: rows a block would loop over take a thread-block cluster per row (`backend/cuda/cuda_cluster.h`): "
     "0 never; 1 where the rows are fewer than the device's SMs (a block per row leaves SMs idle); 2 every row that "
     "fits a cluster, also rows held on chip (slower on the H200 where the rows fill the device, bench/NOTES.md)"},
    {Knob::kCacheHints, "FUSEBOX_TUNE_CACHE_HINTS", kInt, 1, 0, 2,
     "CUDA L2 eviction hints (`backend/cuda/cache_hints.h`): 0 none; 1 in kernels that re-read long rows from the L2 "
     "and streamed loads in row reductions that store nothing per element; 2 also streams read-once data everywhere"},
    {Knob::kL1Hints, "FUSEBOX_TUNE_L1_HINTS", kInt, 15, 0, 15,
     "CUDA, kernels that re-read rows from memory, as bits: 1 kept loads also evict-last in L1; 2 the last read "
     "evict-first in L1 and the L2 instead of `.cs`; 4 operands broadcast over the rows kept; 8 row stores unhinted"},
    {Knob::kColumnTiles, "FUSEBOX_TUNE_COLUMN_TILES", kBool, 1, 0, 1,
     "CUDA column reductions use 2-D tiles of 4 adjacent columns in 16-byte loads (`backend/cuda/column_tiles.h`); "
     "0: a thread per column"},
    {Knob::kColumnBlocks, "FUSEBOX_TUNE_COLUMN_BLOCKS", kInt, 512, 1, kBig,
     "CUDA column reductions over few columns: about how many blocks the split into chunks of rows aims at "
     "(`backend/cuda/row_spread.cc`, `ChooseSplit`)"},
    {Knob::kColumnUnroll, "FUSEBOX_TUNE_COLUMN_UNROLL", kPowerOfTwo, 8, 1, 64,
     "CUDA column reductions (a thread per column): rows each thread loads before folding them"},
    {Knob::kOuterThreads, "FUSEBOX_TUNE_OUTER_THREADS", kPowerOfTwo, 1024, 64, 1024,
     "CUDA multi-pass reductions over outer dims (`backend/cuda/outer_reduction.h`): the most threads a block "
     "puts on one column group (more lanes hold a longer column share)"},
    {Knob::kOuterMinThreads, "FUSEBOX_TUNE_OUTER_MIN_THREADS", kPowerOfTwo, 256, 32, 1024,
     "CUDA outer reductions: column groups are put side by side until a block has this many threads (while the "
     "tiles still fill the device)"},
    {Knob::kOuterWarpColumns, "FUSEBOX_TUNE_OUTER_WARP_COLUMNS", kPowerOfTwo, 16, 4, 32,
     "CUDA outer reductions: the columns of a row one warp reads side by side, at least a 32-byte sector's "
     "(16: 64 bytes of f32, a sector of 16-bit types; 8 f32 columns lost 17-27% on [1031, 16273] and "
     "[33, 37, 13741]), halved where a column's share would not fit the registers"},
    {Knob::kOuterHeldWords, "FUSEBOX_TUNE_OUTER_HELD_WORDS", kInt, 32, 0, 64,
     "CUDA outer reductions: the most 32-bit registers of column values a thread holds between passes (HBM read "
     "once); a column that needs more is reloaded every pass (from the L2); 0: always reloaded"},
    {Knob::kOuterSplit, "FUSEBOX_TUNE_OUTER_SPLIT", kInt, 1, 0, 2,
     "CUDA multi-pass reductions over outer dims with few columns: 0 never split (one kernel, held or reloaded "
     "columns); 1 the rule (`backend/cuda/row_spread.cc`); 2 split wherever the columns are few enough: one launch "
     "per pass over chunks of rows, each folding the earlier passes' partials, then one for the stores"},
    {Knob::kOnlineExpSums, "FUSEBOX_TUNE_ONLINE_EXP_SUMS", kBool, 1, 0, 1,
     "CUDA split column reductions (softmax, log_softmax over dim 0 or a middle dim) and logsumexp rows past the "
     "registers (cross-entropy's): the sum of exp(x - max) folds online in the max's pass, a read fewer "
     "(`backend/online_exp_sums.h`); 0: a pass of its own"},
    {Knob::kColumnLanes, "FUSEBOX_TUNE_COLUMN_LANES", kInt, 0, 0, 8,
     "CUDA split columns of several passes (`backend/cuda/split_printer.h`): threads per column in a block, each "
     "walking a share of the column's chunk, combined in shared memory before the chunk's partial (more loads in "
     "flight per SM, no more partials; 256 / this many columns per block); 0: the rule, 4 where the exp sums fold "
     "online, else 1 (`backend/cuda/row_spread.cc`); 1 to 8 (a power of two, others round down) for every such split"},
    {Knob::kAlignedRowGroups, "FUSEBOX_TUNE_ALIGNED_ROW_GROUPS", kInt, 1, 0, 2,
     "CUDA reductions along rows whose length is no multiple of 16 bytes' elements (odd rows): 16-byte vectors "
     "anyway, each row's groups aligned to memory rather than to the row's start, the elements outside the row "
     "masked (`backend/cuda/row_layout.h`, CudaRowLayout::aligned_groups): 0 never (narrower or scalar accesses); "
     "1 the rule, rows read once with nothing stored per element (a sum); 2 every odd row"},
    {Knob::kPointwiseThreadBytes, "FUSEBOX_TUNE_POINTWISE_THREAD_BYTES", kPowerOfTwo, 16, 4, 64,
     "CUDA pointwise kernels that cannot move 16-byte vectors (sliced, broadcast, mixed types): bytes of its "
     "narrowest operand each thread keeps in flight (elements per thread: this over its size, 4 to 8)"},
    {Knob::kOnePlusTanh, "FUSEBOX_TUNE_ONE_PLUS_TANH", kBool, 1, 0, 1,
     "kernels compute `1 + tanh(z)` as `2 * sigmoid(2 * z)` (`backend/one_plus_tanh.h`); 0: as written"},
    {Knob::kFastMath, "FUSEBOX_TUNE_FAST_MATH", kBool, 0, 0, 1,
     "CUDA: 1: NVRTC compiles with `--use_fast_math` (approximate exp, division, square root; denormals flushed); "
     "part of the compile-cache key; for A/B runs only"},
    {Knob::kCudaGraphs, "FUSEBOX_TUNE_CUDA_GRAPHS", kInt, 1, 0, 2,
     "how CUDA plans launch (`backend/cuda/launch_graph.h`): 0 kernel by kernel; 1 plans of small kernels (each at "
     "most 2^21 elements) as one CUDA graph per run; 2 every plan a graph can chain"},
    {Knob::kGemmCandidates, "FUSEBOX_TUNE_GEMM_CANDIDATES", kInt, 1, 1, 32,
     "CUDA: how many of cuBLASLt's heuristic algorithms the first call of a GEMM problem times before keeping the "
     "fastest; 1 takes the first untimed (`backend::cuda::SetCublasLtCandidates` sets it in code)"},
    {Knob::kFlashBlockN, "FUSEBOX_TUNE_FLASH_BLOCK_N", kInt, 0, 0, 128,
     "CUDA flash attention (`backend/cuda/flash_attention.h`): keys per K/V tile, 16, 32, 64 or 128 (wgmma: 64 or 128; "
     "f32: 32 or 64; others: the choice); 0 chooses (mma.sync 64; sm_90 unmasked or causal 128; sm_90 masked 64)"},
    {Knob::kFlashWarps, "FUSEBOX_TUNE_FLASH_WARPS", kInt, 0, 0, 16,
     "CUDA flash attention: warps per block, 4 or 8 (others: the choice); 0 chooses (4 with two tiles a warp, else 8)"},
    {Knob::kFlashMinBlocks, "FUSEBOX_TUNE_FLASH_MIN_BLOCKS", kInt, 0, 0, 4,
     "CUDA flash attention: blocks per SM the kernel's registers must allow (`__launch_bounds__`), 1 to 4; 0 "
     "chooses (1; f32: 2)"},
    {Knob::kFlashWarpTiles, "FUSEBOX_TUNE_FLASH_WARP_TILES", kInt, 0, 0, 2,
     "CUDA flash attention: 16-row query tiles per warp, 1 (Q held in registers) or 2 (Q read from shared memory, "
     "each K/V fragment feeding two tiles); 0 chooses (2 at head dim 64, unmasked or causal; else 1)"},
    {Knob::kFlashConsumers, "FUSEBOX_TUNE_FLASH_CONSUMERS", kInt, 0, 0, 3,
     "CUDA flash attention, sm_90's warp-specialized kernel (unmasked or causal): warpgroups multiplying beside the "
     "TMA producer, 2 or 3 (others: the choice); 0 chooses (3 at head dim 64: 7-11% faster on the H100; 2 at 128, "
     "where 3 spill)"},
    {Knob::kFlashCausalOrder, "FUSEBOX_TUNE_FLASH_CAUSAL_ORDER", kInt, 0, 0, 2,
     "CUDA flash attention, causal: the order blocks start in, 1 batch by batch (each batch's longest row tiles "
     "first), 2 longest first over the whole grid; 0 chooses (f32 2: 0.530 -> 0.433 ms on the H100 at [8, 12, "
     "1024, 64]; 16-bit 1: 2 was even within noise on the H200 and lost 4-6% on the H100)"},
    {Knob::kFlashPersistent, "FUSEBOX_TUNE_FLASH_PERSISTENT", kInt, 0, 0, 2,
     "CUDA flash attention, sm_90's warp-specialized kernel: 1 a block per (batch, row tile) item, 2 persistent (a "
     "block per SM taking items from a counter, the next item's Q and K/V loading while the last one finishes); 0 "
     "chooses (persistent at head dim 128, two consumers: 3-6% faster on the H100, causal or not; a block per item "
     "at 64, three consumers: even unmasked, causal 1-2% slower)"},
    {Knob::kFlashAlignEnd, "FUSEBOX_TUNE_FLASH_ALIGN_END", kInt, 0, 0, 2,
     "CUDA flash attention, sm_90's warp-specialized kernel, causal: 1 row tiles from row 0, 2 row tiles ending at "
     "the last query row, so the partial tile is the first (the shortest) and not the last (the longest); 0 chooses "
     "(2: on the H100, head dim 64 T 2048 / 4096 0.255 / 0.826 -> 0.245 / 0.787 ms, GPT-2 bf16 SDPA 5.30 -> 5.03; "
     "where L is a whole number of tiles, as head dim 128's 128 rows at T 2048, it changes nothing)"},
};
static_assert(std::size(kKnobs) == kNumKnobs, "one row per Knob");

constexpr bool TableInOrder() {
  for (int k = 0; k < kNumKnobs; ++k) {
    if (static_cast<int>(kKnobs[k].id) != k) return false;
  }
  return true;
}
static_assert(TableInOrder(), "rows in Knob's order");

constexpr std::string_view kPrefix = "FUSEBOX_TUNE_";

std::string ValidKnobs() {
  return absl::StrJoin(kKnobs, ", ", [](std::string* out, const KnobInfo& k) { out->append(k.name); });
}

std::string RangeText(const KnobInfo& k) {
  if (k.type == kBool) return "0 or 1";
  return absl::StrCat(k.type == kPowerOfTwo ? "a power of two in [" : "[", k.min, ", ", k.max, "]");
}

void Warn(std::string message, std::vector<std::string>* warnings) {
  spdlog::warn("{}", message);
  if (warnings != nullptr) warnings->push_back(std::move(message));
}

std::atomic<const TuningSnapshot*> override_snapshot{nullptr};
fusebox::Mutex override_mu;

}  // namespace

std::span<const KnobInfo> KnobTable() { return kKnobs; }

const KnobInfo& KnobInfoOf(Knob knob) { return kKnobs[static_cast<int>(knob)]; }

std::string KnobValueError(const KnobInfo& k, int64_t value) {
  const bool power_ok = k.type != kPowerOfTwo || (value > 0 && (value & (value - 1)) == 0);
  if (value >= k.min && value <= k.max && power_ok) return "";
  return absl::StrCat(value, " is not ", RangeText(k));
}

std::string KnobTableMarkdown() {
  std::string out = "| knob | type | default | range | what it does |\n|---|---|---|---|---|\n";
  for (const KnobInfo& k : kKnobs) {
    const char* type = k.type == kBool ? "bool" : k.type == kPowerOfTwo ? "power of two" : "int";
    const std::string range = k.type == kBool ? "0, 1" : absl::StrCat(k.min, " to ", k.max);
    absl::StrAppend(&out, "| `", std::string(k.name), "` | ", type, " | ", k.default_value, " | ", range, " | ",
                    std::string(k.doc), " |\n");
  }
  return out;
}

TuningSnapshot::TuningSnapshot() {
  for (const KnobInfo& k : kKnobs) values_[static_cast<int>(k.id)] = k.default_value;
}

TuningSnapshot TuningSnapshot::FromEnvironment() {
  InitLogging();  // the warnings below use fusebox's logger settings
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string_view::npos && entry.starts_with(kPrefix)) {
      env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
    }
  }
  return FromEnvironment(env);
}

TuningSnapshot TuningSnapshot::FromEnvironment(const std::map<std::string, std::string>& env,
                                               std::vector<std::string>* warnings) {
  TuningSnapshot snapshot;
  for (const auto& [name, text] : env) {
    if (!name.starts_with(kPrefix)) continue;
    const KnobInfo* knob = nullptr;
    for (const KnobInfo& k : kKnobs) {
      if (k.name == name) knob = &k;
    }
    if (knob == nullptr) {
      Warn(absl::StrCat("unknown tuning knob ", name, " (ignored); the knobs are: ", ValidKnobs()), warnings);
      continue;
    }
    int64_t value = 0;
    std::string error;
    if (!absl::SimpleAtoi(text, &value)) {
      error = absl::StrCat("'", text, "' is not an integer");
    } else {
      error = KnobValueError(*knob, value);
    }
    if (!error.empty()) {
      Warn(absl::StrCat(name, "=", text, ": ", error, "; using the default ", knob->default_value), warnings);
      continue;
    }
    snapshot.values_[static_cast<int>(knob->id)] = value;
  }
  return snapshot;
}

TuningSnapshot& TuningSnapshot::Set(Knob knob, int64_t value) {
  const KnobInfo& k = KnobInfoOf(knob);
  const std::string error = KnobValueError(k, value);
  FUSEBOX_ENSURE(error.empty(), "tuning ", std::string(k.name), ": ", error);
  values_[static_cast<int>(knob)] = value;
  return *this;
}

std::string TuningSnapshot::ToString() const {
  std::vector<std::string> set;
  for (const KnobInfo& k : kKnobs) {
    if (Get(k.id) != k.default_value) set.push_back(absl::StrCat(std::string(k.name), "=", Get(k.id)));
  }
  return set.empty() ? "default tuning" : absl::StrJoin(set, " ");
}

const TuningSnapshot& CurrentTuning() {
  if (const TuningSnapshot* scoped = override_snapshot.load(std::memory_order_acquire)) return *scoped;
  static const TuningSnapshot* const from_env = new TuningSnapshot(TuningSnapshot::FromEnvironment());
  return *from_env;
}

ScopedTuning::ScopedTuning(std::initializer_list<std::pair<Knob, int64_t>> knobs) {
  fusebox::MutexLock lock(&override_mu);
  snapshot_ = CurrentTuning();
  for (const auto& [knob, value] : knobs) snapshot_.Set(knob, value);
  previous_ = override_snapshot.load(std::memory_order_relaxed);
  override_snapshot.store(&snapshot_, std::memory_order_release);
}

ScopedTuning::~ScopedTuning() {
  fusebox::MutexLock lock(&override_mu);
  FUSEBOX_CHECK(override_snapshot.load(std::memory_order_relaxed) == &snapshot_, "ScopedTuning ended out of order");
  override_snapshot.store(previous_, std::memory_order_release);
}

}  // namespace fusebox::backend
