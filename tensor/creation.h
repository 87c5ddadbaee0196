// Tensor factories. Eager, they produce concrete tensors; inside compile()
// they are part of the graph, as torch.compile traces them (zeros, ones,
// full: a constant; arange: positions), computed by the kernels that read
// them, with nothing made on the host per call. rand and randn are in
// frontend/random.h: without a seed they draw through the graph.
#pragma once

#include "tensor/tensor.h"

namespace fusebox {

// --- creation
Tensor zeros(const Shape& shape, Device device = Device::cpu(), DType dtype = DType::kFloat32);
Tensor ones(const Shape& shape, Device device = Device::cpu(), DType dtype = DType::kFloat32);
Tensor full(const Shape& shape, double value, Device device = Device::cpu(), DType dtype = DType::kFloat32);
// 0, 1, ..., n-1 (int64 by default, as in PyTorch).
Tensor arange(int64_t n, Device device = Device::cpu(), DType dtype = DType::kInt64);
// start, start + step, ... up to (not including) end, as torch.arange:
// ceil((end - start) / step) values; step must be nonzero and point from
// start towards end (or start == end: empty).
Tensor arange(int64_t start, int64_t end, int64_t step = 1, Device device = Device::cpu(),
              DType dtype = DType::kInt64);

}  // namespace fusebox
