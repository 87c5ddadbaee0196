// The kernel-IR passes after lowering, in one list per stage, each a pure
// function in its own file: the target-neutral ones every kernel takes
// (LowerKernel runs them), and the CUDA ones that follow from the kernel's
// schedule (PrintCuda runs them). FUSEBOX_DEBUG=passes dumps the IR after
// each pass, "(unchanged)" where it changed nothing.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "backend/kernel_ir.h"
#include "backend/tuning.h"

namespace fusebox::backend {

struct CudaSchedule;

struct KernelPass {
  std::string_view name;
  std::string_view why;  // one line, for the dump and docs/architecture.md
  // Whether it runs for this kernel under this tuning (and schedule, for
  // the CUDA stage; nullptr in the neutral stage).
  bool (*applies)(const Kernel& kernel, const CudaSchedule* schedule, const TuningSnapshot& tuning);
  Kernel (*run)(Kernel kernel);
};

// Every kernel, after lowering: row reciprocals, 1 + tanh, abs compares.
std::span<const KernelPass> NeutralKernelPasses();
// CUDA, after the schedule is chosen: online exp sums (split columns), held
// row values (rows held on chip).
std::span<const KernelPass> CudaKernelPasses();

// Runs `passes` in order on `kernel`: after each that applies, the IR (or
// "(unchanged)") goes to stderr under FUSEBOX_DEBUG=passes and is appended
// to `trace` where given.
Kernel RunKernelPasses(Kernel kernel, std::span<const KernelPass> passes, const CudaSchedule* schedule,
                       const TuningSnapshot& tuning, std::string* trace = nullptr);

}  // namespace fusebox::backend
