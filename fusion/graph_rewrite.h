// What a graph pass that rewrites patterns returns: the graph, and one line
// per pattern it found, rewritten or why not (explain() shows these, through
// Plan::graph_notes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace fusebox::fusion {

struct GraphRewrite {
  graph::Graph graph;
  std::vector<std::string> notes;
  std::vector<int32_t> value_inputs;  // graph inputs whose values the rewrite assumed (input_values.h)
};

}  // namespace fusebox::fusion
