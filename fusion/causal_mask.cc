#include "fusion/causal_mask.h"

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
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
  if (n.op == Op::kIota) {
    int64_t linear = 0;
    for (size_t d = 0; d < pos.size(); ++d) linear = linear * n.shape[d] + pos[d];
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

// Whether the [.., L, S] bool `mask` keeps exactly the top-left triangle,
// the same for every batch index (batch dims of size 1, or broadcast by a
// view that steps 0 along them), evaluated element by element.
bool IsTopLeftTriangle(const Graph& g, NodeId mask, bool keeps) {
  const Node& m = g.node(mask);
  const size_t r = m.shape.size();
  const int64_t l = m.shape[r - 2], s = m.shape[r - 1];
  if (l * s > kMaxEvaluated) return false;
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

// The subgraph `id` is computed by, spelled out: equal keys, equal values.
void AppendKey(const Graph& g, NodeId id, std::string* key) {
  const Node& n = g.node(id);
  absl::StrAppend(key, "(", graph::Info(n.op).name, " ", DTypeName(n.dtype), ShapeToString(n.shape), " ", n.scalar,
                  " ", n.dim);
  if (n.op == Op::kView) absl::StrAppend(key, " +", n.offset, ShapeToString(n.strides));
  for (NodeId in : n.inputs) AppendKey(g, in, key);
  key->push_back(')');
}

}  // namespace

bool IsCausalMask(const Graph& g, NodeId mask, bool keeps, CausalMaskMemo* memo) {
  const Node& m = g.node(mask);
  const size_t r = m.shape.size();
  if (m.dtype != DType::kBool || r < 2 || !FromConstantsAlone(g, mask)) return false;
  std::string key;
  if (memo != nullptr) {
    absl::StrAppend(&key, keeps ? "keeps " : "drops ");
    AppendKey(g, mask, &key);
    if (auto it = memo->find(key); it != memo->end()) return it->second;
  }
  const bool causal = IsTopLeftTriangle(g, mask, keeps);
  if (memo != nullptr) memo->emplace(std::move(key), causal);
  return causal;
}

}  // namespace fusebox::fusion
