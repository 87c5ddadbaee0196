// An attention result that is only transposed and copied (nanoGPT's
// `y.transpose(1, 2).contiguous()` before the output projection) is stored
// by the attention kernel in the copy's layout: the copy kernel goes, and the
// attention node takes the copy's shape with `axes` naming the permutation
// (graph::Node::axes). Other readers of the result read it through a view.
#pragma once

#include "fusion/graph_rewrite.h"
#include "graph/graph.h"

namespace fusebox::fusion {

// Rewrites each attention node (stored in its own order) with a copy that
// reads it as a permutation keeping E last; the first such copy wins. Returns
// the graph unchanged when none applies.
GraphRewrite StoreAttentionInConsumerLayout(const graph::Graph& g);

}  // namespace fusebox::fusion
