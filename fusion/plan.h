// fusion::Plan: what the backends compile and the runtime executes. Kernels
// run in order; each reads graph inputs (and, later, buffers of earlier
// kernels) and stores its outputs into fresh contiguous buffers.
#pragma once

#include <string>
#include <vector>

#include "fusion/dynamic_shapes.h"
#include "fusion/input_values.h"
#include "graph/graph.h"

namespace fusebox::fusion {

enum class KernelKind {
  kPointwise,   // poi_: one element per iteration
  kReduction,   // red_: one row per iteration, looping over the row per reduction
  kPersistent,  // per_: like kReduction, with the row held on chip between passes
  kExtern,      // extern_: one library call (a matmul's vendor GEMM), not generated code
};

struct KernelGroup {
  std::string name;                   // "poi_fused_add_mul_pow_tanh_0" (name_kernels.h)
  KernelKind kind = KernelKind::kPointwise;
  // Pointwise: the stored shape, one element per iteration. Reductions: the
  // shape being reduced; `axes` are its reduced dims (a row is one position
  // of the other dims, its elements the positions of the reduced dims).
  Shape iteration_shape;
  std::vector<int64_t> axes;
  std::vector<graph::NodeId> reductions;    // reductions computed here, in dependency order
  std::vector<graph::NodeId> outputs;       // stored values, in order: either of
                                            // iteration_shape or (reductions) one per row
  std::vector<graph::NodeId> buffer_inputs; // values stored by earlier kernels, loaded here
  std::vector<graph::NodeId> nodes;         // every compute node the kernel evaluates, topological
};

struct Plan {
  graph::Graph graph;
  std::vector<KernelGroup> kernels;
  // Why values were not fused into one kernel (explain() shows these).
  std::vector<std::string> notes;
  // What the graph passes rewrote, or found and left as written (explain()).
  std::vector<std::string> graph_notes;
  // Dynamic shapes: the graph's run-time sizes (empty when every size is
  // compiled in), and whether index math must be 64-bit for every size the
  // plan serves (fixed per plan-cache key, see dynamic_shapes.h).
  DimSymbols symbols;
  bool index64 = false;
  // The graph inputs whose values the plan assumed, and the memory they were
  // read from: it runs only while each is the same (input_values.h).
  std::vector<ValueGuard> value_guards;
  bool dynamic() const { return !symbols.empty(); }
  std::string ToString() const;
};

// The reduced shape of a reduction group: iteration_shape with axes set to 1.
Shape RowShape(const KernelGroup& group);

// Whether a reduction over `axes` of `shape` keeps its row on chip (per_):
// the reduced dims include the innermost one (rows are contiguous runs) and a
// row is at most kPersistentRowLimit elements. The CUDA printer spreads such a
// row over up to 1024 threads so each holds at most 16 values per cached
// input (backend/cuda/row_layout.h; with 256 threads and 32 values, the H200
// ran softmax over 8192-element rows slower than the looped kernel).
inline constexpr int64_t kPersistentRowLimit = 16384;
bool KeepsRowOnChip(const Shape& shape, const std::vector<int64_t>& axes);

// Whether a matmul (extern) kernel can read operand `id` where it lies: a
// contiguous graph input, a value an earlier kernel stores, or a view of one
// of those whose two matrix dims are a (possibly transposed) dense layout
// (the GEMM's layout flags; the batch dim may have any stride, 0 broadcasts).
bool MatmulOperandReady(const graph::Graph& g, graph::NodeId id);
// Whether attention node `consumer` can read operand `id` where it lies: a
// graph input, a stored value or a view of one (as a matmul's), q, k and v
// unit-stride along E (every other stride, 0 too, is read as it is); the mask
// with any strides. A view of a strided input is read through the input's
// strides where the two compose (ComposeReads), as the extern run does.
bool AttentionOperandReady(const graph::Graph& g, graph::NodeId consumer, graph::NodeId id);
// MatmulOperandReady or AttentionOperandReady, by the consumer's op.
bool ExternOperandReady(const graph::Graph& g, graph::NodeId consumer, graph::NodeId id);
// The node a matmul operand reads memory of: `id` itself, or a view's base.
graph::NodeId MatmulOperandBase(const graph::Graph& g, graph::NodeId id);
// Row and column strides of a matrix view that BLAS can take as is.
bool DenseMatrixStrides(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride);
// What the plan hands a GEMM without a copy: a dense matrix with no broadcast
// dim (stride 0 over several elements), which cuBLASLt cannot read even as a
// single row or column (it needs a leading dimension); OpenBLAS would pack it.
bool GemmReadsInPlace(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride);

// The kernel-name prefix of a kind: "poi".
const char* KindPrefix(KernelKind kind);

}  // namespace fusebox::fusion
