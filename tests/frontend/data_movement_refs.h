// float64 references of the data-movement ops (exact: they move values) and
// random indices, shared by the data-movement tests.
#pragma once

#include <cstdint>
#include <vector>

#include "frontend/fusebox.h"
#include "tests/test_util.h"

namespace fusebox::test_move {

using test_util::Expected;

// Row-major multi-index of `flat` over `shape`, and back.
inline std::vector<int64_t> Unflatten(int64_t flat, const Shape& shape) {
  std::vector<int64_t> at(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    at[d] = flat % shape[d];
    flat /= shape[d];
  }
  return at;
}
inline int64_t Flatten(const std::vector<int64_t>& at, const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + at[d];
  return flat;
}

// Random indices in [0, size) of `shape`.
inline Tensor RandomIndex(const Shape& shape, int64_t size, DType dtype, Device device = Device::cpu()) {
  std::vector<double> v(Numel(shape));
  for (double& x : v) x = static_cast<double>(test_util::Rng()() % static_cast<uint64_t>(size));
  return Tensor::from_vector(v, shape, dtype, device);
}

inline Expected IndexSelectRef(const Tensor& x, int64_t dim, const Tensor& index) {
  const std::vector<double> xv = x.to_double_vector(), iv = index.to_double_vector();
  Expected e{.shape = x.shape(), .dtype = x.dtype()};
  e.shape[dim] = index.numel();
  for (int64_t f = 0; f < Numel(e.shape); ++f) {
    std::vector<int64_t> at = Unflatten(f, e.shape);
    at[dim] = static_cast<int64_t>(iv[at[dim]]);
    e.values.push_back(xv[Flatten(at, x.shape())]);
  }
  return e;
}

inline Expected GatherRef(const Tensor& x, int64_t dim, const Tensor& index) {
  const std::vector<double> xv = x.to_double_vector(), iv = index.to_double_vector();
  Expected e{.shape = index.shape(), .dtype = x.dtype()};
  for (int64_t f = 0; f < Numel(e.shape); ++f) {
    std::vector<int64_t> at = Unflatten(f, e.shape);
    at[dim] = static_cast<int64_t>(iv[f]);
    e.values.push_back(xv[Flatten(at, x.shape())]);
  }
  return e;
}

inline Expected CatRef(const std::vector<Tensor>& xs, int64_t dim, DType dtype) {
  Expected e{.shape = xs[0].shape(), .dtype = dtype};
  e.shape[dim] = 0;
  for (const Tensor& x : xs) e.shape[dim] += x.shape()[dim];
  std::vector<std::vector<double>> values;
  for (const Tensor& x : xs) values.push_back(x.to_double_vector());
  for (int64_t f = 0; f < Numel(e.shape); ++f) {
    std::vector<int64_t> at = Unflatten(f, e.shape);
    size_t k = 0;
    while (at[dim] >= xs[k].shape()[dim]) at[dim] -= xs[k++].shape()[dim];
    e.values.push_back(values[k][Flatten(at, xs[k].shape())]);
  }
  return e;
}

}  // namespace fusebox::test_move
