#include "fusion/causal_mask.h"

#include <algorithm>
#include <cmath>
#include <limits>
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

// Whether `id` is computed from positions (iota), the constants -1, 0, 1 and
// +-inf and graph inputs whose values `values` can read (noted in `inputs`), by ops
// the evaluator below knows (views, casts, pointwise ops with a reference).
// Other constants could make a mask causal at one size and not at another
// (j < i + 1 && j < 70) that a dynamic plan also serves; a plan that read an
// input's values is never dynamic (the runtime plans it at its sizes).
bool FromKnownValues(const Graph& g, NodeId id, InputValues* values, std::vector<int32_t>* inputs) {
  const Node& n = g.node(id);
  // +-inf too: an additive mask's -inf compares and selects the same at every size.
  if (n.op == Op::kConstant) return n.scalar == 0 || n.scalar == 1 || n.scalar == -1 || std::isinf(n.scalar);
  if (n.op == Op::kIota) return true;
  if (n.op == Op::kInput) {
    if (values == nullptr || !values->Readable(n.input_index)) return false;
    if (std::find(inputs->begin(), inputs->end(), n.input_index) == inputs->end()) inputs->push_back(n.input_index);
    return true;
  }
  const graph::OpKind kind = graph::Info(n.op).kind;
  if (kind != graph::OpKind::kView && kind != graph::OpKind::kPointwise) return false;
  if (kind == graph::OpKind::kPointwise && graph::Info(n.op).reference == nullptr) return false;
  for (NodeId in : n.inputs) {
    if (!FromKnownValues(g, in, values, inputs)) return false;
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

// Node `id`'s values at the positions `at` (row-major linear indices into its
// shape), in float64, every position at once: a view maps the positions into
// its input's row-major value, a pointwise op combines its operands' values
// at the same positions. False where a value is not modelled (a rounding cast).
bool Evaluate(const Graph& g, NodeId id, InputValues* values, const std::vector<int64_t>& at, std::vector<double>* out) {
  const Node& n = g.node(id);
  out->resize(at.size());
  switch (n.op) {
    case Op::kConstant:
      std::fill(out->begin(), out->end(), n.scalar);
      return true;
    case Op::kIota:
      for (size_t k = 0; k < at.size(); ++k) (*out)[k] = static_cast<double>(at[k]);
      return true;
    case Op::kInput:
      values->Gather(n.input_index, at, out);
      return true;
    case Op::kView: {
      std::vector<int64_t> in_at;
      StridedOffsets(n.shape, n.strides, n.offset, at, &in_at);
      return Evaluate(g, n.inputs[0], values, in_at, out);
    }
    default:
      break;
  }
  std::vector<double> args[3];
  for (size_t k = 0; k < n.inputs.size() && k < 3; ++k) {
    if (!Evaluate(g, n.inputs[k], values, at, &args[k])) return false;  // pointwise operands have the node's shape
  }
  for (auto& a : args) a.resize(at.size(), 0.0);
  const auto reference = graph::Info(n.op).reference;
  for (size_t k = 0; k < at.size(); ++k) {
    const double v = n.op == Op::kCast ? args[0][k] : reference(args[0][k], args[1][k], args[2][k]);
    const std::optional<double> cast = Cast(v, n.dtype);
    if (!cast) return false;
    (*out)[k] = *cast;
  }
  return true;
}

// What the [.., L, S] `mask` keeps (bool, or additive: 0 keeps, -inf drops), the same for every batch index
// (batch dims of size 1, or broadcast by a view that steps 0 along them),
// evaluated at every position of one batch: exactly the top-left triangle,
// every key, or something else.
MaskKind Classify(const Graph& g, NodeId mask, bool keeps, InputValues* values) {
  const Node& m = g.node(mask);
  const size_t r = m.shape.size();
  const int64_t l = m.shape[r - 2], s = m.shape[r - 1];
  if (l * s > kMaxEvaluated) return MaskKind::kOther;
  for (size_t d = 0; d + 2 < r; ++d) {
    const bool broadcast = (m.op == Op::kView || m.op == Op::kInput) && m.strides[d] == 0;
    if (m.shape[d] != 1 && !broadcast) return MaskKind::kOther;
  }
  std::vector<int64_t> at(static_cast<size_t>(l * s));
  for (int64_t k = 0; k < l * s; ++k) at[k] = k;  // batch index 0: the first L * S positions
  std::vector<double> v;
  if (!Evaluate(g, mask, values, at, &v)) return MaskKind::kOther;
  const bool additive = m.dtype != DType::kBool;
  bool causal = true, all = true;
  for (int64_t i = 0; i < l; ++i) {
    for (int64_t j = 0; j < s; ++j) {
      const double x = v[i * s + j];
      // An additive mask keeps with 0 and drops with -inf; any other value
      // is a bias on the scores.
      if (additive && x != 0 && x != -std::numeric_limits<double>::infinity()) return MaskKind::kOther;
      const bool kept = additive ? x == 0 : (x != 0) == keeps;
      causal = causal && kept == (j <= i);
      all = all && kept;
    }
  }
  return causal ? MaskKind::kCausal : all ? MaskKind::kAll : MaskKind::kOther;
}

// The subgraph `id` is computed by, spelled out: equal keys, equal values.
void AppendKey(const Graph& g, NodeId id, InputValues* values, std::string* key) {
  const Node& n = g.node(id);
  if (n.op == Op::kInput) absl::StrAppend(key, "(values ", values->ContentId(n.input_index), ")");
  absl::StrAppend(key, "(", graph::Info(n.op).name, " ", DTypeName(n.dtype), ShapeToString(n.shape), " ", n.scalar,
                  " ", n.dim);
  if (n.op == Op::kView) absl::StrAppend(key, " +", n.offset, ShapeToString(n.strides));
  for (NodeId in : n.inputs) AppendKey(g, in, values, key);
  key->push_back(')');
}

}  // namespace

MaskKind JudgeMask(const Graph& g, NodeId mask, bool keeps, CausalMaskMemo* memo, InputValues* values,
                   std::vector<int32_t>* read) {
  const Node& m = g.node(mask);
  const size_t r = m.shape.size();
  std::vector<int32_t> inputs;
  if (r < 2 || !FromKnownValues(g, mask, values, &inputs)) return MaskKind::kOther;
  MaskKind kind;
  if (memo == nullptr) {
    kind = Classify(g, mask, keeps, values);
  } else {
    std::string key = keeps ? "keeps " : "drops ";
    AppendKey(g, mask, values, &key);
    auto [it, inserted] = memo->try_emplace(std::move(key), MaskKind::kOther);
    if (inserted) it->second = Classify(g, mask, keeps, values);
    kind = it->second;
  }
  if (read != nullptr) read->insert(read->end(), inputs.begin(), inputs.end());
  return kind;
}

}  // namespace fusebox::fusion
