// Example modules mirroring torch.nn, for the seed's MLP: plain structs of
// tensors whose forward is ordinary fusebox ops (wrap a call in compile() to
// fuse it). Parameters are created concrete on `device`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "frontend/data_movement.h"
#include "frontend/matmul.h"
#include "frontend/random.h"
#include "frontend/reductions.h"
#include "tensor/tensor.h"

namespace fusebox::nn {

// torch.nn.Linear: weight [out, in] and bias [out], initialized uniformly in
// [-1/sqrt(in), 1/sqrt(in)) as PyTorch does, from `seed`.
struct Linear {
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Device device = Device::cpu(),
         DType dtype = DType::kFloat32, uint64_t seed = 0);
  Tensor operator()(const Tensor& x) const { return linear(x, weight, bias); }

  Tensor weight, bias;  // bias undefined without one
};

// torch.nn.Embedding: weight [num_embeddings, dim], initialized from N(0, 1)
// as PyTorch does, from `seed`; forward looks up rows (embedding()).
struct Embedding {
  Embedding(int64_t num_embeddings, int64_t dim, Device device = Device::cpu(), DType dtype = DType::kFloat32,
            uint64_t seed = 0);
  Tensor operator()(const Tensor& indices) const { return embedding(indices, weight); }

  Tensor weight;
};

// torch.nn.LayerNorm over the last dim of size `dim`: weight ones and bias
// zeros [dim] (bias undefined with bias = false, as nanoGPT's LayerNorm).
struct LayerNorm {
  LayerNorm(int64_t dim, double eps = 1e-5, Device device = Device::cpu(), DType dtype = DType::kFloat32,
            bool bias = true);
  Tensor operator()(const Tensor& x) const { return layer_norm(x, {weight.shape()[0]}, weight, bias, eps); }
  Tensor weight, bias;
  double eps;
};

// torch.nn.Dropout: dropout(x, p, training); `training` (true at first, as a
// torch module) is what model.train() / model.eval() switch.
struct Dropout {
  explicit Dropout(double p = 0.5);
  Tensor operator()(const Tensor& x) const { return dropout(x, p, training); }
  double p;
  bool training = true;
};

// torch.nn.RMSNorm over the last dim: weight ones [dim]; eps defaults to the
// input dtype's machine epsilon (rms_norm's default).
struct RMSNorm {
  RMSNorm(int64_t dim, std::optional<double> eps = std::nullopt, Device device = Device::cpu(),
          DType dtype = DType::kFloat32);
  Tensor operator()(const Tensor& x) const { return rms_norm(x, {weight.shape()[0]}, weight, eps); }
  Tensor weight;
  std::optional<double> eps;
};

// The seed's MLP: num_layers Linear(dim, dim), each followed by gelu
// (exact, as torch.nn.functional.gelu's default; approximate = "tanh" for the
// tanh form).
struct MLP {
  MLP(int64_t dim, int64_t num_layers, Device device = Device::cpu(), DType dtype = DType::kFloat32,
      uint64_t seed = 0, std::string approximate = "none");
  Tensor operator()(Tensor x) const;

  std::vector<Linear> layers;
  std::string approximate;
};

}  // namespace fusebox::nn
