// CompileOptions::replay: a call whose arguments match an earlier call's runs
// that call's compiled plan directly, without running the function again
// (tinygrad's TinyJit; torch.compile's "reduce-overhead" mode skips Python
// the same way). A plan is replayed once two traced calls with the same
// arguments captured the same single graph; the guards are the arguments:
// each tensor's dtype, device, shape and strides, which arguments share
// memory (f(x, x) and f(x, y) are different calls) and each number's value.
// Random ops draw a fresh generator state per replay, in the order the traced
// call drew them (frontend/random.h).
// What the function reads besides its arguments is fixed at capture: tensors
// it reads from elsewhere (a module's parameters) are guarded by the memory
// they read (storage, shape, strides, offset, dtype; a fresh view object each
// call, as linear's w.t() or a broadcast bias, is the same input) and read
// at run time, so in-place changes to them are seen; a parameter rebound to
// another tensor (lin.weight = ..., any Tensor assignment over a handle of
// that memory: Storage::rebinds) drops the recorded plan, and the next calls
// trace again. A call that passes such a tensor as an argument (f(w) for a
// function that also reads w) still does not differ from f(x):
// reset_replays() forgets the recorded plans.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "frontend/graph_record.h"
#include "tensor/tensor.h"

namespace fusebox::frontend {

// What one argument of a replayed call must match.
struct ArgGuard {
  enum class Kind : uint8_t { kTensor, kInteger, kFloat };
  Kind kind = Kind::kTensor;
  DType dtype = DType::kFloat32;
  Device device;
  Shape shape;
  Strides strides;
  int64_t integer = 0;
  uint64_t float_bits = 0;  // compared bitwise: -0.0 and NaN payloads guard too
  // A tensor that shares memory with an earlier argument: that argument, and
  // this one's offset from it in elements (NoteAliases). -1: none.
  int32_t alias_of = -1;
  int64_t alias_offset = 0;
  friend bool operator==(const ArgGuard&, const ArgGuard&) = default;
};

// Fills the tensor guards' alias fields from the call's arguments (`args[k]`
// null for a number). Lazy arguments are realized first.
void NoteAliases(std::span<const Tensor* const> args, std::span<ArgGuard> guards);
// Whether `args` share memory as the guards recorded (no allocation).
bool AliasesMatch(std::span<const ArgGuard> guards, std::span<const Tensor* const> args);

// Argument types a guard can check: tensors and numbers.
template <typename T>
inline constexpr bool kGuardableArg =
    std::is_same_v<std::remove_cvref_t<T>, Tensor> || std::is_arithmetic_v<std::remove_cvref_t<T>>;

inline ArgGuard GuardOf(const Tensor& t) {
  return {.kind = ArgGuard::Kind::kTensor, .dtype = t.dtype(), .device = t.device(), .shape = t.shape(),
          .strides = t.strides()};
}
template <typename T>
  requires std::is_arithmetic_v<T>
ArgGuard GuardOf(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    const double d = static_cast<double>(v);
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    return {.kind = ArgGuard::Kind::kFloat, .float_bits = bits};
  } else {
    return {.kind = ArgGuard::Kind::kInteger, .integer = static_cast<int64_t>(v)};
  }
}

// GuardOf(v) == g but for the alias fields, without building a guard (no
// allocation on the hot path).
inline bool Matches(const ArgGuard& g, const Tensor& t) {
  return g.kind == ArgGuard::Kind::kTensor && t.defined() && g.dtype == t.dtype() && g.device == t.device() &&
         g.shape == t.shape() && g.strides == t.strides();
}
template <typename T>
  requires std::is_arithmetic_v<T>
bool Matches(const ArgGuard& g, T v) {
  return g == GuardOf(v);
}

// Result types a replay can rebuild from its output tensors: a Tensor, a
// vector of them, or a pair / tuple of them.
template <typename R>
struct ReplayResult {
  static constexpr bool kSupported = false;
};
template <>
struct ReplayResult<Tensor> {
  static constexpr bool kSupported = true;
  static void Collect(const Tensor& r, std::vector<const Tensor*>* out) { out->push_back(&r); }
  static Tensor Make(std::vector<Tensor>&& ts) { return std::move(ts.at(0)); }
};
template <>
struct ReplayResult<std::vector<Tensor>> {
  static constexpr bool kSupported = true;
  static void Collect(const std::vector<Tensor>& r, std::vector<const Tensor*>* out) {
    for (const Tensor& t : r) out->push_back(&t);
  }
  static std::vector<Tensor> Make(std::vector<Tensor>&& ts) { return std::move(ts); }
};
template <typename... T>
  requires(std::is_same_v<T, Tensor> && ...)
