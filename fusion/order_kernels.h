// Orders a plan's kernels so each runs after the kernels that store what it
// loads (KernelGroup::buffer_inputs), keeping fusion's order wherever it
// already is one: fusion creates a kernel for a value when a later consumer
// needs it stored (a gather a column reduction reads, fuse_kernels.cc
// StoreMoves), after kernels that already load it. A cycle is an internal
// error.
#pragma once

#include "fusion/plan.h"

namespace fusebox::fusion {

Plan OrderKernels(Plan plan);

}  // namespace fusebox::fusion
