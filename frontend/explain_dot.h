// explain() as a Graphviz digraph, rendered from the same records: one
// cluster per graph of the last call holding its nodes (op, dtype, shape),
// each fused kernel a nested cluster labelled with the kernel's name, and
// each graph break a red node (reason, source line) between the graphs it
// separates. A picture answers "why are these two ops in different kernels?"
// faster than the text does.
#pragma once

#include <string>
#include <vector>

#include "frontend/graph_record.h"

namespace fusebox::frontend {

std::string RenderDot(const std::vector<GraphRecord>& graphs, const std::vector<EmptyBreakRecord>& empty_breaks);

}  // namespace fusebox::frontend
