// Groups the graph into kernels. Every value that must reach memory (a graph
// output that is not simply an input) is stored by exactly one kernel; all
// pointwise producers, views and constants feeding it are inlined, so
// intermediates never touch memory. Stored values of the same shape share one
// kernel (vertical and horizontal fusion), reading each input once.
#pragma once

#include "fusion/plan.h"

namespace fusebox::fusion {

Plan FusePointwise(const graph::Graph& graph);

}  // namespace fusebox::fusion
