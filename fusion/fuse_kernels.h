// Groups the graph into kernels. Pointwise ops, views and constants are never
// kernels of their own: they are inlined (recomputed) into every kernel that
// needs them, so intermediates never touch memory. Reductions over the same
// rows (same input shape and reduced dims) share one kernel, one pass each in
// dependency order (softmax: max, then sum), together with their pointwise
// prologues and the consumers that read their results broadcast back over the
// row (epilogues). What cannot share a kernel is stored by the reduction's
// kernel and loaded by a later one; `explain` below says why, per boundary.
#pragma once

#include <string>
#include <vector>

#include "fusion/plan.h"

namespace fusebox::fusion {

Plan FuseKernels(const graph::Graph& graph);

}  // namespace fusebox::fusion
