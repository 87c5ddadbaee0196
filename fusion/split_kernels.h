// The unfused plan: every op (pointwise or reduction) is a kernel of its own
// that stores its value, which later kernels load, as PyTorch eager runs a
// program. Views and constants are still read in place. The numerics check
// (frontend/numerics_check.h) runs this next to the fused plan and compares
// the values both store.
#pragma once

#include "fusion/plan.h"

namespace fusebox::fusion {

Plan SplitKernels(const graph::Graph& graph);

}  // namespace fusebox::fusion
