#include "frontend/runtime.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tensor/mutex.h"
#include "backend/executable.h"
#include "frontend/input_values.h"
#include "frontend/numerics_check.h"
#include "fusion/dynamic_shapes.h"
#include "fusion/pipeline.h"
#include "profiler/recorder.h"
#include "spdlog/spdlog.h"
#include "tensor/debug.h"

namespace fusebox::frontend {
namespace {

using fusion::InputDim;

// A dynamic plan's key: the graph with its run-time sizes left out, and the
// index width all those sizes share.
struct SymbolicPlanKey {
  graph::Graph graph;
  bool index64 = false;
  friend bool operator==(const SymbolicPlanKey&, const SymbolicPlanKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const SymbolicPlanKey& k) {
    return H::combine(std::move(h), k.graph, k.index64);
  }
};

// What a symbolic key found: its plan, or the input dims whose sizes its
// kernels turned out to need (they are compiled in instead).
struct SymbolicEntry {
  std::shared_ptr<const backend::Executable> exe;
  std::vector<InputDim> keep_static;
};

using ExecutablePtr = std::shared_ptr<const backend::Executable>;

// The plans of one graph for other input values than its first plan's.
struct ValuePlans {
  std::vector<ExecutablePtr> plans;  // at most kMaxValuePlans
  // Per memory (Storage::id) an earlier plan read: plans made since it was written.
  absl::flat_hash_map<uint64_t, int> rewrites;
};

// The plans compiled under one tuning snapshot, and those being compiled:
// a thread that misses a key another thread is compiling waits for that
// result (a hit) rather than compiling the same plan again (threads making
// their first calls at once each counted a recompile, and under load a
// function reached its recompile limit).
struct TunedPlans {
  absl::flat_hash_map<graph::Graph, ExecutablePtr> plans;
  // A graph whose first plan assumed input values (plan.value_guards) that a
  // later call's inputs do not hold: the plans for other memory, and the one
  // that assumes none (made once values gave nothing to assume, or past the
  // bounds below), which then serves every call no other plan holds for.
  absl::flat_hash_map<graph::Graph, ValuePlans> other_values;
  absl::flat_hash_map<graph::Graph, ExecutablePtr> no_values;
  absl::flat_hash_map<SymbolicPlanKey, SymbolicEntry> symbolic;
  absl::flat_hash_map<graph::Graph, std::shared_future<ExecutablePtr>> plans_pending;
  absl::flat_hash_map<SymbolicPlanKey, std::shared_future<SymbolicEntry>> symbolic_pending;
};

// Keyed by tuning first: an Executable fixes its kernels' sources and its
// launch-time choices (CUDA graphs, grid caps) under the snapshot it was
// compiled with, so a compile under another tuning (a test's ScopedTuning)
// never finds it. The process's tuning is one snapshot, so outside tests
// this is one table.
struct PlanCache {
  fusebox::Mutex mu;
  absl::node_hash_map<backend::TuningSnapshot, TunedPlans> by_tuning ABSL_GUARDED_BY(mu);
  RuntimeStats stats ABSL_GUARDED_BY(mu);
};

// Plans per graph for other input values (other models' buffers, masks
// passed in), and how often memory a plan read may be written, before the
// graph's calls take the plan that assumes nothing: a fresh mask tensor or
// one written every call would otherwise plan every call.
constexpr size_t kMaxValuePlans = 8;
constexpr int kMaxRewrites = 2;

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

PlanCache& Cache() {
  static PlanCache* cache = new PlanCache();
  return *cache;
}

// `key`'s value in `done` (maps of `cache`'s), or else made by `make`, run
// unlocked: by this thread, unless another one is making it (in `pending`),
// whose value (or error) this one then takes. Second: whether this thread
// made it.
template <typename Map, typename Pending, typename Make>
std::pair<typename Map::mapped_type, bool> FindOrMake(PlanCache& cache, Map& done, Pending& pending,
                                                     const typename Map::key_type& key, const Make& make) {
  using Value = typename Map::mapped_type;
  std::shared_future<Value> made_elsewhere;
  std::promise<Value> promise;
  {
    fusebox::MutexLock lock(&cache.mu);
    if (auto it = done.find(key); it != done.end()) return {it->second, false};
    if (auto it = pending.find(key); it != pending.end()) {
      made_elsewhere = it->second;
    } else {
      pending.emplace(key, promise.get_future().share());
    }
  }
  if (made_elsewhere.valid()) return {made_elsewhere.get(), false};  // rethrows its error
  try {
    Value value = make();
    fusebox::MutexLock lock(&cache.mu);
    done.emplace(key, value);
    pending.erase(key);
    promise.set_value(value);
    return {std::move(value), true};
  } catch (...) {
    {
      fusebox::MutexLock lock(&cache.mu);
      pending.erase(key);
    }
    promise.set_exception(std::current_exception());
    throw;
  }
}

std::shared_ptr<const backend::Executable> CompilePlan(fusion::Plan plan, const backend::TuningSnapshot& tuning,
                                                       RunResult* result) {
  if (plan.graph.device().is_cuda()) {
    FUSEBOX_ENSURE(cuda_available(), "cannot run on ", plan.graph.device().str(),
                   ": no usable CUDA device; use Device::cpu()");
  }
  std::shared_ptr<const backend::Executable> exe = ValueOrThrow(backend::Executable::Compile(std::move(plan), tuning));
  result->kernel_compiles = exe->compiled_kernels();
  result->compile_times += exe->compile_times();
  return exe;
}

// Plans `graph` for `inputs` (its values may be assumed, unless `assume` is
// false), timed into `result`.
ExecutablePtr PlanAndCompile(const graph::Graph& graph, absl::Span<const Tensor> inputs, absl::Span<const InputDim> dynamic,
                             bool assume, const backend::TuningSnapshot& tuning, RunResult* result) {
  const auto start = std::chrono::steady_clock::now();
  TensorInputValues values(inputs);
  // `dynamic` too: no symbol survives, but the plan keeps why (explain()).
  fusion::Plan plan = fusion::BuildPlan(graph, dynamic, {.values = assume ? &values : nullptr});
  result->compile_times.plan_ms += MsSince(start);
  return CompilePlan(std::move(plan), tuning, result);
}

// The memory (Storage::id) that `plans` read values from and that `inputs`
// hold at another version: written since.
std::vector<uint64_t> WrittenSince(absl::Span<const ExecutablePtr> plans, absl::Span<const Tensor> inputs) {
  std::vector<uint64_t> written;
  for (const ExecutablePtr& exe : plans) {
    for (const fusion::ValueGuard& g : exe->plan().value_guards) {
      if (g.input < 0 || static_cast<size_t>(g.input) >= inputs.size()) continue;
      const Storage* storage = inputs[g.input].impl().storage.get();
      if (storage != nullptr && storage->id() == g.storage && storage->version() != g.version &&
          std::find(written.begin(), written.end(), g.storage) == written.end()) {
        written.push_back(g.storage);
      }
    }
  }
  return written;
}

// The plan for `graph` when `first`, the one first planned for it, assumed
// values that `inputs` do not hold. Second: whether this call planned it.
std::pair<ExecutablePtr, bool> PlanForOtherValues(PlanCache& cache, TunedPlans& tuned, const graph::Graph& graph,
                                                  const ExecutablePtr& first, absl::Span<const Tensor> inputs,
                                                  absl::Span<const InputDim> dynamic,
                                                  const backend::TuningSnapshot& tuning, RunResult* result) {
  bool assume = true;
  std::vector<uint64_t> written;
  {
    fusebox::MutexLock lock(&cache.mu);
    const ValuePlans& others = tuned.other_values[graph];
    for (const ExecutablePtr& exe : others.plans) {
      if (ValueGuardsHold(exe->plan().value_guards, inputs)) return {exe, false};
    }
    // Values seen before gave a plan that assumes none: it serves every call.
    if (auto it = tuned.no_values.find(graph); it != tuned.no_values.end()) return {it->second, false};
    std::vector<ExecutablePtr> read = others.plans;
    read.push_back(first);
    written = WrittenSince(read, inputs);
    assume = others.plans.size() < kMaxValuePlans;
    for (uint64_t id : written) {
      if (auto it = others.rewrites.find(id); it != others.rewrites.end() && it->second >= kMaxRewrites) assume = false;
    }
  }
  if (!assume) {
    spdlog::debug("plan cache: a graph's input values changed past {} plans or {} writes of one tensor; its calls "
                  "take the plan that assumes none",
                  kMaxValuePlans, kMaxRewrites);
  }
  ExecutablePtr exe = PlanAndCompile(graph, inputs, dynamic, assume, tuning, result);
  fusebox::MutexLock lock(&cache.mu);
  ValuePlans& others = tuned.other_values[graph];
  for (uint64_t id : written) ++others.rewrites[id];
  if (exe->plan().value_guards.empty()) {
    tuned.no_values.try_emplace(graph, exe);
  } else {
    others.plans.push_back(exe);
  }
  return {exe, true};
}

// The input dims of `symbols` the kernels of `plan` (built from `graph`) do
// depend on: planning and printing the graph again with one symbol's size
// changed gives other kernels. (Cheap next to compiling: no compiler runs.)
std::vector<InputDim> SizesCompiledIn(const graph::Graph& graph, const fusion::DimSymbols& symbols,
                                      absl::Span<const InputDim> dynamic, const fusion::Plan& plan,
                                      const backend::TuningSnapshot& tuning) {
  const std::vector<std::string> kernels = backend::PrintPlanKernels(plan, tuning);
  const std::vector<int64_t> values = symbols.Values(graph);
  std::vector<InputDim> out;
  for (int32_t k = 0; k < symbols.num_symbols(); ++k) {
    std::vector<int64_t> probe = values;
    ++probe[k];
    bool same = false;
    try {
      const fusion::Plan other = fusion::BuildPlan(fusion::Resize(graph, symbols, probe), dynamic);
      const std::vector<std::string> resized = backend::PrintPlanKernels(other, tuning);
      same = resized == kernels;
      // The library calls run on the plan's graph resized to each call
      // (Executable::Run): its views' strides and offsets must follow the
      // sizes as the plan of the resized graph has them.
      if (same && !(fusion::SymbolicKey(other.graph, other.symbols) == fusion::SymbolicKey(plan.graph, plan.symbols))) {
        same = false;
        spdlog::debug("dynamic shapes: symbol {} stays compiled in: the plan's graph resized is not the plan of the graph "
                      "resized",
                      k);
      }
      for (size_t i = 0; !same && i < std::min(resized.size(), kernels.size()); ++i) {
        if (resized[i] == kernels[i]) continue;
        // The first line that changes (of the CUDA and C++ text).
        const std::vector<std::string> was = absl::StrSplit(kernels[i], '\n'), now = absl::StrSplit(resized[i], '\n');
        size_t line = 0;
        while (line < was.size() && line < now.size() && was[line] == now[line]) ++line;
        spdlog::debug("dynamic shapes: symbol {} stays compiled in: kernel {} of the plan changes with it: `{}` -> `{}`", k,
                      i, line < was.size() ? std::string(was[line]) : "", line < now.size() ? std::string(now[line]) : "");
        break;
      }
    } catch (const Error&) {
      // The graph does not even plan at another size: the size is compiled in.
    }
    if (!same) out.insert(out.end(), symbols.sources[k].begin(), symbols.sources[k].end());
  }
  return out;
}

// The profiler's name for a graph run.
std::string RunName(std::string_view eager_op, const backend::Executable& exe) {
  if (!eager_op.empty()) return absl::StrCat("eager: ", std::string(eager_op));  // absl::string_view is not std::string_view here
  if (exe.kernels().empty()) return "compiled graph (no kernels)";
  return absl::StrCat("compiled graph: ", absl::StrJoin(exe.kernels(), ", ", [](std::string* out, const KernelInfo& k) {
                        absl::StrAppend(out, k.name);
                      }));
}

void FinishRecord(profiler::HostOpRecord& record, std::string_view eager_op, const backend::Executable& exe,
                  absl::Span<const Tensor> inputs, int compiles) {
  std::vector<Shape> shapes;
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  record.Finish(RunName(eager_op, exe), exe.plan().graph.device().str(), std::move(shapes), compiles);
}

}  // namespace

RunResult RunGraph(const graph::Graph& graph, absl::Span<const Tensor> inputs, const RunOptions& options) {
  profiler::HostOpRecord record;  // inert (one atomic load) without a profiler
  InitLogging();
  PlanCache& cache = Cache();
  const backend::TuningSnapshot& tuning = backend::CurrentTuning();  // once per run
  std::shared_ptr<const backend::Executable> exe;
  RunResult result;
  std::vector<InputDim> dynamic(options.dynamic.begin(), options.dynamic.end());
  if (options.known_plan && options.known_plan->tuning() == tuning &&
      ValueGuardsHold(options.known_plan->plan().value_guards, inputs)) {
    exe = options.known_plan;
    fusebox::MutexLock lock(&cache.mu);
    ++cache.stats.plan_cache_hits;
    result.plan_cache_hit = true;
  }
  // Symbols are found on the graph as it is planned (hand-written attention
  // recognized: its softmax's row length no longer pins the sequence).
  // Not on the hot path: a call with its known plan skips it.
  const graph::Graph passed = exe || dynamic.empty() ? graph::Graph() : fusion::RunGraphPasses(graph);
  TunedPlans* tuned;
  {
    fusebox::MutexLock lock(&cache.mu);
    tuned = &cache.by_tuning[tuning];  // a node: stable while the cache lives
  }
  while (!exe) {
    const fusion::DimSymbols symbols = fusion::FindDimSymbols(passed, dynamic);
    for (const std::string& why : symbols.kept_static) spdlog::debug("dynamic shapes: {}", why);
    if (symbols.empty()) {
      auto [found, made] = FindOrMake(cache, tuned->plans, tuned->plans_pending, graph, [&] {
        return PlanAndCompile(graph, inputs, dynamic, /*assume=*/true, tuning, &result);
      });
      if (!ValueGuardsHold(found->plan().value_guards, inputs)) {
        std::tie(found, made) = PlanForOtherValues(cache, *tuned, graph, found, inputs, dynamic, tuning, &result);
        result.for_other_values = made;
      }
      exe = std::move(found);
      fusebox::MutexLock lock(&cache.mu);
      ++(made ? cache.stats.plan_compiles : cache.stats.plan_cache_hits);
      result.plan_cache_hit = !made;
      break;
    }
    SymbolicPlanKey key{fusion::SymbolicKey(passed, symbols), fusion::NeedsIndex64(graph)};
    auto [entry, made] = FindOrMake(cache, tuned->symbolic, tuned->symbolic_pending, key, [&] {
      SymbolicEntry made_entry;
      const auto start = std::chrono::steady_clock::now();
      fusion::Plan plan = fusion::BuildPlan(graph, dynamic);
      made_entry.keep_static = SizesCompiledIn(passed, symbols, dynamic, plan, tuning);  // plans again: part of planning
      result.compile_times.plan_ms += MsSince(start);
      if (made_entry.keep_static.empty()) {
        made_entry.exe = CompilePlan(std::move(plan), tuning, &result);
      } else {
        spdlog::debug("dynamic shapes: {} dim(s) stay compiled in (the kernels depend on their sizes)",
                      made_entry.keep_static.size());
      }
      return made_entry;
    });
    if (entry.exe) {
      fusebox::MutexLock lock(&cache.mu);
      ++(made ? cache.stats.plan_compiles : cache.stats.plan_cache_hits);
      result.plan_cache_hit = !made;
    }
    exe = entry.exe;
    for (const InputDim& d : entry.keep_static) std::erase(dynamic, d);
  }
  backend::Executable::StoredValues stored;
  result.outputs = ValueOrThrow(exe->Run(inputs, options.check_numerics ? &stored : nullptr));
  // An eager gather reports a bad index at the op, as PyTorch's eager does
  // (waiting for its kernel); compiled runs leave it to the results' reads.
  if (!options.eager_op.empty() && exe->checks_indices()) {
    for (const Tensor& t : result.outputs) {
      if (t.impl().storage != nullptr) t.impl().storage->CheckPending();
    }
  }
  if (options.check_numerics) result.numerics = CheckNumerics(graph, inputs, *exe, stored);
  if (record.active()) FinishRecord(record, options.eager_op, *exe, inputs, result.kernel_compiles);
  result.executable = std::move(exe);
  return result;
}

std::vector<Tensor> RunPlan(const backend::Executable& exe, absl::Span<const Tensor> inputs) {
  profiler::HostOpRecord record;
  std::vector<Tensor> outputs = ValueOrThrow(exe.Run(inputs));
  if (record.active()) FinishRecord(record, {}, exe, inputs, /*compiles=*/0);
  return outputs;
}

RuntimeStats GetRuntimeStats() {
  fusebox::MutexLock lock(&Cache().mu);
  return Cache().stats;
}

}  // namespace fusebox::frontend
