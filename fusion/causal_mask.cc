#include "fusion/causal_mask.h"

#include <cmath>
#include <optional>
#include <vector>

#include "graph/op.h"

namespace fusebox::fusion {
namespace {

using graph::Graph;
using graph::Node;
using graph::NodeId;
using graph::Op;

constexpr int64_t kMaxEvaluated = int64_t{1} << 22;

// Whether `id` is computed from positions (iota) and the constants -1, 0
// and 1 alone, by ops the evaluator below knows (views, casts, pointwise ops
// with a reference). Other constants could make a mask causal at one size
// and not at another (j < i + 1 && j < 70) that a dynamic plan also serves.
bool FromConstantsAlone(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (n.op == Op::kConstant) return n.scalar == 0 || n.scalar == 1 || n.scalar == -1;
  if (n.op == Op::kIota) return true;
  const graph::OpKind kind = graph::Info(n.op).kind;
  if (kind != graph::OpKind::kView && kind != graph::OpKind::kPointwise) return false;
  if (kind == graph::OpKind::kPointwise && graph::Info(n.op).reference == nullptr) return false;
  for (NodeId in : n.inputs) {
    if (!FromConstantsAlone(g, in)) return false;
  }
  return true;
}

// The value a cast to `dtype` leaves, where the mask's small integers are
// exact; nullopt where it would round (the evaluator does not model that).
std::optional<double> Cast(double v, DType dtype) {
  if (dtype == DType::kBool) return v != 0 ? 1.0 : 0.0;
  if (!IsFloating(dtype)) return std::trunc(v);
  if (dtype == DType::kFloat32) return static_cast<double>(static_cast<float>(v));
  if (std::isfinite(v) && (v != std::trunc(v) || std::fabs(v) > 256)) return std::nullopt;
  return v;
}

// Node `id`'s value at `pos` (one index per dim), in float64.
std::optional<double> Evaluate(const Graph& g, NodeId id, const Shape& pos) {
  const Node& n = g.node(id);
  if (n.op == Op::kConstant) return n.scalar;
  const Strides rowmajor = ContiguousStrides(n.shape);
  if (n.op == Op::kIota) {
    int64_t linear = 0;
    for (size_t d = 0; d < pos.size(); ++d) linear += pos[d] * rowmajor[d];
    return static_cast<double>(linear);
  }
  if (n.op == Op::kView) {
    int64_t linear = n.offset;
    for (size_t d = 0; d < pos.size(); ++d) linear += pos[d] * n.strides[d];
    const Shape& in_shape = g.node(n.inputs[0]).shape;
    Shape in_pos(in_shape.size(), 0);
    for (int d = static_cast<int>(in_shape.size()) - 1; d >= 0; --d) {
      if (in_shape[d] == 0) return std::nullopt;
      in_pos[d] = linear % in_shape[d];
      linear /= in_shape[d];
    }
    return Evaluate(g, n.inputs[0], in_pos);
  }
  double args[3] = {0, 0, 0};
  for (size_t k = 0; k < n.inputs.size() && k < 3; ++k) {
    std::optional<double> v = Evaluate(g, n.inputs[k], pos);  // pointwise operands have the node's shape
    if (!v) return std::nullopt;
    args[k] = *v;
  }
  if (n.op == Op::kCast) return Cast(args[0], n.dtype);
  return Cast(graph::Info(n.op).reference(args[0], args[1], args[2]), n.dtype);
}

}  // namespace

bool IsCausalMask(const Graph& g, NodeId mask, bool keeps) {
  const Node& m = g.node(mask);
  const size_t r = m.shape.size();
  if (m.dtype != DType::kBool || r < 2 || !FromConstantsAlone(g, mask)) return false;
  const int64_t l = m.shape[r - 2], s = m.shape[r - 1];
  if (l * s > kMaxEvaluated) return false;
  // The same for every batch index: batch dims of size 1, or broadcast by a
  // view that steps 0 along them.
  for (size_t d = 0; d + 2 < r; ++d) {
    if (m.shape[d] != 1 && !(m.op == Op::kView && m.strides[d] == 0)) return false;
  }
  Shape pos(r, 0);
  for (int64_t i = 0; i < l; ++i) {
    for (int64_t j = 0; j < s; ++j) {
      pos[r - 2] = i, pos[r - 1] = j;
      const std::optional<double> v = Evaluate(g, mask, pos);
      if (!v || ((*v != 0) == keeps) != (j <= i)) return false;
    }
  }
  return true;
}

}  // namespace fusebox::fusion
