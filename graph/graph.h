// graph::Graph: an immutable DAG of nodes in topological order, addressed by
// id. GraphBuilder hash-conses: adding a node equal to an existing one returns
// the existing id, so common subexpressions are shared for free and two
// captures of the same code build equal graphs. A graph's structure (its
// nodes, including each input's shape/strides/dtype, and its outputs) is the
// key of the compiled-plan cache. An output may be stored into an input's
// tensor instead of a fresh buffer: that is how in-place ops write.
#pragma once

#include <bit>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/hash/hash.h"
#include "graph/op.h"
#include "tensor/device.h"
#include "tensor/shape.h"

namespace fusebox::graph {

using NodeId = int32_t;

struct Node {
  Op op = Op::kInput;
  DType dtype = DType::kFloat32;
  Shape shape;
  absl::InlinedVector<NodeId, 3> inputs;
  // Attributes, zero unless the op uses them:
  int32_t input_index = -1;  // kInput: position in the graph's input list
  Strides strides;           // kInput: the bound tensor's element strides;
                             // kView: strides into the input's contiguous value
  int64_t offset = 0;        // kView: element offset into the input's contiguous value
  double scalar = 0;         // kConstant: the value; kMatmul: 1 when its epilogue may take ops after it;
                             // kAttention: the scale
  std::vector<int64_t> axes; // reductions: the reduced dims (sorted); the
                             // result keeps them with size 1;
                             // kAttention: empty, or the order its result is
                             // stored in: dim i is [..., L, E]'s dim axes[i]
                             // (as permute(axes)), E last
  int64_t dim = 0;           // data movement (index_select, gather, cat): the
                             // dim the op indexes or joins along (>= 0); cat's
                             // operands are `inputs`, as many as it joins;
                             // kAttention: 1 when causal

  friend bool operator==(const Node& a, const Node& b) {
    return a.op == b.op && a.dtype == b.dtype && a.shape == b.shape && a.inputs == b.inputs &&
           a.input_index == b.input_index && a.strides == b.strides && a.offset == b.offset &&
           std::bit_cast<uint64_t>(a.scalar) == std::bit_cast<uint64_t>(b.scalar) && a.axes == b.axes &&
           a.dim == b.dim;
  }
  template <typename H>
  friend H AbslHashValue(H h, const Node& n) {
    return H::combine(std::move(h), n.op, n.dtype, n.shape, n.inputs, n.input_index, n.strides,
                      n.offset, std::bit_cast<uint64_t>(n.scalar), n.axes, n.dim);
  }
};

class Graph {
 public:
  const Node& node(NodeId id) const { return nodes_[id]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  int32_t size() const { return static_cast<int32_t>(nodes_.size()); }
  const std::vector<NodeId>& outputs() const { return outputs_; }
  Device device() const { return device_; }
  int32_t num_inputs() const { return num_inputs_; }
  // Per output: the input node whose bound tensor it is stored into, through
  // that input's strides (in-place writes), or -1 for a fresh buffer.
  const std::vector<NodeId>& store_targets() const { return store_targets_; }
  // The input node output `out` is stored into, or -1.
  NodeId StoreTarget(NodeId out) const;

  // A copy with `rewrite(id, node)` applied to every node, ids and outputs
  // kept: for passes that change attributes (sizes, strides), not structure.
  template <typename F>
  Graph Rewritten(F&& rewrite) const {
    Graph g = *this;
    for (NodeId id = 0; id < size(); ++id) rewrite(id, g.nodes_[id]);
    return g;
  }

  // One line per node: "%3 = mul(%1, %2) : float32[8192, 8192]".
  std::string ToString() const;

  friend bool operator==(const Graph& a, const Graph& b) {
    return a.device_ == b.device_ && a.outputs_ == b.outputs_ && a.store_targets_ == b.store_targets_ &&
           a.nodes_ == b.nodes_;
  }
  template <typename H>
  friend H AbslHashValue(H h, const Graph& g) {
    return H::combine(std::move(h), g.device_, g.outputs_, g.store_targets_, g.nodes_);
  }

 private:
  friend class GraphBuilder;
  std::vector<Node> nodes_;
  std::vector<NodeId> outputs_;
  std::vector<NodeId> store_targets_;  // one per output
  Device device_;
  int32_t num_inputs_ = 0;
};

// A built graph and the order its builder was asked for nodes: the k-th
// Add() returned adds[k] (a new node or a twin). Capturing the same code again
// asks in the same order, which is what GraphBuilder::Follow checks.
struct Trace {
  Graph graph;
  std::vector<NodeId> adds;
};

class GraphBuilder {
 public:
  explicit GraphBuilder(Device device = Device::cpu()) { graph_.device_ = device; }

  // Adds `node` (or finds its twin). Inputs must already be in the graph.
  NodeId Add(Node node);
  const Node& node(NodeId id) const { return following_ ? following_->graph.nodes_[id] : graph_.nodes_[id]; }
  int32_t size() const { return following_ ? followed_nodes_ : graph_.size(); }

  // Expects the nodes to come as they came in `trace` (the same code captured
  // the last time): while each Add() equals the node `trace` had at that
  // step, it is checked against it, neither hashed nor stored. The first
  // difference copies the followed part in, and building goes on as usual.
  // The builder must be empty.
  void Follow(std::shared_ptr<const Trace> trace);
  // The followed trace when the nodes added are exactly its graph's and
  // `outputs`, `store_targets` (as Build takes them) are its graph's: that
  // graph is what Build would return. Else null.
  std::shared_ptr<const Trace> Repeated(const std::vector<NodeId>& outputs,
                                        const std::vector<NodeId>& store_targets = {}) const;
  void set_device(Device device) { graph_.device_ = device; }
  Device device() const { return graph_.device_; }

  // The graph with these outputs (nodes not reachable from them are kept; the
  // pipeline's first pass removes them). `store_targets`, empty or one per
  // output, names the input node each output is written into (-1: none); a
  // target must be read by no node, so no kernel reads what another writes.
  Graph Build(std::vector<NodeId> outputs, std::vector<NodeId> store_targets = {}) const&;
  // The same, moving the nodes out (no copy); the builder is left empty.
  Graph Build(std::vector<NodeId> outputs, std::vector<NodeId> store_targets = {}) &&;
  // The same with the order the nodes were added in (for Follow).
  Trace BuildTrace(std::vector<NodeId> outputs, std::vector<NodeId> store_targets = {}) &&;

 private:
  // Checks `store_targets` against `g`'s nodes and sets its outputs.
  void Finish(std::vector<NodeId> outputs, std::vector<NodeId> store_targets, Graph* g) const;
  // Leaves follow mode: the followed nodes become the builder's own.
  void StopFollowing();
  Graph graph_;
  std::vector<NodeId> adds_;  // what each Add() returned, in order
  // Follow mode: the trace, and how many of its Add() calls and nodes the
  // Add() calls so far have matched.
  std::shared_ptr<const Trace> following_;
  int32_t followed_adds_ = 0;
  int32_t followed_nodes_ = 0;
  // Hash-consing index: node hash -> ids of the nodes with that hash. Ids,
  // not nodes, so adding a node never copies its shape and strides.
  absl::flat_hash_map<size_t, absl::InlinedVector<NodeId, 1>> index_;
};

}  // namespace fusebox::graph
