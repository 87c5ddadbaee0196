// The tensor ops users call, spelled as in PyTorch. Outside compile() each op
// runs at once as one kernel on its inputs' device; inside, it records a node.
// Inputs broadcast (NumPy rules) and promote (PyTorch rules; a double scalar
// does not widen a float tensor). Errors name the op, the shapes, dtypes and
// devices involved, and what to do.
#pragma once

#include <string>

#include "frontend/random.h"
#include "tensor/creation.h"
#include "tensor/tensor.h"

namespace fusebox {

// --- unary pointwise
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
// approximate: "none" (exact, erf) or "tanh"
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor neg(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor silu(const Tensor& x);      // x * sigmoid(x)
Tensor softplus(const Tensor& x);  // log(1 + exp(x)), x itself above 20 (beta 1, threshold 20)
// Rounding keeps the dtype (integers come back as a copy); round is half to
// even, as torch.round.
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor sign(const Tensor& x);  // -1, 0 or 1 in x's dtype; NaN gives 0, as PyTorch 2.11

// min(max(x, min), max); NaN stays NaN, and min > max gives max everywhere
// (as torch.clamp). An integer x keeps its dtype under whole bounds (as
// clamp(x, 0, 9) in PyTorch) and promotes to float32 under others (0.5).
Tensor clamp(const Tensor& x, double min, double max);
// x with `value` where the bool `mask` (broadcast to x's shape) is true; the
// result keeps x's dtype and shape.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// The lower (upper) triangle of the last two dims: elements with
// col - row <= diagonal (>= diagonal) kept, the others 0.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

// --- binary pointwise
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& x, double exponent);
Tensor pow(const Tensor& x, const Tensor& exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor where(const Tensor& cond, double a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);

// --- operators
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& x);

}  // namespace fusebox
