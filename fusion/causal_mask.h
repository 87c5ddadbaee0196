// Whether a mask computed in the graph from constants and positions (tril(ones(T,
// T)) == 0, triu(ones, 1) != 0, arange compares, sliced [:T, :T]), or from a
// graph input whose values the plan may assume (nanoGPT's `bias` buffer ==
// 0, a mask passed in; input_values.h), is the causal one or keeps every key,
// found by evaluating it on the host: attention then runs the causal or the
// unmasked kernel and reads no mask, whatever spelling built it.
#pragma once

#include <string>

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "fusion/input_values.h"
#include "graph/graph.h"

namespace fusebox::fusion {

// What a [batch..., L, S] `mask` keeps: exactly the top-left triangle (key j
// of query i where j <= i, PyTorch's is_causal), every key, or something
// else. A bool mask: `keeps` says whether true keeps a key (where's
// condition, SDPA's bool mask) or drops it (masked_fill's). A float mask is
// additive: 0 keeps, -inf drops, any other value is a bias (something else).
// Judged only where the mask reads nothing but positions, the constants -1,
// 0, 1 and +-inf and inputs whose
// `values` (may be null: none) are known, and is the same for every batch
// index; L * S above 2^22 elements is not evaluated (kOther).
// Each layer of a model builds the same mask again: with `memo`, a mask
// whose subgraph (ops, shapes, views, constants, input contents) was judged
// before is not evaluated again (GPT-2 small's f32 SDPA decomposition took
// 3.7 s of its first call evaluating twelve [1024, 1024] masks element by
// element). `read` (may be null) gets the inputs whose values the answer
// came from, whatever it is: what a plan that uses it assumes (ValueGuard).
enum class MaskKind { kOther, kCausal, kAll };
using CausalMaskMemo = absl::flat_hash_map<std::string, MaskKind>;
MaskKind JudgeMask(const graph::Graph& g, graph::NodeId mask, bool keeps, CausalMaskMemo* memo = nullptr,
                   InputValues* values = nullptr, std::vector<int32_t>* read = nullptr);

}  // namespace fusebox::fusion