struct ReplayResult<std::tuple<T...>> {
  static constexpr bool kSupported = true;
  static void Collect(const std::tuple<T...>& r, std::vector<const Tensor*>* out) {
    std::apply([out](const auto&... t) { (out->push_back(&t), ...); }, r);
  }
  static std::tuple<T...> Make(std::vector<Tensor>&& ts) {
    return [&ts]<size_t... I>(std::index_sequence<I...>) {
      return std::tuple<T...>(std::move(ts.at(I))...);
    }(std::index_sequence_for<T...>{});
  }
};
template <>
struct ReplayResult<std::pair<Tensor, Tensor>> {
  static constexpr bool kSupported = true;
  static void Collect(const std::pair<Tensor, Tensor>& r, std::vector<const Tensor*>* out) {
    out->push_back(&r.first);
    out->push_back(&r.second);
  }
  static std::pair<Tensor, Tensor> Make(std::vector<Tensor>&& ts) { return {std::move(ts.at(0)), std::move(ts.at(1))}; }
};

template <typename R, typename... Args>
inline constexpr bool kReplayable = ReplayResult<std::remove_cvref_t<R>>::kSupported && (kGuardableArg<Args> && ...);

// Where a graph input of a replayed call comes from.
struct ReplayInput {
  int32_t argument = -1;  // an argument's tensor, or a view of it (shape, strides, offset from its offset)
  bool view = false;
  Shape shape;
  Strides strides;
  int64_t offset = 0;
  Tensor global;  // argument < 0: a tensor the function reads from elsewhere, read at run time
  uint64_t rebinds = 0;  // global: its memory's Storage::rebinds when the call that read it ended
  // A random op's generator state (TensorImpl::rng_state): each replay draws
  // a fresh one on `device`, as a traced call would, so it never repeats the
  // numbers of the call it was recorded from.
  bool rng_state = false;
  Device device;
};

// Where a returned tensor of a replayed call comes from.
struct ReplayOutput {
  int32_t graph_output = -1;  // a view (shape, strides, offset) of this output of the plan
  int32_t argument = -1;      // else this argument, returned as it came
  Shape shape;
  Strides strides;
  int64_t offset = 0;
};

struct ReplayEntry {
  std::vector<ArgGuard> guards;  // one per argument
  std::vector<ReplayInput> inputs;  // one per graph input
  std::vector<ReplayOutput> outputs;  // one per returned tensor
  GraphRecord record;  // the graph it replays (executable, input signatures) for kernels() and explain()
};

// The entry from one traced call, or why that call cannot be replayed.
// `args` holds each argument's tensor (undefined for numbers), `results` the
// returned tensors, `graph` the call's only graph and `graph_inputs` its
// input tensors in order.
struct ReplayCandidate {
  ReplayEntry entry;
  std::string why_not;  // empty: replayable
};
ReplayCandidate MakeReplayCandidate(std::vector<ArgGuard> guards, std::span<const Tensor> args,
                                    std::span<const Tensor* const> results, const GraphRecord& graph,
                                    std::span<const Tensor> graph_inputs);

// Two candidates replay the same way (the second call confirms the first).
bool SameReplay(const ReplayEntry& a, const ReplayEntry& b);

// Whether the tensors `entry` reads from elsewhere are still what its
// function read: no Tensor handle viewing their memory was assigned another
// tensor since (a rebound parameter, `lin.weight = ...`). In-place writes
// keep them current: they are read at run time.
bool GlobalsCurrent(const ReplayEntry& entry);

// Why `now`, traced with the same argument guards and plan as `before`, does
// not confirm it (a graph input read from elsewhere is other memory, say);
// empty when nothing more specific than "another call" can be said.
std::string ReplayDifference(const ReplayEntry& before, const ReplayEntry& now);

// Runs `entry`'s plan on this call's arguments (`args[k]` null for numbers);
// returns the call's result tensors in order.
std::vector<Tensor> RunReplay(const ReplayEntry& entry, std::span<const Tensor* const> args);

}  // namespace fusebox::frontend
