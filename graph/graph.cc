#include "graph/graph.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tensor/error.h"

namespace fusebox::graph {

NodeId GraphBuilder::Add(Node node) {
  const OpInfo& info = Info(node.op);
  // arity -1: any number of inputs, at least one (cat).
  FUSEBOX_CHECK(info.arity < 0 ? !node.inputs.empty() : static_cast<int>(node.inputs.size()) == info.arity, "op ", info.name, " takes ",
                info.arity, " inputs, got ", node.inputs.size());
  for (NodeId in : node.inputs) FUSEBOX_CHECK(in >= 0 && in < size(), "dangling input %", in);
  if (following_) {
    // The trace's graph is hash-consed too, so its node at this step is this
    // node's only possible twin, or the next new node.
    const std::vector<NodeId>& adds = following_->adds;
    if (followed_adds_ < static_cast<int32_t>(adds.size())) {
      const NodeId expected = adds[followed_adds_];
      if (expected <= followed_nodes_ && following_->graph.nodes_[expected] == node) {
        ++followed_adds_;
        if (expected == followed_nodes_) ++followed_nodes_;
        return expected;
      }
    }
    StopFollowing();
  }
  absl::InlinedVector<NodeId, 1>& same_hash = index_[absl::HashOf(node)];
  for (NodeId id : same_hash) {
    if (graph_.nodes_[id] == node) {
      adds_.push_back(id);
      return id;
    }
  }
  const NodeId id = size();
  if (node.op == Op::kInput) ++graph_.num_inputs_;
  same_hash.push_back(id);
  graph_.nodes_.push_back(std::move(node));
  adds_.push_back(id);
  return id;
}

void GraphBuilder::Follow(std::shared_ptr<const Trace> trace) {
  FUSEBOX_CHECK(size() == 0 && adds_.empty() && !following_, "Follow needs an empty builder");
  following_ = std::move(trace);
  followed_adds_ = followed_nodes_ = 0;
}

void GraphBuilder::StopFollowing() {
  if (!following_) return;
  const Graph& g = following_->graph;
  graph_.nodes_.assign(g.nodes_.begin(), g.nodes_.begin() + followed_nodes_);
  for (NodeId id = 0; id < followed_nodes_; ++id) {
    index_[absl::HashOf(graph_.nodes_[id])].push_back(id);
    if (graph_.nodes_[id].op == Op::kInput) ++graph_.num_inputs_;
  }
  adds_.assign(following_->adds.begin(), following_->adds.begin() + followed_adds_);
  following_.reset();
}

std::shared_ptr<const Trace> GraphBuilder::Repeated(const std::vector<NodeId>& outputs,
                                                    const std::vector<NodeId>& store_targets) const {
  if (!following_) return nullptr;
  const Graph& g = following_->graph;
  if (followed_nodes_ != g.size() || followed_adds_ != static_cast<int32_t>(following_->adds.size()) ||
      g.device_ != graph_.device_ || outputs != g.outputs_) {
    return nullptr;
  }
  const bool no_targets = std::all_of(g.store_targets_.begin(), g.store_targets_.end(), [](NodeId t) { return t < 0; });
  if (store_targets.empty() ? !no_targets : store_targets != g.store_targets_) return nullptr;
  return following_;
}

Graph GraphBuilder::Build(std::vector<NodeId> outputs, std::vector<NodeId> store_targets) const& {
  GraphBuilder copy = *this;
  copy.StopFollowing();
  Graph g = std::move(copy.graph_);
  Finish(std::move(outputs), std::move(store_targets), &g);
  return g;
}

Graph GraphBuilder::Build(std::vector<NodeId> outputs, std::vector<NodeId> store_targets) && {
  return std::move(*this).BuildTrace(std::move(outputs), std::move(store_targets)).graph;
}

Trace GraphBuilder::BuildTrace(std::vector<NodeId> outputs, std::vector<NodeId> store_targets) && {
  StopFollowing();
  Trace t{.graph = std::move(graph_), .adds = std::move(adds_)};
  Finish(std::move(outputs), std::move(store_targets), &t.graph);
  index_.clear();
  adds_.clear();
  graph_ = Graph();
  graph_.device_ = t.graph.device_;
  return t;
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
    } else if (Info(n.op).kind == OpKind::kMove) {
      args.push_back(absl::StrCat("dim=", n.dim));
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
