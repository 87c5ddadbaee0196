// The ops after a matmul that its vendor GEMM runs in its epilogue: + a bias
// row vector, then a tanh-gelu or + a residual (the GEMM's C, beta = 1), each
// the only use of the value before it, through views that only reshape it.
// The fuser decides how far a chain goes (EpilogueChain) and the extern
// kernel's runner reads it back (ChainOf) by the same walk, so they agree.
#pragma once

#include "absl/functional/function_ref.h"
#include "fusion/plan.h"
#include "graph/graph.h"

namespace fusebox::fusion {

struct GemmChain {
  graph::NodeId matmul = -1;
  graph::NodeId bias = -1;      // the bias input, added to every row, or -1
  graph::NodeId residual = -1;  // the value added whole (C with beta = 1), or -1
  bool gelu = false;            // a tanh-gelu after the bias
  graph::NodeId end = -1;       // what the kernel stores: the last node taken (never a view)
};

// The longest chain after matmul `mm` its GEMM can compute (only the matmul
// unless epilogue fusion was asked for on its node). A residual is a value
// of the stored shape and dtype that is in memory, densely, before the GEMM
// runs: a contiguous graph input, or a value for which `stored_before` holds.
GemmChain EpilogueChain(const graph::Graph& g, graph::NodeId mm,
                        absl::FunctionRef<bool(graph::NodeId)> stored_before);

// The chain an extern kernel of the plan computes: from its matmul to the
// value it stores (outputs[0]).
GemmChain ChainOf(const graph::Graph& g, const KernelGroup& k);

// A view that reads all of its base in order as another shape (a reshape of
// the base's contiguous value): what the stored value can be viewed as.
bool IsReshapeView(const graph::Node& view, const graph::Node& base);

}  // namespace fusebox::fusion
