// Codegen tests' shortcut from a function of tensors to its kernel IR:
// capture without running, plan, lower the single kernel.
#pragma once

#include <vector>

#include "backend/lower.h"
#include "frontend/capture.h"
#include "frontend/fusebox.h"
#include "fusion/pipeline.h"
#include "gtest/gtest.h"

namespace fusebox::test_util {

// Captures fn(inputs) without running it and lowers its single kernel.
template <typename Fn>
backend::Kernel LowerOnly(Fn fn, const std::vector<Tensor>& inputs) {
  frontend::CaptureSession session(/*eager=*/false);
  Tensor out = fn(inputs);
  fusion::Plan plan = fusion::BuildPlan(session.Snapshot({out}));
  EXPECT_EQ(plan.kernels.size(), 1u);
  return backend::LowerKernel(plan, plan.kernels.at(0));
}

}  // namespace fusebox::test_util
