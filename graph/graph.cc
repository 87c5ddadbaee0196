#include "graph/graph.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tensor/error.h"

namespace fusebox::graph {

NodeId GraphBuilder::Add(Node node) {
  const OpInfo& info = Info(node.op);
  FUSEBOX_CHECK(static_cast<int>(node.inputs.size()) == info.arity, "op ", info.name, " takes ",
                info.arity, " inputs, got ", node.inputs.size());
  for (NodeId in : node.inputs) FUSEBOX_CHECK(in >= 0 && in < size(), "dangling input %", in);
  absl::InlinedVector<NodeId, 1>& same_hash = index_[absl::HashOf(node)];
  for (NodeId id : same_hash) {
    if (graph_.nodes_[id] == node) return id;
  }
  const NodeId id = size();
  if (node.op == Op::kInput) ++graph_.num_inputs_;
  same_hash.push_back(id);
  graph_.nodes_.push_back(std::move(node));
  return id;
}

Graph GraphBuilder::Build(std::vector<NodeId> outputs, std::vector<NodeId> store_targets) const& {
  Graph g = graph_;
  Finish(std::move(outputs), std::move(store_targets), &g);
  return g;
}

Graph GraphBuilder::Build(std::vector<NodeId> outputs, std::vector<NodeId> store_targets) && {
  Graph g = std::move(graph_);
  Finish(std::move(outputs), std::move(store_targets), &g);
  index_.clear();
  graph_ = Graph();
  graph_.device_ = g.device_;
  return g;
}

void GraphBuilder::Finish(std::vector<NodeId> outputs, std::vector<NodeId> store_targets, Graph* g) const {
  if (store_targets.empty()) store_targets.assign(outputs.size(), -1);
  FUSEBOX_CHECK(store_targets.size() == outputs.size(), store_targets.size(), " store targets for ",
                outputs.size(), " outputs");
  for (size_t k = 0; k < outputs.size(); ++k) {
    const NodeId target = store_targets[k];
    if (target < 0) continue;
    FUSEBOX_CHECK(target < g->size() && g->node(target).op == Op::kInput, "store target %", target, " is not an input");
    FUSEBOX_CHECK(g->node(outputs[k]).op != Op::kInput && g->node(outputs[k]).shape == g->node(target).shape &&
                      g->node(outputs[k]).dtype == g->node(target).dtype &&
                      std::count(outputs.begin(), outputs.end(), outputs[k]) == 1,
                  "output %", outputs[k], " cannot be stored into %", target);
    for (const Node& n : g->nodes_) {
      FUSEBOX_CHECK(std::find(n.inputs.begin(), n.inputs.end(), target) == n.inputs.end(), "store target %",
                    target, " is also read");
    }
  }
  g->outputs_ = std::move(outputs);
  g->store_targets_ = std::move(store_targets);
}

NodeId Graph::StoreTarget(NodeId out) const {
  for (size_t k = 0; k < outputs_.size(); ++k) {
    if (outputs_[k] == out) return store_targets_[k];
  }
  return -1;
}

std::string Graph::ToString() const {
  std::string out;
  for (NodeId id = 0; id < size(); ++id) {
    const Node& n = nodes_[id];
    std::vector<std::string> args;
    for (NodeId in : n.inputs) args.push_back(absl::StrCat("%", in));
    if (n.op == Op::kInput) {
      args.push_back(absl::StrCat("arg", n.input_index, ", strides=", ShapeToString(n.strides)));
    } else if (n.op == Op::kConstant) {
      args.push_back(absl::StrFormat("%.9g", n.scalar));
    } else if (Info(n.op).kind == OpKind::kReduction) {
      args.push_back(absl::StrCat("axes=", ShapeToString(n.axes)));
    } else if (n.op == Op::kView) {
      args.push_back(absl::StrCat("strides=", ShapeToString(n.strides), ", offset=", n.offset));
    }
    absl::StrAppend(&out, "  %", id, " = ", OpName(n.op), "(", absl::StrJoin(args, ", "), ") : ",
                    DTypeName(n.dtype), ShapeToString(n.shape), "\n");
  }
  std::vector<std::string> outs;
  for (size_t k = 0; k < outputs_.size(); ++k) {
    outs.push_back(absl::StrCat("%", outputs_[k], store_targets_[k] < 0 ? "" : absl::StrCat(" into %", store_targets_[k])));
  }
  absl::StrAppend(&out, "  return ", absl::StrJoin(outs, ", "), "  (", device_.str(), ")\n");
  return out;
}

}  // namespace fusebox::graph
