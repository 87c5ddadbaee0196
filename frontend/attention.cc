#include "frontend/attention.h"

#include <cmath>

#include "frontend/matmul.h"
#include "frontend/random.h"
#include "frontend/ops.h"
#include "frontend/reductions.h"
#include "tensor/creation.h"
#include "tensor/error.h"

namespace fusebox {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    double dropout_p, bool is_causal, std::optional<double> scale) {
  constexpr const char* kName = "scaled_dot_product_attention";
  FUSEBOX_ENSURE(q.defined() && k.defined() && v.defined(), kName, ": q, k and v must be defined Tensors");
  FUSEBOX_ENSURE(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, kName, ": q, k and v must have at least 2 dims ",
                 "[..., L, E], got ", ShapeToString(q.shape()), ", ", ShapeToString(k.shape()), ", ",
                 ShapeToString(v.shape()));
  const int64_t e = q.shape().back(), s = k.shape()[k.dim() - 2];
  FUSEBOX_ENSURE(k.shape().back() == e, kName, ": q and k must share the last size E, got q ",
                 ShapeToString(q.shape()), " and k ", ShapeToString(k.shape()));
  FUSEBOX_ENSURE(v.shape()[v.dim() - 2] == s, kName, ": k and v must share the key count S (dim -2), got k ",
                 ShapeToString(k.shape()), " and v ", ShapeToString(v.shape()));
  FUSEBOX_ENSURE(dropout_p >= 0.0 && dropout_p <= 1.0, kName, ": dropout_p must be in [0, 1], got ", dropout_p);
  FUSEBOX_ENSURE(!(is_causal && attn_mask.defined()), kName,
                 ": pass either attn_mask or is_causal, not both (as PyTorch)");
  const double factor = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(e));
  Tensor scores = matmul(q, k.transpose(-2, -1)) * factor;  // [..., L, S]
  const int64_t l = scores.shape()[scores.dim() - 2];
  if (is_causal) {
    scores = masked_fill(scores, triu(ones({l, s}, q.device(), DType::kBool), 1), -INFINITY);
  } else if (attn_mask.defined()) {
    FUSEBOX_ENSURE(attn_mask.device() == q.device(), kName, ": attn_mask is on ", attn_mask.device().str(),
                   ", q on ", q.device().str());
    if (attn_mask.dtype() == DType::kBool) {
      scores = masked_fill(scores, eq(attn_mask, 0.0), -INFINITY);
    } else {
      FUSEBOX_ENSURE(IsFloating(attn_mask.dtype()), kName, ": attn_mask must be bool or floating, got ",
                     DTypeName(attn_mask.dtype()));
      scores = scores + attn_mask.to(scores.dtype());
    }
  }
  // PyTorch's math path drops attention weights after the softmax (always
  // in training mode: dropout_p is the caller's switch).
  Tensor weights = softmax(scores, -1);
  if (dropout_p > 0.0) weights = dropout(weights, dropout_p, /*training=*/true);
  return matmul(weights, v);
}

}  // namespace fusebox
