#include "fusion/compose_views.h"

namespace fusebox::fusion {

using graph::Node;
using graph::Op;

bool ComposeWithBase(const graph::Graph& g, ViewOf* outer) {
  const Node& view = g.node(outer->base);
  const Shape& in = view.shape;
  const Strides rowmajor = ContiguousStrides(in);
  // Outer's first position along each of the view's dims, then its last.
  Shape first(in.size(), 0);
  int64_t rest = outer->offset;
  for (size_t j = 0; j < in.size(); ++j) {
    if (in[j] == 0) return false;
    first[j] = rest / rowmajor[j], rest %= rowmajor[j];
  }
  Shape last = first;
  ViewOf out{.base = view.inputs[0], .shape = outer->shape, .strides = Strides(outer->shape.size(), 0),
             .offset = view.offset};
  for (size_t j = 0; j < in.size(); ++j) out.offset += first[j] * view.strides[j];
  for (size_t d = 0; d < outer->shape.size(); ++d) {
    if (outer->shape[d] == 1 || outer->strides[d] == 0) continue;
    if (outer->strides[d] < 0) return false;
    // The outermost dim whose row-major stride divides the step takes it.
    size_t j = 0;
    while (j < in.size() && (in[j] == 1 || outer->strides[d] % rowmajor[j] != 0)) ++j;
    if (j == in.size()) return false;
    const int64_t step = outer->strides[d] / rowmajor[j];
    last[j] += (outer->shape[d] - 1) * step;
    out.strides[d] = step * view.strides[j];
  }
  for (size_t j = 0; j < in.size(); ++j) {
    if (last[j] >= in[j]) return false;
  }
  *outer = std::move(out);
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
