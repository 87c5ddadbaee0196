// A view of a view is one view where no index carries from one dim into the
// next: recognition passes use it to read an operand where it lies (through
// matmul's batch folding, nanoGPT's head transposes and .contiguous()
// copies) instead of storing it again.
#pragma once

#include "graph/graph.h"

namespace fusebox::fusion {

// A value read as positions `offset + sum(p * strides)` of `base`'s
// row-major value (what a view node's attributes mean).
struct ViewOf {
  graph::NodeId base;
  Shape shape;
  Strides strides;
  int64_t offset = 0;
};

// `outer`, whose base is a view node, as one read of that view's input; or
// false (outer unchanged) where a step along one of outer's dims would carry
// across a dim of the view.
bool ComposeWithBase(const graph::Graph& g, ViewOf* outer);

// `view` read through every view (composed) and copy (the same values) under
// it, down to the value it finally reads.
ViewOf ThroughViewsAndCopies(const graph::Graph& g, ViewOf view);

}  // namespace fusebox::fusion
