// Reductions and the normalizations built from them, spelled as in PyTorch.
// Primitive reductions (sum, prod, max, min) are one graph node each; mean,
// var, softmax, log_softmax, logsumexp, layer_norm and rms_norm are defined by
// decomposition, so they fuse exactly like the same code written by hand.
#pragma once

#include <optional>
#include <vector>

#include "tensor/tensor.h"

namespace fusebox {

// `dims` empty means every dim. Negative dims count from the end.
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor prod(const Tensor& x);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
// max/min over a dim return the values (indices come from argmax/argmin).
Tensor max(const Tensor& x);
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor min(const Tensor& x);
Tensor min(const Tensor& x, int64_t dim, bool keepdim = false);
// Position of the first maximum (minimum) along `dim` (NaN counts as the
// maximum, as in PyTorch), int64; without a dim, the flat index.
Tensor argmax(const Tensor& x);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Divides by N - correction (1: unbiased, as torch.var's default).
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, double correction = 1, bool keepdim = false);

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
// Normalizes over the trailing dims given by `normalized_shape`; weight and
// bias may be undefined Tensors (no affine part).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// eps defaults to the dtype's machine epsilon, as in torch.nn.functional.rms_norm.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);

}  // namespace fusebox
