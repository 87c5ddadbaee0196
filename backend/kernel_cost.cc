#include "backend/kernel_cost.h"

#include <algorithm>
#include <vector>

namespace fusebox::backend {

int64_t DistinctElements(const Shape& shape, const Strides& strides) {
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return 0;
    if (d < strides.size() && strides[d] == 0) continue;
    n *= shape[d];
  }
  return n;
}

KernelCost GeneratedKernelCost(const Kernel& kernel, absl::FunctionRef<int64_t(const BufferParam&)> elements,
                               int64_t iterations) {
  // How many times each buffer's loads run per launch: an upper bound on
  // the elements read from it.
  std::vector<int64_t> loads(kernel.buffers.size(), 0);
  auto count = [&](const std::vector<Stmt>& body, int64_t runs) {
    for (const Stmt& s : body) {
      if (s.kind == StmtKind::kLoad && s.buffer >= 0) loads[s.buffer] += runs;
    }
  };
  const int64_t rows = kernel.is_reduction() ? iterations : 0;
  const int64_t computed = kernel.is_reduction() ? rows * std::max<int64_t>(kernel.row_length, 1) : iterations;
  if (kernel.is_reduction()) {
    for (const Pass& pass : kernel.passes) count(pass.body, computed);
    count(kernel.elementwise, computed);
    count(kernel.row_body, rows);
    for (const CachedLoad& c : kernel.cached_loads) {
      if (c.buffer >= 0) loads[c.buffer] += computed;
    }
  } else {
    count(kernel.body, iterations);
  }
  KernelCost cost;
  cost.flops = computed;
  for (size_t b = 0; b < kernel.buffers.size(); ++b) {
    const BufferParam& buffer = kernel.buffers[b];
    const int64_t n = buffer.is_output ? elements(buffer) : std::min(elements(buffer), loads[b]);
    cost.bytes += n * static_cast<int64_t>(DTypeSize(buffer.dtype));
  }
  return cost;
}

KernelCost GeneratedKernelCost(const Kernel& kernel, const graph::Graph& g, int64_t iterations) {
  return GeneratedKernelCost(
      kernel,
      [&](const BufferParam& b) {
        const graph::Node& n = g.node(b.node);
        return n.op == graph::Op::kInput ? DistinctElements(n.shape, n.strides) : Numel(n.shape);
      },
      iterations);
}

KernelCost GeneratedKernelCost(const Kernel& kernel, const graph::Graph& g, absl::Span<const Tensor> inputs,
                               const absl::flat_hash_map<graph::NodeId, Tensor>& stored, int64_t iterations) {
  return GeneratedKernelCost(
      kernel,
      [&](const BufferParam& b) -> int64_t {
        const graph::Node& n = g.node(b.node);
        if (n.op == graph::Op::kInput) {
          const Tensor& t = inputs[n.input_index];
          return DistinctElements(t.shape(), t.strides());
        }
        auto it = stored.find(b.node);
        return it != stored.end() ? it->second.numel() : 0;
      },
      iterations);
}

}  // namespace fusebox::backend
