// Backend tests: a function's kernels as lowered IR, captured without running
// anything (no device, no compiler), for printers and layouts to be checked.
#pragma once

#include <vector>

#include "backend/cuda/row_spread.h"
#include "backend/lower.h"
#include "frontend/capture.h"
#include "frontend/fusebox.h"
#include "fusion/pipeline.h"
#include "gtest/gtest.h"

namespace fusebox::testing_backend {

// Captures fn(inputs) and lowers every kernel of its plan, in order.
template <typename Fn>
std::vector<backend::Kernel> LowerAll(Fn fn, const std::vector<Tensor>& inputs) {
  frontend::CaptureSession session(/*eager=*/false);
  Tensor out = fn(inputs);
  fusion::Plan plan = fusion::BuildPlan(session.Snapshot({out}));
  std::vector<backend::Kernel> kernels;
  for (const fusion::KernelGroup& group : plan.kernels) kernels.push_back(backend::LowerKernel(plan, group, backend::CurrentTuning()));
  return kernels;
}

// Captures fn(inputs) and lowers its single kernel.
template <typename Fn>
backend::Kernel LowerOnly(Fn fn, const std::vector<Tensor>& inputs) {
  std::vector<backend::Kernel> kernels = LowerAll(fn, inputs);
  EXPECT_EQ(kernels.size(), 1u);
  return kernels.at(0);
}

// The CUDA spread of a lowered kernel under the current tuning, as
// ChooseCudaSchedule chooses it first (cuda/row_spread.h).
inline backend::CudaRowSpread SpreadOf(const backend::Kernel& kernel) {
  return backend::ChooseCudaRowSpread(kernel, backend::CurrentTuning());
}

}  // namespace fusebox::testing_backend
