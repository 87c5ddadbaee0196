#include "fusion/compose_views.h"

namespace fusebox::fusion {

using graph::Node;
using graph::Op;

bool ComposeWithBase(const graph::Graph& g, ViewOf* outer) {
  const Node& view = g.node(outer->base);
  StridedRead read{.shape = outer->shape, .strides = outer->strides, .offset = outer->offset};
  if (!ComposeReads({.shape = view.shape, .strides = view.strides, .offset = view.offset}, &read)) return false;
  *outer = ViewOf{.base = view.inputs[0], .shape = std::move(read.shape), .strides = std::move(read.strides),
                  .offset = read.offset};
  return true;
}

ViewOf ThroughViewsAndCopies(const graph::Graph& g, ViewOf view) {
  while (true) {
    const Node& base = g.node(view.base);
    if (base.op == Op::kCopy) {
      view.base = base.inputs[0];
    } else if (base.op != Op::kView || !ComposeWithBase(g, &view)) {
      return view;
    }
  }
}

}  // namespace fusebox::fusion
