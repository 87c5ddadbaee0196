// The profiler's roofline facts of one kernel (KernelCost, profiler.h): its
// minimal bytes and FLOPs, computed from the kernel IR and the plan's graph
// when the plan is compiled (and again per run for a dynamic plan, whose
// sizes are known only then, while a profiler records).
#pragma once

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "backend/kernel_ir.h"
#include "profiler/profiler.h"
#include "tensor/tensor.h"

namespace fusebox::backend {

// Elements a view reads at least once: dims of stride 0 (a broadcast) count
// once. Missing strides mean contiguous.
int64_t DistinctElements(const Shape& shape, const Strides& strides);

// A generated kernel's cost: each input buffer read once (at most as many
// elements as its loads can reach: a gather reads the rows it looks up, not
// the whole table), each output written once; FLOPs are the elements it
// computes. `elements(b)` is the distinct elements bound to buffer b, and
// `iterations` the launch's (Kernel::Iterations).
KernelCost GeneratedKernelCost(const Kernel& kernel, absl::FunctionRef<int64_t(const BufferParam&)> elements,
                               int64_t iterations);

// The same with the buffers' sizes read off graph `g`'s nodes: a static
// plan's facts (a dynamic one's at the sizes it was compiled with).
KernelCost GeneratedKernelCost(const Kernel& kernel, const graph::Graph& g, int64_t iterations);

// The same with the sizes of one run: the tensors bound to the graph's
// inputs and those the run stored so far (a dynamic plan's facts).
KernelCost GeneratedKernelCost(const Kernel& kernel, const graph::Graph& g, absl::Span<const Tensor> inputs,
                               const absl::flat_hash_map<graph::NodeId, Tensor>& stored, int64_t iterations);

}  // namespace fusebox::backend
