#include "fusion/attention_layout.h"

#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "fusion/compose_views.h"
#include "fusion/eliminate_dead_nodes.h"

namespace fusebox::fusion {

using graph::Graph;
using graph::Node;
using graph::NodeId;
using graph::Op;

namespace {

// The permutation `read` (of `attention`'s contiguous value) is, as
// permute(axes) takes it, when it is one with E last; else nothing.
std::optional<std::vector<int64_t>> PermutationOf(const Node& attention, const ViewOf& read) {
  const size_t r = attention.shape.size();
  if (read.offset != 0 || read.shape.size() != r) return std::nullopt;
  const Strides own = ContiguousStrides(attention.shape);
  std::vector<int64_t> axes(r, -1);
  std::vector<bool> taken(r, false);
  // Dims of size > 1 by their stride; then size-1 dims, in order, to the
  // size-1 dims left (their strides say nothing).
  for (size_t i = 0; i < r; ++i) {
    if (read.shape[i] == 1) continue;
    for (size_t d = 0; d < r; ++d) {
      if (!taken[d] && attention.shape[d] == read.shape[i] && own[d] == read.strides[i]) {
        axes[i] = static_cast<int64_t>(d), taken[d] = true;
        break;
      }
    }
    if (axes[i] < 0) return std::nullopt;
  }
  for (size_t i = 0; i < r; ++i) {
    if (read.shape[i] != 1) continue;
    for (size_t d = 0; d < r && axes[i] < 0; ++d) {
      if (!taken[d] && attention.shape[d] == 1) axes[i] = static_cast<int64_t>(d), taken[d] = true;
    }
    if (axes[i] < 0) return std::nullopt;
  }
  if (axes.back() != static_cast<int64_t>(r) - 1) return std::nullopt;  // the kernels store rows of E
  return axes;
}

}  // namespace

GraphRewrite StoreAttentionInConsumerLayout(const Graph& g) {
  // Per attention node (stored in its own order): the copy that takes its
  // place, and the order it stores in.
  struct Rewrite {
    NodeId copy;
    std::vector<int64_t> axes;
  };
  absl::flat_hash_map<NodeId, Rewrite> rewrites;
  absl::flat_hash_map<NodeId, NodeId> copy_of;  // a copy -> the attention node it becomes
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& copy = g.node(id);
    if (copy.op != Op::kCopy || g.StoreTarget(id) >= 0) continue;  // an extern cannot store into an input
    const ViewOf read = ThroughViewsAndCopies(
        g, ViewOf{.base = copy.inputs[0], .shape = copy.shape, .strides = ContiguousStrides(copy.shape)});
    const Node& attention = g.node(read.base);
    if (attention.op != Op::kAttention || !attention.axes.empty() || rewrites.contains(read.base)) continue;
    std::optional<std::vector<int64_t>> axes = PermutationOf(attention, read);
    if (!axes) continue;
    rewrites.emplace(read.base, Rewrite{.copy = id, .axes = *std::move(axes)});
    copy_of.emplace(id, read.base);
  }
  if (rewrites.empty()) return {.graph = g};
  GraphRewrite out;

  graph::GraphBuilder builder(g.device());
  std::vector<NodeId> remap(g.size(), -1);
  absl::flat_hash_map<NodeId, NodeId> stored;  // attention node -> its node in the copy's layout
  for (NodeId id = 0; id < g.size(); ++id) {
    Node node = g.node(id);
    for (NodeId& in : node.inputs) in = remap[in];
    if (auto it = copy_of.find(id); it != copy_of.end()) {  // the copy is the stored attention
      remap[id] = stored.at(it->second);
      continue;
    }
    auto it = rewrites.find(id);
    if (it == rewrites.end()) {
      remap[id] = builder.Add(std::move(node));
      continue;
    }
    // The attention node in the copy's shape; its other readers read that
    // through the inverse permutation (a view, no kernel).
    const Shape logical = node.shape;
    node.shape = g.node(it->second.copy).shape;
    node.axes = it->second.axes;
    out.notes.push_back(absl::StrCat("attention %", id, " ", ShapeToString(logical), " stores its result as the copy %",
                                     it->second.copy, " reads it (", ShapeToString(node.shape),
                                     "): no copy kernel"));
    const NodeId permuted = builder.Add(std::move(node));
    stored.emplace(id, permuted);
    const Strides own = ContiguousStrides(g.node(it->second.copy).shape);
    Strides strides(logical.size());
    for (size_t i = 0; i < logical.size(); ++i) strides[it->second.axes[i]] = own[i];
    remap[id] = builder.Add(Node{.op = Op::kView, .dtype = g.node(id).dtype, .shape = logical,
                                 .inputs = {permuted}, .strides = strides});
  }
  std::vector<NodeId> outputs, targets;
  for (NodeId out : g.outputs()) outputs.push_back(remap[out]);
  for (NodeId target : g.store_targets()) targets.push_back(target < 0 ? -1 : remap[target]);
  // The views and copies between the old node and the copy are left unread.
  out.graph = EliminateDeadNodes(std::move(builder).Build(std::move(outputs), std::move(targets)));
  return out;
}

}  // namespace fusebox::fusion
