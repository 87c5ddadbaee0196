// Lowers one kernel group of a plan to the kernel IR: decides the iteration
// space (dims that every operand walks contiguously together are merged, so a
// dense elementwise kernel indexes with `i` alone), turns views and strides
// into index expressions, and emits each value once (SSA, memoized per node
// and index).
#pragma once

#include "backend/kernel_ir.h"
#include "backend/tuning.h"
#include "fusion/plan.h"

namespace fusebox::backend {

// Pure: plan, group and tuning in, kernel out. In a dynamic plan (Plan::symbols) the
// sizes of run-time dims stay out of the kernel where the iteration space
// allows: the iteration count becomes a kernel argument.
Kernel LowerKernel(const fusion::Plan& plan, const fusion::KernelGroup& group, const TuningSnapshot& tuning);

}  // namespace fusebox::backend
