#include "fusion/fuse_pointwise.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_set.h"

namespace fusebox::fusion {
namespace {

using graph::Graph;
using graph::NodeId;
using graph::Op;
using graph::OpKind;

// Every non-source node reachable from `outputs`, in topological (id) order.
std::vector<NodeId> InlinedNodes(const Graph& g, const std::vector<NodeId>& outputs) {
  std::vector<bool> reached(g.size(), false);
  for (NodeId out : outputs) reached[out] = true;
  for (NodeId id = g.size() - 1; id >= 0; --id) {
    if (!reached[id]) continue;
    for (NodeId in : g.node(id).inputs) reached[in] = true;
  }
  std::vector<NodeId> nodes;
  for (NodeId id = 0; id < g.size(); ++id) {
    if (reached[id] && graph::Info(g.node(id).op).kind != OpKind::kSource) nodes.push_back(id);
  }
  return nodes;
}

}  // namespace

Plan FusePointwise(const Graph& g) {
  Plan plan{.graph = g};
  absl::flat_hash_set<NodeId> stored;
  for (NodeId out : g.outputs()) {
    if (g.node(out).op == Op::kInput || !stored.insert(out).second) continue;
    auto same_shape = [&](const KernelGroup& k) { return k.iteration_shape == g.node(out).shape; };
    auto it = std::find_if(plan.kernels.begin(), plan.kernels.end(), same_shape);
    if (it == plan.kernels.end()) {
      plan.kernels.push_back(KernelGroup{.iteration_shape = g.node(out).shape});
      it = plan.kernels.end() - 1;
    }
    it->outputs.push_back(out);
  }
  for (KernelGroup& k : plan.kernels) k.nodes = InlinedNodes(g, k.outputs);
  return plan;
}

}  // namespace fusebox::fusion
