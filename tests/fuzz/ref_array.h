// The fuzzer's own float64 reference: a tiny strided array (shape, strides,
// offset over shared values) carrying, per element, a bound on how far an
// honest float32/16-bit computation may be from it (first-order running
// error analysis), so tolerances follow conditioning instead of guesses.
// It shares nothing with fusebox's op table or CPU reference code.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace fusebox::fuzz {

// What the reference throws where PyTorch raises (bad dim, shape mismatch).
struct RefError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What the reference throws for a value too large to be worth fuzzing (the
// generator drops such steps; PyTorch would not fail).
struct TooBig : std::runtime_error {
  using std::runtime_error::runtime_error;
};
inline constexpr int64_t kMaxRefNumel = int64_t{1} << 20;

using Dims = std::vector<int64_t>;

struct RefArray {
  Dims shape, strides;
  int64_t offset = 0;
  DType dtype = DType::kFloat32;
  // val: the float64 value; err: the bound (+inf: not checkable).
  std::shared_ptr<std::vector<double>> val, err;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  // Storage position of the element at row-major logical index `flat`.
  int64_t At(int64_t flat) const;
  double v(int64_t flat) const { return (*val)[At(flat)]; }
  double e(int64_t flat) const { return (*err)[At(flat)]; }
};

int64_t Numel(const Dims& shape);
Dims ContiguousStrides(const Dims& shape);
RefArray MakeArray(const Dims& shape, DType dtype);  // contiguous, zeros
std::string DimsStr(const Dims& d);
// PyTorch's dim wrapping (a 0-d tensor takes dims -1 and 0).
int64_t Wrap(int64_t dim, int64_t rank);
// Unit roundoff of storing a value in `dtype` (2^-24 for float32).
double Roundoff(DType dtype);
double RoundTo(double v, DType dtype);
// Largest finite value of `dtype`.
double MaxFinite(DType dtype);
Dims BroadcastShapes(const Dims& a, const Dims& b);  // throws RefError

// Views (no copy), with PyTorch's checks.
RefArray Transpose(const RefArray& x, int64_t d0, int64_t d1);
RefArray Permute(const RefArray& x, const Dims& perm);
RefArray Narrow(const RefArray& x, int64_t dim, int64_t start, int64_t length);
RefArray Expand(const RefArray& x, const Dims& shape);
RefArray Unsqueeze(const RefArray& x, int64_t dim);
RefArray Squeeze(const RefArray& x, int64_t dim);
RefArray Reshape(const RefArray& x, const Dims& shape);  // copies
RefArray Contiguous(const RefArray& x);

}  // namespace fusebox::fuzz
