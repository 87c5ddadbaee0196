// Attention written by hand, as users write it (softmax(masked_fill(q @ k^T
// * scale, mask, -inf)) @ v), becomes the attention node that
// scaled_dot_product_attention records, so it runs as the same fused kernel
// (flash attention on CUDA, its CPU twin on the host) instead of two GEMMs, a
// softmax kernel and copies. Only where that node computes the same thing and
// the fused kernel takes the problem; elsewhere the graph is left as it was
// (and the note says why).
#pragma once


#include "fusion/graph_rewrite.h"
#include "fusion/input_values.h"
#include "graph/graph.h"

namespace fusebox::fusion {

// Rewrites each `matmul(softmax(scores, -1), v)` whose scores are `matmul(q,
// k^T)` (k^T any view of k over its last two dims), times or divided by a
// constant, then optionally masked (`where(m, -inf, s)` as masked_fill,
// `where(m, s, -inf)`, or `s + float_mask`), when the scores and
// probabilities feed nothing else. A bool mask built from positions and
// constants, or from inputs whose `values` are given (may be null), that is
// causal becomes is_causal and one that keeps every key is dropped (no mask
// read), here and on scaled_dot_product_attention's own nodes; the
// rewrite's value_inputs name the inputs those decisions read. Returns the
// graph unchanged when nothing applies.
GraphRewrite RecognizeAttention(const graph::Graph& g, InputValues* values = nullptr);

}  // namespace fusebox::fusion
