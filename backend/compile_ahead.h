// A plan's kernels lowered, printed and compiled before Executable::Compile
// loads them one by one: the compiles (NVRTC, the host compiler) run on
// several threads when a plan has more than one source, so a plan of n new
// kernels costs about one compile instead of n. What they produce goes into
// the compile cache, where the loader then finds it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_schedule.h"
#include "backend/kernel_ir.h"
#include "backend/tuning.h"
#include "fusion/plan.h"
#include "tensor/device.h"

namespace fusebox::backend {

struct PreparedKernel {
  Kernel ir;
  // CUDA sources (the plan's, or the twin): the schedule they were printed
  // for, which the launch reads (cuda/cuda_schedule.h).
  std::optional<CudaSchedule> schedule;
  std::string source;       // for the plan's device, after RewriteSource
  std::string cuda_source;  // CPU plans with CUDA twins (SetAlsoCompileCudaForCpu): the sm_90 twin
  // What is compiled: the two above under entry_name (kKernelEntry, so
  // kernels that differ only in name share one compile; or the kernel's own
  // name under FUSEBOX_UNIQUE_KERNEL_NAMES, kernel_entry.h), which the
  // loader looks up.
  std::string entry_name;
  std::string entry_source, cuda_entry_source;
};

// Lowers and prints every kernel of `plan` under `tuning`; then compiles each source through
// the compile cache (CUDA for sm_<cuda_arch>; CPU kernels also as CUDA twins
// for sm_<cuda_arch> when `cuda_twins`), at most one thread per core. A
// failed compile is not cached, so the caller's compile of the same source
// reports it.
// `cuda_sm_count`: the device's SM count (0 without one: the reference
// device's, as in Kernel::cuda_sm_count).
// `times` (optional): where its time went.
struct CompileAheadTimes {
  double codegen_ms = 0;  // lowering and printing, on the calling thread
  double compile_ms = 0;  // the compiles, wall (in parallel)
};
std::vector<PreparedKernel> CompileAhead(const fusion::Plan& plan, int cuda_arch, bool cuda_twins,
                                         const TuningSnapshot& tuning, int cuda_sm_count = 0,
                                         CompileAheadTimes* times = nullptr);

}  // namespace fusebox::backend
