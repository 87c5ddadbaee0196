#include "fusion/eliminate_dead_nodes.h"

#include <vector>

namespace fusebox::fusion {

using graph::Graph;
using graph::GraphBuilder;
using graph::Node;
using graph::NodeId;

Graph EliminateDeadNodes(const Graph& g) {
  std::vector<bool> live(g.size(), false);
  for (NodeId out : g.outputs()) live[out] = true;
  for (NodeId target : g.store_targets()) {
    if (target >= 0) live[target] = true;  // read by no node, yet bound and written
  }
  for (NodeId id = g.size() - 1; id >= 0; --id) {
    if (!live[id]) continue;
    for (NodeId in : g.node(id).inputs) live[in] = true;
  }
  bool all_live = true;
  for (bool l : live) all_live = all_live && l;
  if (all_live) return g;

  // Input nodes keep their input_index: the runtime binds tensors by it.
  GraphBuilder builder(g.device());
  std::vector<NodeId> remap(g.size(), -1);
  for (NodeId id = 0; id < g.size(); ++id) {
    if (!live[id]) continue;
    Node node = g.node(id);
    for (NodeId& in : node.inputs) in = remap[in];
    remap[id] = builder.Add(std::move(node));
  }
  std::vector<NodeId> outputs, targets;
  for (NodeId out : g.outputs()) outputs.push_back(remap[out]);
  for (NodeId target : g.store_targets()) targets.push_back(target < 0 ? -1 : remap[target]);
  return builder.Build(std::move(outputs), std::move(targets));
}

}  // namespace fusebox::fusion
