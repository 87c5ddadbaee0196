#include "fusion/split_kernels.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"

namespace fusebox::fusion {
namespace {

using graph::Node;
using graph::NodeId;
using graph::OpKind;

bool IsOp(const Node& n) {
  const OpKind kind = graph::Info(n.op).kind;
  return kind == OpKind::kPointwise || kind == OpKind::kReduction || kind == OpKind::kExtern || kind == OpKind::kMove;
}

// `root`'s kernel: the root, the views between it and the values it reads,
// and (as loads) the ops among those values.
KernelGroup Kernel(const graph::Graph& g, NodeId root) {
  const Node& n = g.node(root);
  KernelGroup k{.iteration_shape = n.shape, .outputs = {root}, .nodes = {root}};
  if (graph::Info(n.op).kind == OpKind::kReduction) {
    k.iteration_shape = g.node(n.inputs[0]).shape;
    k.axes = n.axes;
    k.reductions = {root};
    k.kind = KeepsRowOnChip(k.iteration_shape, k.axes) ? KernelKind::kPersistent : KernelKind::kReduction;
  }
  if (graph::Info(n.op).kind == OpKind::kExtern) k.kind = KernelKind::kExtern;
  absl::flat_hash_set<NodeId> seen;
  std::vector<NodeId> stack(n.inputs.begin(), n.inputs.end());
  while (!stack.empty()) {
    const NodeId x = stack.back();
    stack.pop_back();
    if (!seen.insert(x).second) continue;
    const Node& in = g.node(x);
    if (IsOp(in)) {
      k.buffer_inputs.push_back(x);
    } else if (in.op == graph::Op::kView) {
      k.nodes.push_back(x);
      stack.push_back(in.inputs[0]);
    }
  }
  std::sort(k.nodes.begin(), k.nodes.end());
  std::sort(k.buffer_inputs.begin(), k.buffer_inputs.end());
  return k;
}

}  // namespace

Plan SplitKernels(const graph::Graph& graph) {
  Plan plan{.graph = graph};
  const std::vector<NodeId>& outputs = graph.outputs();
  for (NodeId id = 0; id < graph.size(); ++id) {
    const Node& n = graph.node(id);
    // A returned view or constant is stored too (a copy), as the fused plan does.
    const bool returned = n.op != graph::Op::kInput && std::find(outputs.begin(), outputs.end(), id) != outputs.end();
    // A matmul operand the GEMM cannot read in place is stored first (a copy).
    if (graph::Info(n.op).kind == OpKind::kExtern) {
      for (NodeId in : n.inputs) {
        if (!ExternOperandReady(graph, id, in)) plan.kernels.push_back(Kernel(graph, in));
      }
    }
    if (IsOp(n) || returned) plan.kernels.push_back(Kernel(graph, id));
  }
  return plan;
}

}  // namespace fusebox::fusion
