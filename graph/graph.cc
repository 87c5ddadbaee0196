#include "graph/graph.h"

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
  if (auto it = index_.find(node); it != index_.end()) return it->second;
  const NodeId id = size();
  if (node.op == Op::kInput) ++graph_.num_inputs_;
  index_.emplace(node, id);
  graph_.nodes_.push_back(std::move(node));
  return id;
}

Graph GraphBuilder::Build(std::vector<NodeId> outputs) const {
  Graph g = graph_;
  g.outputs_ = std::move(outputs);
  return g;
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
  for (NodeId o : outputs_) outs.push_back(absl::StrCat("%", o));
  absl::StrAppend(&out, "  return ", absl::StrJoin(outs, ", "), "  (", device_.str(), ")\n");
  return out;
}

}  // namespace fusebox::graph
