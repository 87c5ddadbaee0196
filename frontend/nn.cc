#include "frontend/nn.h"

#include <cmath>

#include "frontend/ops.h"
#include "frontend/random.h"
#include "tensor/creation.h"
#include "tensor/error.h"

namespace fusebox::nn {
namespace {

// Uniform in [-bound, bound) of `shape`, concrete on `device` in `dtype`.
Tensor Uniform(const Shape& shape, double bound, Device device, DType dtype, uint64_t seed) {
  return ((rand(shape, Device::cpu(), seed) * (2 * bound) - bound).to(dtype)).to(device);
}

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool has_bias, Device device, DType dtype, uint64_t seed) {
  FUSEBOX_ENSURE(in_features > 0 && out_features > 0, "nn::Linear: sizes must be positive, got in ", in_features,
                 ", out ", out_features);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = Uniform({out_features, in_features}, bound, device, dtype, seed);
  if (has_bias) bias = Uniform({out_features}, bound, device, dtype, seed + 1);
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim, Device device, DType dtype, uint64_t seed) {
  FUSEBOX_ENSURE(num_embeddings >= 0 && dim >= 0, "nn::Embedding: sizes must be >= 0, got num_embeddings ",
                 num_embeddings, ", dim ", dim);
  weight = randn({num_embeddings, dim}, Device::cpu(), seed).to(dtype).to(device);
}

LayerNorm::LayerNorm(int64_t dim, double eps, Device device, DType dtype, bool has_bias) : eps(eps) {
  FUSEBOX_ENSURE(dim > 0, "nn::LayerNorm: dim must be positive, got ", dim);
  FUSEBOX_ENSURE(eps >= 0, "nn::LayerNorm: eps must be >= 0, got ", eps);
  weight = ones({dim}, device, dtype);
  if (has_bias) bias = zeros({dim}, device, dtype);
}

Dropout::Dropout(double p) : p(p) {
  FUSEBOX_ENSURE(p >= 0 && p <= 1, "nn::Dropout: dropout probability has to be between 0 and 1, but got ", p);
}

RMSNorm::RMSNorm(int64_t dim, std::optional<double> eps, Device device, DType dtype) : eps(eps) {
  FUSEBOX_ENSURE(dim > 0, "nn::RMSNorm: dim must be positive, got ", dim);
  FUSEBOX_ENSURE(!eps || *eps >= 0, "nn::RMSNorm: eps must be >= 0, got ", *eps);
  weight = ones({dim}, device, dtype);
}

MLP::MLP(int64_t dim, int64_t num_layers, Device device, DType dtype, uint64_t seed, std::string approximate)
    : approximate(std::move(approximate)) {
  FUSEBOX_ENSURE(num_layers >= 0, "nn::MLP: num_layers must be >= 0, got ", num_layers);
  for (int64_t l = 0; l < num_layers; ++l) layers.emplace_back(dim, dim, true, device, dtype, seed + 2 * l);
}

Tensor MLP::operator()(Tensor x) const {
  for (const Linear& layer : layers) x = gelu(layer(x), approximate);
  return x;
}

}  // namespace fusebox::nn
