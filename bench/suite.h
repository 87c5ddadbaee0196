// The benchmark suite: which cases run at which sizes (the sizes on a
// GPU, small ones for --quick), and how one case is run: the first calls
// (they compile), the checks against each other and float64, then the timed
// trials of eager and compiled over rotated inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/gpt2_case.h"
#include "bench/harness.h"
#include "bench/report.h"
#include "bench/workloads.h"

namespace fusebox::bench {

struct Case {
  std::string name;  // the row's name; --filter matches it
  const Workload* workload;
  Shape shape;
  DType dtype = DType::kFloat32;
  std::string label;
  // More than 1: each trial times this many calls back to back on the host
  // clock (harness.h): the call overhead.
  int calls_per_trial = 1;
  // Compiled with CompileOptions::replay: a call whose arguments match an
  // earlier call's runs the recorded plan without tracing (the call-overhead
  // row; PyTorch's side uses torch.compile(mode="reduce-overhead")).
  bool replay = false;
  // set_matmul_epilogue_fusion while it runs (the library's default: on).
  bool epilogue_fusion = true;
  // The kernels compile() should make of it (0: the workload's fused_kernels).
  int fused_kernels = 0;
  // A whole-model row (gpt2_forward, bench/gpt2_case.h): run by
  // RunGpt2Forward; `workload` is null and `shape` is [batch, seq].
  std::optional<Gpt2Spec> gpt2 = std::nullopt;
};

std::vector<Case> SuiteCases(bool quick);

// True when `name` contains one of the comma-separated words of `filter`,
// or of its ';'-separated ones where it holds a ';' (sweep rows, whose
// shapes hold commas); an empty filter matches every name.
bool Matches(const std::string& filter, const std::string& name);
// What --filter matches for a suite case: its name, then its label and dtype
// where it has a label ("gpt2_forward SDPA bfloat16", "manual_softmax long
// rows float32"), so one of a name's rows can be run alone.
std::string FilterKey(const Case& c);

// Graphs the runtime ran during `fn`: in eager mode one per op, each one kernel.
int64_t GraphsRun(const std::function<void()>& fn);

// One line per distinct PTX summary of `kernels` (the MLP's sixteen gelu
// kernels are one line), in launch order.
std::vector<std::string> PtxLines(const std::vector<KernelInfo>& kernels);

// --profile: the device time of each kernel over a few calls of `call`
// (its argument: the call's number), and how long the host takes to issue
// one call (tracing and launching, no waiting), with no profiler (which adds
// its own host time per op) and then under it.
void Profile(Device device, const std::function<void(int)>& call, Result& r);
// Profile's count of the memory-bound kernels among `rows` (their roofline
// time is their bytes' at the copy ceiling) into r.profile_memory_bound, and
// those under 80% of it, worst first, with their bytes a call, into
// r.profile_memory_bound_under_80; library kernels (extern_: cuBLASLt,
// flash attention) apart, into r.profile_library_*; every kernel with a
// roofline into r.profile_kernels.
void MemoryBoundKernels(const std::vector<ProfilerRow>& rows, const Roofline& roofline, Result& r);

// Runs one case on `device`; inputs are drawn from seeds derived from `seed`.
// Errors become failures of the result, so the other cases still run.
Result RunCase(const Case& c, Device device, const TimingPlan& plan, double cache_bytes, uint64_t seed);

}  // namespace fusebox::bench
