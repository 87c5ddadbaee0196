// Whether a mask computed in the graph from constants and positions (tril(ones(T,
// T)) == 0, triu(ones, 1) != 0, arange compares, sliced [:T, :T]), or from a
// graph input whose values the plan may assume (nanoGPT's `bias` buffer ==
// 0, input_values.h), is the causal one, found by evaluating it on the host:
// attention then runs the causal kernel and reads no mask, whatever spelling
// built it.
#pragma once

#include <string>

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "fusion/input_values.h"
#include "graph/graph.h"

namespace fusebox::fusion {

// `mask` is a bool [batch..., L, S] value; `keeps` says whether true keeps a
// key (where's condition) or drops it (masked_fill's). True when the mask
// reads only positions, the constants -1, 0 and 1 and inputs whose `values`
// (may be null: none) are known, is
// the same for every batch index, and keeps key j of query i exactly where
// j <= i (PyTorch's is_causal: the top-left triangle). L * S above 2^22
// elements is not evaluated (false).
// Each layer of a model builds the same mask again: with `memo`, a mask
// whose subgraph (ops, shapes, views, constants) was judged before is not
// evaluated again (GPT-2 small's f32 SDPA decomposition took 3.7 s of its
// first call evaluating twelve [1024, 1024] masks element by element).
using CausalMaskMemo = absl::flat_hash_map<std::string, bool>;
// `read` (may be null) gets the inputs whose values the answer came from,
// causal or not: what a plan that uses it assumes (ValueGuard).
bool IsCausalMask(const graph::Graph& g, graph::NodeId mask, bool keeps, CausalMaskMemo* memo = nullptr,
                  InputValues* values = nullptr, std::vector<int32_t>* read = nullptr);

}  // namespace fusebox::fusion
