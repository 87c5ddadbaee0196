// Lowers one kernel group of a plan to the kernel IR: decides the iteration
// space (dims that every operand walks contiguously together are merged, so a
// dense elementwise kernel indexes with `i` alone), turns views and strides
// into index expressions, and emits each value once (SSA, memoized per node
// and index). Pure: graph and group in, kernel out.
#pragma once

#include "backend/kernel_ir.h"
#include "fusion/plan.h"

namespace fusebox::backend {

Kernel LowerKernel(const graph::Graph& graph, const fusion::KernelGroup& group);

}  // namespace fusebox::backend
