// The numerics check: a fused kernel computes the same values as the ops it
// fuses, run one by one; this measures how far apart they are. The graph is
// run again unfused (fusion/split_kernels.h) on the same inputs, with every
// 16-bit float op computed and stored in float32 (fused kernels compute in
// float32 and round only what they store, so the reference rounds nothing
// the fused kernel does not), and each fused kernel's stored values are
// compared with the reference's values of the same nodes.
#pragma once

#include <string>
#include <vector>

#include "absl/types/span.h"
#include "backend/executable.h"
#include "backend/kernel_info.h"
#include "graph/graph.h"
#include "tensor/tensor.h"

namespace fusebox::frontend {

// Whether FUSEBOX_CHECK_NUMERICS is set to something other than "0" (read once).
bool CheckNumericsFromEnv();

// One entry per kernel of `fused`, which ran `captured` on `inputs` and
// stored `fused_values`. Warns about every flagged kernel.
std::vector<KernelNumerics> CheckNumerics(const graph::Graph& captured, absl::Span<const Tensor> inputs,
                                          const backend::Executable& fused,
                                          const backend::Executable::StoredValues& fused_values);

// "max abs error 1.2e-07, max rel error 3.1e-07" (+ ", FLAGGED: <worst>").
std::string DescribeNumerics(const KernelNumerics& n);

}  // namespace fusebox::frontend
