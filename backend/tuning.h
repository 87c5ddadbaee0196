// The tuning registry: every FUSEBOX_TUNE_* knob is one row of one table
// (name, type, default, range, doc), read from the environment once per
// process into a TuningSnapshot that the compile path takes explicitly, so a
// kernel's schedule is a function of (kernel, device, snapshot). docs/
// debugging.md lists the table; tests/backend/tuning_test.cc checks the two agree.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>


namespace fusebox::backend {

// One id per knob, in the table's order.
enum class Knob : int {
  kWarpRowLimit,
  kWarpRowsPerBlock,
  kLaneElements,
  kShortRowWarps,
  kRowValues,
  kOnChipRowLimit,
  kSharedRows,
  kHeldValues,
  kWideRowLoop,
  kNormRowLoop,
  kCountedLoop,
  kLoopThreads,
  kLoopGroups,
  kLoopMinBlocks,
  kLongRowBlocks,
  kClusters,
  kCacheHints,
  kL1Hints,
  kColumnTiles,
  kColumnBlocks,
  kColumnUnroll,
  kOuterThreads,
  kOuterMinThreads,
  kOuterWarpColumns,
  kOuterHeldWords,
  kOuterSplit,
  kOnlineExpSums,
  kColumnLanes,
  kAlignedRowGroups,
  kPointwiseThreadBytes,
  kOnePlusTanh,
  kFastMath,
  kCudaGraphs,
  kGemmCandidates,
  kFlashBlockN,
  kFlashWarps,
  kFlashMinBlocks,
  kFlashWarpTiles,
  kFlashConsumers,
  kFlashCausalOrder,
  kFlashPersistent,
  kFlashAlignEnd,
  kCount,
};
inline constexpr int kNumKnobs = static_cast<int>(Knob::kCount);

enum class KnobType { kBool, kInt, kPowerOfTwo };

struct KnobInfo {
  Knob id;
  std::string_view name;  // the environment variable, FUSEBOX_TUNE_...
  KnobType type;
  int64_t default_value;
  int64_t min, max;       // inclusive; bools are [0, 1]
  std::string_view doc;   // one line: what it does
};

// The table, indexed by Knob.
std::span<const KnobInfo> KnobTable();
const KnobInfo& KnobInfoOf(Knob knob);
// "" when `value` is valid for `knob`, else why not ("out of range [1, 64]").
std::string KnobValueError(const KnobInfo& knob, int64_t value);

// docs/debugging.md's knob table, generated from the table: a header and one
// row per knob (name, type, default, range, what it does).
std::string KnobTableMarkdown();

// The value of every knob: a plain value, compared and hashed by value.
class TuningSnapshot {
 public:
  TuningSnapshot();  // every knob at its default

  // From the process environment; warns (spdlog) about an unknown
  // FUSEBOX_TUNE_* variable, a value that is not an integer, out of range or
  // not a power of two where one is required, and keeps the default.
  static TuningSnapshot FromEnvironment();
  // The same from `env` (variable -> value; other variables are ignored);
  // each warning is also appended to `warnings` when given.
  static TuningSnapshot FromEnvironment(const std::map<std::string, std::string>& env,
                                        std::vector<std::string>* warnings = nullptr);

  int64_t Get(Knob knob) const { return values_[static_cast<int>(knob)]; }
  int GetInt(Knob knob) const { return static_cast<int>(Get(knob)); }
  bool On(Knob knob) const { return Get(knob) != 0; }
  // FUSEBOX_ENSURE: `value` valid for `knob`.
  TuningSnapshot& Set(Knob knob, int64_t value);

  bool IsDefault() const { return *this == TuningSnapshot(); }
  // "default tuning", or the knobs set otherwise: "FUSEBOX_TUNE_X=0 FUSEBOX_TUNE_Y=2".
  std::string ToString() const;

  friend bool operator==(const TuningSnapshot&, const TuningSnapshot&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const TuningSnapshot& t) {
    return H::combine_contiguous(std::move(h), t.values_, kNumKnobs);
  }

 private:
  int64_t values_[kNumKnobs];
};

// The process's tuning: FromEnvironment(), read once, unless a ScopedTuning
// is alive. A compile takes it once at its entry point (Executable::Compile)
// and passes it down.
const TuningSnapshot& CurrentTuning();

// Tests only: sets `knobs` on top of the current tuning for the whole process
// while alive (nest them last-in first-out; tests are single-threaded here,
// a mutex guards the swap). Compiles under it neither reuse nor feed the
// plan cache of other tunings (frontend/runtime.cc keys plans by snapshot).
class ScopedTuning {
 public:
  ScopedTuning(std::initializer_list<std::pair<Knob, int64_t>> knobs);
  ~ScopedTuning();
  ScopedTuning(const ScopedTuning&) = delete;
  ScopedTuning& operator=(const ScopedTuning&) = delete;

 private:
  TuningSnapshot snapshot_;
  const TuningSnapshot* previous_;
};

}  // namespace fusebox::backend
