// How a view's dims relate to its input's (a view reads its input's
// contiguous value): the input dim a view dim keeps, the runs of dims a
// reshape merges or splits, the dims that split an input dim by strides.
// Pure functions of the two nodes; dynamic_shapes.cc resolves run-time
// sizes through them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "graph/graph.h"

namespace fusebox::fusion {

// The dim of view input `in` that view dim `e` walks unchanged: same size and
// the stride that dim has in the input's contiguous value. -1 if none (the
// view reshapes, slices or broadcasts there).
int64_t KeptInputDim(const graph::Node& view, int64_t e, const graph::Node& in);

// A view that reshapes its input's contiguous value (contiguous strides, no
// offset, the same elements): its dims and the input's, size-1 dims left
// out, in runs of equal product. A run of one dim each keeps the dim; one
// input dim into several splits it; several into one merge.
struct ReshapeGroup {
  std::vector<int64_t> in, out;
};
std::optional<std::vector<ReshapeGroup>> ReshapeGroups(const graph::Node& view, const graph::Node& in);

// The dims of view `view` that step through input dim d of `in` (of size
// >= 2) in several parts, as a strided view splits it: [B * T, 3 C] read as
// heads [B, nh, T, hs] steps T * 3 C along B and 3 C along T, the two
// tiling dim 0 exactly (in any order of the view's dims). Ordered from the
// innermost step; empty where they do not tile it.
std::vector<int64_t> StridedSplit(const graph::Node& view, const graph::Node& in, size_t d);

}  // namespace fusebox::fusion
