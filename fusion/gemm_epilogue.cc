#include "fusion/gemm_epilogue.h"

#include <algorithm>
#include <optional>

#include "tensor/error.h"

namespace fusebox::fusion {
namespace {

using graph::Graph;
using graph::NodeId;
using graph::Op;

// The one node reading `id` (which is not returned), or nullopt.
std::optional<NodeId> OnlyUse(const Graph& g, NodeId id) {
  if (std::find(g.outputs().begin(), g.outputs().end(), id) != g.outputs().end()) return std::nullopt;
  std::optional<NodeId> user;
  for (NodeId u = id + 1; u < g.size(); ++u) {
    for (NodeId in : g.node(u).inputs) {
      if (in != id) continue;
      if (user.has_value() && *user != u) return std::nullopt;
      user = u;
    }
  }
  return user;
}

// The operand of `add` other than the chain's value `v`, when `add` adds to
// `v` something of its own shape and dtype (no broadcast of `v`); else -1.
NodeId OtherAddend(const Graph& g, NodeId add, NodeId v) {
  const graph::Node& n = g.node(add);
  if (n.op != Op::kAdd || n.inputs[0] == n.inputs[1]) return -1;
  if (n.dtype != g.node(v).dtype || n.shape != g.node(v).shape) return -1;
  return n.inputs[0] == v ? n.inputs[1] : n.inputs[0];
}

// A bias: a graph input of the GEMM's column count broadcast over the other
// dims (stride 0, as the frontend binds `y + bias`), of the same dtype. The
// value's last dim must be the GEMM's columns (a reshape keeping it keeps
// each element's column).
bool IsBias(const Graph& g, NodeId bias_id, NodeId add, NodeId mm) {
  const graph::Node& bias = g.node(bias_id);
  const graph::Node& n = g.node(add);
  if (bias.op != Op::kInput || bias.dtype != n.dtype || bias.strides.empty() || bias.strides.back() != 1) return false;
  if (n.shape.back() != g.node(mm).shape.back()) return false;
  for (size_t d = 0; d + 1 < bias.strides.size(); ++d) {
    if (bias.strides[d] != 0) return false;
  }
  return true;
}

// A residual: dense in memory in the stored value's order before the GEMM.
bool IsResidual(const Graph& g, NodeId id, absl::FunctionRef<bool(NodeId)> stored_before) {
  const graph::Node& n = g.node(id);
  if (n.op == Op::kInput) return IsContiguous(n.shape, n.strides);
  return stored_before(id);
}

// Follows the chain from `mm` while each step is one the GEMM computes, up
// to `stop` (-1: as far as it goes). Order: a bias, then a gelu or a
// residual (gelu(AB + bias) + C is not one epilogue).
GemmChain Walk(const Graph& g, NodeId mm, NodeId stop, absl::FunctionRef<bool(NodeId)> stored_before) {
  GemmChain c{.matmul = mm, .end = mm};
  if (g.node(mm).scalar == 0) return c;
  NodeId v = mm;  // the chain's value: c.end, or a reshape of it
  while (c.end != stop) {
    const std::optional<NodeId> u = OnlyUse(g, v);
    // A value stored in place into an input stays a kernel of its own.
    if (!u.has_value() || g.StoreTarget(*u) >= 0) break;
    const graph::Node& n = g.node(*u);
    if (n.op == Op::kView && IsReshapeView(n, g.node(v))) {
      v = *u;
      continue;
    }
    const NodeId other = OtherAddend(g, *u, v);
    const bool last = c.gelu || c.residual >= 0;  // nothing follows these
    if (!last && c.bias < 0 && other >= 0 && IsBias(g, other, *u, mm)) {
      c.bias = other;
    } else if (!last && other >= 0 && IsResidual(g, other, stored_before)) {
      c.residual = other;
    } else if (!last && n.op == Op::kGeluTanh && n.dtype == g.node(mm).dtype) {
      c.gelu = true;
    } else {
      break;
    }
    c.end = v = *u;
  }
  return c;
}

}  // namespace

bool IsReshapeView(const graph::Node& view, const graph::Node& base) {
  return view.offset == 0 && Numel(view.shape) == Numel(base.shape) && IsContiguous(view.shape, view.strides);
}

GemmChain EpilogueChain(const Graph& g, NodeId mm, absl::FunctionRef<bool(NodeId)> stored_before) {
  return Walk(g, mm, -1, stored_before);
}

GemmChain ChainOf(const Graph& g, const KernelGroup& k) {
  FUSEBOX_CHECK(k.kind == KernelKind::kExtern && k.outputs.size() == 1, "not an extern kernel: ", k.name);
  NodeId mm = -1;
  for (NodeId id : k.nodes) {
    if (g.node(id).op != Op::kMatmul) continue;
    FUSEBOX_CHECK(mm < 0, "extern kernel ", k.name, " computes two matmuls");
    mm = id;
  }
  FUSEBOX_CHECK(mm >= 0, "extern kernel ", k.name, " computes no matmul");
  // The fuser took these steps with every residual stored before: the walk
  // retakes them to the stored value.
  const GemmChain c = Walk(g, mm, k.outputs[0], [](NodeId) { return true; });
  FUSEBOX_CHECK(c.end == k.outputs[0], "extern kernel ", k.name, " stores %", k.outputs[0],
                " which its matmul's epilogue does not reach");
  return c;
}

}  // namespace fusebox::fusion
