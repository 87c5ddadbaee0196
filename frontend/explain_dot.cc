#include "frontend/explain_dot.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "frontend/numerics_check.h"

namespace fusebox::frontend {
namespace {

using graph::Node;
using graph::NodeId;

// A DOT string literal of `lines` (one label line each), quotes and
// backslashes escaped.
std::string Quote(const std::vector<std::string>& lines) {
  std::vector<std::string> escaped;
  for (const std::string& line : lines) {
    std::string e;
    for (char c : line) {
      if (c == '"' || c == '\\') e += '\\';
      e += c;
    }
    escaped.push_back(std::move(e));
  }
  return absl::StrCat("\"", absl::StrJoin(escaped, "\\n"), "\"");
}

std::string NodeName(size_t g, NodeId id) { return absl::StrCat("g", g, "_n", id); }

// One node: stored values (what a kernel writes to memory) drawn bold.
std::string NodeLine(size_t g, const Node& n, NodeId id, int kernels, bool stored) {
  std::string what(graph::OpName(n.op));
  if (n.op == graph::Op::kInput) absl::StrAppend(&what, " ", n.input_index);
  if (n.op == graph::Op::kConstant) absl::StrAppend(&what, " ", absl::StrFormat("%.9g", n.scalar));
  std::vector<std::string> label = {absl::StrCat("%", id, " ", what), absl::StrCat(DTypeName(n.dtype), ShapeToString(n.shape))};
  if (kernels > 1) label.push_back(absl::StrCat("(recomputed in ", kernels, " kernels)"));
  const char* shape = n.op == graph::Op::kInput ? "ellipse" : n.op == graph::Op::kConstant ? "plaintext" : "box";
  return absl::StrCat("    ", NodeName(g, id), " [label=", Quote(label), ", shape=", shape,
                      n.op == graph::Op::kView ? ", style=dashed" : "", stored ? ", penwidth=2" : "", "];\n");
}

// Graph `g` as a cluster of kernel clusters.
std::string GraphCluster(size_t g, const GraphRecord& r) {
  const fusion::Plan& plan = r.executable->plan();
  const graph::Graph& graph = plan.graph;
  // Which kernel a node is drawn in: the first that stores it, else the only
  // one that computes it; a value inlined into several kernels stays outside.
  absl::flat_hash_map<NodeId, int> owner, uses;
  absl::flat_hash_set<NodeId> stored;
  for (const fusion::KernelGroup& k : plan.kernels) {
    for (NodeId id : k.nodes) ++uses[id];
  }
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    for (NodeId id : plan.kernels[k].outputs) {
      owner.emplace(id, static_cast<int>(k));
      stored.insert(id);
    }
  }
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    for (NodeId id : plan.kernels[k].nodes) {
      if (uses[id] == 1) owner.emplace(id, static_cast<int>(k));
    }
  }
  std::vector<std::string> label = {absl::StrCat("graph ", g, r.from_cache ? " (plan from cache)" : "")};
  std::string out = absl::StrCat("  subgraph cluster_g", g, " {\n    label=", Quote(label), ";\n    style=rounded;\n");
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const fusion::KernelGroup& kernel = plan.kernels[k];
    const KernelNumerics* numerics = k < r.numerics.size() ? &r.numerics[k] : nullptr;
    absl::StrAppend(&out, "    subgraph cluster_g", g, "_k", k, " {\n      label=", Quote({kernel.name}),
                    ";\n      style=filled;\n      fillcolor=", numerics && numerics->flagged ? "\"#f8d0d0\"" : "\"#e8eefc\"",
                    ";\n");
    if (numerics) absl::StrAppend(&out, "      tooltip=", Quote({DescribeNumerics(*numerics)}), ";\n");
    for (NodeId id = 0; id < graph.size(); ++id) {
      auto it = owner.find(id);
      if (it != owner.end() && it->second == static_cast<int>(k)) {
        absl::StrAppend(&out, "  ", NodeLine(g, graph.node(id), id, uses[id], stored.contains(id)));
      }
    }
    absl::StrAppend(&out, "    }\n");
  }
  for (NodeId id = 0; id < graph.size(); ++id) {
    if (!owner.contains(id)) absl::StrAppend(&out, NodeLine(g, graph.node(id), id, uses[id], stored.contains(id)));
  }
  for (NodeId id = 0; id < graph.size(); ++id) {
    for (NodeId in : graph.node(id).inputs) absl::StrAppend(&out, "    ", NodeName(g, in), " -> ", NodeName(g, id), ";\n");
  }
  absl::StrAppend(&out, "  }\n");
  return out;
}

}  // namespace

std::string RenderDot(const std::vector<GraphRecord>& graphs, const std::vector<EmptyBreakRecord>& empty_breaks) {
  std::string out = "digraph fusebox {\n  compound=true;\n  node [fontname=\"monospace\", fontsize=10];\n";
  // The call in order, graphs and breaks, each linked to the next by a red
  // edge; an edge at a graph is clipped to its cluster (ltail / lhead).
  std::string previous, previous_cluster;  // the node the last item ends at, and its cluster
  auto link = [&](const std::string& node, const std::string& cluster) {
    if (!previous.empty()) {
      absl::StrAppend(&out, "  ", previous, " -> ", node, " [color=red, style=dashed",
                      previous_cluster.empty() ? "" : absl::StrCat(", ltail=", previous_cluster),
                      cluster.empty() ? "" : absl::StrCat(", lhead=", cluster), "];\n");
    }
  };
  int breaks = 0;
  auto add_break = [&](const std::string& reason, const std::source_location& loc, bool empty) {
    const std::string name = absl::StrCat("break", breaks++);
    absl::StrAppend(&out, "  ", name, " [shape=octagon, style=filled, fillcolor=\"#f8d0d0\", color=red, label=",
                    Quote({empty ? "graph break (no ops captured before it)" : "graph break", reason,
                           absl::StrCat("at ", SourceLine(loc))}),
                    "];\n");
    link(name, "");
    previous = name;
    previous_cluster.clear();
  };
  for (size_t g = 0; g <= graphs.size(); ++g) {
    for (const EmptyBreakRecord& b : empty_breaks) {
      if (b.graphs_before == g) add_break(b.reason, b.location, /*empty=*/true);
    }
    if (g == graphs.size()) break;
    absl::StrAppend(&out, GraphCluster(g, graphs[g]));
    const std::string cluster = absl::StrCat("cluster_g", g);
    link(NodeName(g, 0), cluster);
    previous = NodeName(g, graphs[g].executable->plan().graph.size() - 1);
    previous_cluster = cluster;
    if (graphs[g].end_reason != kEndOfFunction) add_break(graphs[g].end_reason, graphs[g].location, /*empty=*/false);
  }
  absl::StrAppend(&out, "}\n");
  return out;
}

}  // namespace fusebox::frontend
