#include "frontend/attention.h"

#include <cmath>

#include "backend/attention.h"
#include "backend/cuda/flash_attention.h"
#include "frontend/capture.h"
#include "frontend/matmul.h"
#include "frontend/random.h"
#include "frontend/ops.h"
#include "frontend/reductions.h"
#include "tensor/creation.h"
#include "tensor/error.h"

namespace fusebox {
namespace {

// The fused path, where the kernel takes the problem: one `attention` node,
// the flash kernel on CUDA and its CPU twin on the host (an extern kernel
// each). q, k, v of one dtype (bf16, f16, f32), head dim 64 or 128 for all three, some
// queries and keys, batch dims (broadcast, read by strides) and a mask that
// broadcasts to [batch..., L, S]. Else nullopt: the decomposition.
std::optional<Tensor> FusedAttention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                     bool is_causal, double factor) {
  const DType dtype = q.dtype();
  const int64_t l = q.shape()[q.dim() - 2], s = k.shape()[k.dim() - 2], e = q.shape().back();
  if (k.dtype() != dtype || v.dtype() != dtype || !cuda::FlashAttentionSupports(dtype, e) ||
      v.shape().back() != e || l == 0 || s == 0 || k.device() != q.device() || v.device() != q.device()) {
    return std::nullopt;
  }
  auto batch_of = [](const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); };
  Shape batch, qk;
  if (!BroadcastShapes(batch_of(q), batch_of(k), &qk) || !BroadcastShapes(qk, batch_of(v), &batch) ||
      batch.size() > backend::kAttentionBatchDims) {
    return std::nullopt;
  }
  auto full = [&](int64_t rows, int64_t cols) {
    Shape shape = batch;
    shape.push_back(rows);
    shape.push_back(cols);
    return shape;
  };
  // q, k, v as [batch..., rows, E] views; a concrete one strided along E is copied first.
  auto operand = [&](const Tensor& t, int64_t rows) {
    const bool dense = t.is_lazy() || t.shape().back() <= 1 || t.strides().back() == 1;
    return (dense ? t : t.contiguous()).expand(full(rows, e));
  };
  Tensor mask;
  if (attn_mask.defined()) {
    Shape broadcast;
    if (attn_mask.device() != q.device() || (attn_mask.dtype() != DType::kBool && !IsFloating(attn_mask.dtype())) ||
        !BroadcastShapes(attn_mask.shape(), full(l, s), &broadcast) || broadcast != full(l, s)) {
      return std::nullopt;
    }
    // A float mask is added in the scores' dtype, as the decomposition adds it.
    mask = (attn_mask.dtype() == DType::kBool ? attn_mask : attn_mask.to(dtype)).expand(full(l, s));
  }
  frontend::OpRecorder recorder;
  frontend::CaptureSession& session = recorder.session();
  graph::Node node{.op = graph::Op::kAttention, .dtype = dtype, .shape = full(l, e), .scalar = factor,
                   .dim = is_causal ? 1 : 0};
  node.inputs.push_back(session.Operand(operand(q, l)));
  node.inputs.push_back(session.Operand(operand(k, s)));
  node.inputs.push_back(session.Operand(operand(v, s)));
  if (mask.defined()) node.inputs.push_back(session.Operand(mask));
  return recorder.Finish(session.AddNode(std::move(node)), q.device(), "scaled_dot_product_attention");
}

}  // namespace

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
  // The fused kernel has no dropout: dropout_p > 0 takes the math path below.
  if (dropout_p == 0.0) {
    if (std::optional<Tensor> fused = FusedAttention(q, k, v, attn_mask, is_causal, factor)) return *fused;
  }
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
