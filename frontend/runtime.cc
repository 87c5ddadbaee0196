#include "frontend/runtime.h"

#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "backend/executable.h"
#include "fusion/pipeline.h"
#include "spdlog/spdlog.h"
#include "tensor/debug.h"

namespace fusebox::frontend {
namespace {

struct PlanCache {
  absl::Mutex mu;
  absl::flat_hash_map<graph::Graph, std::shared_ptr<const backend::Executable>> plans ABSL_GUARDED_BY(mu);
  RuntimeStats stats ABSL_GUARDED_BY(mu);
};

PlanCache& Cache() {
  static PlanCache* cache = new PlanCache();
  return *cache;
}

}  // namespace

RunResult RunGraph(const graph::Graph& graph, absl::Span<const Tensor> inputs) {
  InitLogging();
  PlanCache& cache = Cache();
  std::shared_ptr<const backend::Executable> exe;
  RunResult result;
  {
    absl::MutexLock lock(&cache.mu);
    if (auto it = cache.plans.find(graph); it != cache.plans.end()) {
      exe = it->second;
      ++cache.stats.plan_cache_hits;
      result.plan_cache_hit = true;
    }
  }
  if (!exe) {
    if (graph.device().is_cuda()) {
      FUSEBOX_ENSURE(cuda_available(), "cannot run on ", graph.device().str(),
                     ": no usable CUDA device; use Device::cpu()");
    }
    exe = ValueOrThrow(backend::Executable::Compile(fusion::BuildPlan(graph)));
    result.kernel_compiles = exe->compiled_kernels();
    absl::MutexLock lock(&cache.mu);
    cache.plans.emplace(graph, exe);
    ++cache.stats.plan_compiles;
  }
  result.outputs = ValueOrThrow(exe->Run(inputs));
  result.executable = std::move(exe);
  return result;
}

RuntimeStats GetRuntimeStats() {
  absl::MutexLock lock(&Cache().mu);
  return Cache().stats;
}

}  // namespace fusebox::frontend
