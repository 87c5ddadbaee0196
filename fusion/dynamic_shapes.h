// Dynamic shapes, like Inductor's automatic dynamic: dims of graph inputs
// marked dynamic become run-time sizes ("symbols"), so one compiled plan
// serves every size they take. A symbol reaches every dim of the graph that
// must have its size (pointwise operands, views that keep the dim, the rows
// of a reduction, a GEMM's rows and columns, an attention's sequences: the
// library calls read their sizes from the graph resized to the call's);
// equal dynamic sizes share one symbol (duck sizing, so
// `x + y` of two dynamic inputs stays legal). A symbol stays static when the
// graph pins its size: a reduction over it, a view that reshapes it, an
// operand of fixed size it meets, a GEMM's reduced dim, batch dims of a
// library call, a head dim, or a size of 0 or 1 (broadcasting and empty
// tensors need the value). A reshape that merges a run-time dim with fixed
// ones makes a dim of a multiple of its size (`linear`'s [B, T, C] as
// [B * T, C]: 2 T at B = 2), and one that splits such a dim gives the
// symbol back; merging two run-time dims pins both.
//
// The plan-cache key of a graph with symbols is the graph with each symbolic
// size written as -1 - symbol, contiguous inputs' strides left out (they
// follow from the sizes), a view's stride that follows a symbolic size (the
// heads' transpose of [B, T, C] steps T * C along B) written as a marker,
// and size-1 view dims' strides (never stepped) as 0: graphs that differ
// only in symbolic sizes share a key and a plan. Resize recomputes those
// strides. The backend then keeps those sizes out of the kernels' text
// (kernel arguments: the element or row count, and the sizes the index math
// divides or multiplies by); the runtime checks that by lowering the graph
// again at other sizes (Resize) and comparing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "graph/graph.h"

namespace fusebox::fusion {

struct InputDim {
  int32_t input = 0;  // the graph input's input_index
  int32_t dim = 0;
  friend bool operator==(const InputDim&, const InputDim&) = default;
  friend auto operator<=>(const InputDim&, const InputDim&) = default;
};

struct DimSymbols {
  // Symbol k's size is the size of each of these input dims (all equal).
  std::vector<std::vector<InputDim>> sources;
  // Per node, per dim: the symbol its size is, or -1 (a fixed size).
  std::vector<absl::InlinedVector<int32_t, 4>> of_node;
  // Per node, per dim: the size is factor times the symbol's (a reshape that
  // merges a run-time dim with fixed ones: [B, T, C] viewed as [B * T, C]).
  std::vector<absl::InlinedVector<int64_t, 4>> factor_of_node;
  // Per input dim marked dynamic that stays static: which node fixes its
  // size and why ("input 0 dim 1 (size 8) stays static: node 12 (sum [8, 1]):
  // a reduction's row length").
  std::vector<std::string> kept_static;

  bool empty() const { return sources.empty(); }
  int32_t num_symbols() const { return static_cast<int32_t>(sources.size()); }
  int32_t symbol(graph::NodeId node, int64_t dim) const { return empty() ? -1 : of_node[node][dim]; }
  // The size's factor over its symbol's (1 without one).
  int64_t factor(graph::NodeId node, int64_t dim) const { return empty() ? 1 : factor_of_node[node][dim]; }
  // The symbols' sizes in `g` (the graph these symbols were found in).
  std::vector<int64_t> Values(const graph::Graph& g) const;
};

// Which dims of `g` are run-time sizes when the `dynamic` input dims are.
DimSymbols FindDimSymbols(const graph::Graph& g, absl::Span<const InputDim> dynamic);

// The plan-cache key of `g` under `symbols` (see above).
graph::Graph SymbolicKey(const graph::Graph& g, const DimSymbols& symbols);

// `g` with symbol k's dims of size values[k] (contiguous inputs and the views
// whose strides follow the sizes restrided).
graph::Graph Resize(const graph::Graph& g, const DimSymbols& symbols, absl::Span<const int64_t> values);

// Whether some index into a value of `g` may pass 2^31 - 2^16 (int32 index
// math with a block of headroom): decided once per key, since the kernels of
// a dynamic plan cannot decide it from sizes they no longer know.
bool NeedsIndex64(const graph::Graph& g);

// "s0 = input 0 dim 0 (= input 1 dim 0)", one symbol per entry.
std::vector<std::string> DescribeSymbols(const DimSymbols& symbols);

}  // namespace fusebox::fusion
