// Runs a graph: plan (fusion pipeline), compile (backend) and cache the result
// by the graph's structure, which includes every input's shape, strides, dtype
// and device, then execute. Eager ops and compiled functions both come here.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "backend/executable.h"
#include "backend/kernel_info.h"
#include "fusion/dynamic_shapes.h"
#include "graph/graph.h"
#include "tensor/tensor.h"

namespace fusebox::frontend {

struct RunResult {
  std::vector<Tensor> outputs;  // one per graph output
  // The compiled plan (cached for the process): its kernels in launch order,
  // the graph after the passes and the fusion notes.
  std::shared_ptr<const backend::Executable> executable;
  bool plan_cache_hit = false;
  // Planned because the graph's plan assumed input values this call's
  // inputs do not hold (a mask judged on them; fusion/input_values.h).
  bool for_other_values = false;
  int kernel_compiles = 0;                // compiler runs this call caused
  CompileTimes compile_times;             // of the plan this call compiled, if any
  // check_numerics: each kernel's stored values against an unfused run.
  std::vector<KernelNumerics> numerics;
};

struct RunOptions {
  // Input dims whose sizes should stay run-time values, so the plan serves
  // other sizes too (fusion/dynamic_shapes.h); dims the kernels turn out to
  // need are compiled in, and the cache remembers that per key.
  absl::Span<const fusion::InputDim> dynamic;
  // The op's name when this is one eager op, else empty; it names the run
  // for the profiler ("eager: mul", else "compiled graph: <kernels>").
  std::string_view eager_op;
  // Also run the graph unfused and compare (numerics_check.h).
  bool check_numerics = false;
  // The plan this graph had the last time it ran with these dynamic dims
  // (the caller saw the same graph again): used without a cache lookup.
  std::shared_ptr<const backend::Executable> known_plan;
};

// Throws fusebox::Error (with the compiler log on a codegen failure).
RunResult RunGraph(const graph::Graph& graph, absl::Span<const Tensor> inputs, const RunOptions& options = {});

// Runs a plan compiled earlier (a replayed call, CompileOptions::replay),
// recorded by the profiler as a graph run like RunGraph's.
std::vector<Tensor> RunPlan(const backend::Executable& exe, absl::Span<const Tensor> inputs);

struct RuntimeStats {
  int64_t plan_compiles = 0;
  int64_t plan_cache_hits = 0;
};
RuntimeStats GetRuntimeStats();

}  // namespace fusebox::frontend
