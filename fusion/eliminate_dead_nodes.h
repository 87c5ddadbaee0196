// Removes nodes no output depends on. Capture records every op the user ran,
// including values that were later dropped; this keeps them out of kernels,
// names and dumps. Returns the input unchanged when every node is live.
#pragma once

#include "graph/graph.h"

namespace fusebox::fusion {

graph::Graph EliminateDeadNodes(const graph::Graph& graph);

}  // namespace fusebox::fusion
