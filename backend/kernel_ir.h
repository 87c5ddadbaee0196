// The kernel IR: one fused kernel as a straight-line SSA body executed once
// per element of a flat iteration space (index `i`). Lowering (lower.h) builds
// it from a plan's kernel group; each target's printer turns it into source.
// Temporaries are numbered t0, t1, ... in topological order, so the generated
// text is deterministic.
#pragma once

#include <string>
#include <vector>

#include "backend/index_expr.h"
#include "fusion/plan.h"
#include "graph/graph.h"

namespace fusebox::backend {

struct BufferParam {
  std::string name;  // "in0", "out0"
  DType dtype;       // element type in memory
  bool is_output = false;
  graph::NodeId node = -1;  // the graph node bound to it (input or stored value)
};

// kIndexCheck and kInRange are the data-movement ops' (gather, cat): an index
// read from a tensor is checked and clamped before it addresses a load, and a
// load under a mask reads only where the mask holds. kPosition is iota's
// value: an index expression as an int64 value, no load.
enum class StmtKind { kLoad, kConstant, kCompute, kStore, kIndexCheck, kInRange, kPosition };

struct Stmt {
  StmtKind kind;
  int result = -1;         // temporary defined (load, constant, compute)
  DType dtype;             // dtype of the value (its compute type follows)
  graph::Op op = graph::Op::kCopy;  // kCompute
  std::vector<int> args;   // kCompute: argument temporaries; kStore: {value}
  int buffer = -1;         // kLoad / kStore: index into Kernel::buffers
  IndexExpr index;         // kLoad / kStore: element index into the buffer;
                           // kPosition: the value (int64 t = index)
  double constant = 0;     // kConstant
  int cache_slot = -1;     // rows held on chip: the load reads this register slot
  // kLoad, kIndexCheck: the bool temporary guarding it (-1: none); a masked
  // load reads nothing where the mask is false and gives 0.
  int mask = -1;
  // kIndexCheck: int64 t = args[0] (an integer temporary) when 0 <= it < hi;
  // otherwise the kernel records it (with hi, `op` and `dim`) in the error
  // flag `fb_err` and t = 0, so no load reads out of bounds.
  // kInRange: bool t = lo <= index < hi (&& args[0], an outer mask, if any).
  int64_t lo = 0, hi = 0;
  int64_t dim = 0;         // kIndexCheck: the dim the op indexes, for the error

  bool is_access() const { return kind == StmtKind::kLoad || kind == StmtKind::kStore; }
  // Whether the statement is a data-movement one: a check, a range, a
  // masked load or a load at an index read from a tensor.
  bool is_data_dependent() const {
    return kind == StmtKind::kIndexCheck || kind == StmtKind::kInRange || mask >= 0 ||
           (is_access() && index.HasTemp());
  }
};

// Persistent reductions: a value loaded once per row element into registers
// before the first pass, then read by every pass from there.
struct CachedLoad {
  int buffer;
  IndexExpr index;  // over r and j, as in the passes
  DType dtype;
  // A gathered row (an embedding's): the statements, computed once per row,
  // that define the temporaries `index` reads (the token id and its check),
  // copied from the first block that loads it. A preload before the passes
  // prints them first, in a scope of its own.
  std::vector<Stmt> index_defs;
};

// A running fold: `temp` starts at the op's identity and takes in `value`
// (a temporary of the pass body) once per element of the row.
struct Accumulator {
  int temp = -1;
  graph::Op op;
  DType dtype;
  int value = -1;
  int index_temp = -1;  // argmax/argmin: the winning position (int64); `temp`
                        // then holds the winning value, of `dtype`
  // An online sum (online_exp_sums.h): `temp` is sum(exp(value - M)) over
  // the row, M the max accumulator `online_max` of the same pass (whose
  // value is `value` too), folded as one running pair with it.
  int online_max = -1;
};

// A float sum or product: each fold rounds, so a serial chain's error grows
// with its length (a float sum stalls at 2^24 ones). Printers keep such
// chains short on long rows (cpu/cascade_pass.h; CUDA column chunks).
inline bool RoundsEachFold(const Accumulator& a) {
  return a.index_temp < 0 && a.online_max < 0 && (a.op == graph::Op::kSum || a.op == graph::Op::kProd) && IsFloating(a.dtype);
}

// One loop over a row (index `j`), folding into its accumulators.
struct Pass {
  std::vector<Stmt> body;
  std::vector<Accumulator> accumulators;
};

// Reductions: where the reduced dims lie in the iteration shape, the fact
// that decides which walk over memory is contiguous.
enum class ReductionAxis {
  kInner,  // the reduced dims are the innermost (non-trivial) ones: a row's
           // elements are adjacent in memory
  kOuter,  // they are not (sum(x, 0)): a row strides through memory, and
           // neighbouring rows are adjacent
};
const char* ReductionAxisName(ReductionAxis axis);

// Outer reductions over at least this many rows (or a run-time count) are
// column reductions: enough rows to walk side by side, neighbouring rows at
// neighbouring addresses (on CUDA a thread per row, cuda/row_spread.h);
// fewer are walked one row at a time, as inner rows are.
inline constexpr int64_t kColumnReductionMinRows = 32;

struct Kernel {
  std::string name;
  fusion::KernelKind kind = fusion::KernelKind::kPointwise;
  int64_t numel = 0;        // pointwise: iterations (index `i`); reductions: rows * row_length
  bool index64 = false;     // some index may exceed 2^31-1
  std::vector<BufferParam> buffers;  // inputs first, then outputs
  std::vector<Stmt> body;   // pointwise: once per element
  // Reductions, once per row `r`: each pass in order (accumulators then hold
  // the row's results), then `elementwise` over j (stores of full-shape
  // values), then `row_body` (stores of one value per row).
  int64_t num_rows = 0, row_length = 0;
  ReductionAxis axis = ReductionAxis::kInner;
  // Persistent kernels, looped ones whose rows end in the innermost dim
  // (which a CUDA cluster may hold on chip: cuda/cuda_cluster.h), and column
  // reductions (is_column_reduction; cuda/outer_reduction.h).
  std::vector<CachedLoad> cached_loads;
  // CUDA: the target's compute capability (90 for sm_90), set where the
  // kernel is compiled for a device; 0 (lowered alone, as in tests): sm_90.
  // Layouts that depend on the device's limits (shared memory) read it.
  int cuda_arch = 0;
  // CUDA: the device's SM count, where compiled for one; 0: the reference
  // device's (CudaSmCount, cuda/cuda_cluster.h). Layouts that fill the device read it.
  int cuda_sm_count = 0;
  // Dynamic shapes: the iteration count (numel, or num_rows for reductions)
  // is the kernel argument `fb_n`, computed at launch as `extent_factor`
  // times the run-time sizes of `extent_symbols` (fusion::DimSymbols).
  bool dynamic_extent = false;
  int64_t extent_factor = 1;
  std::vector<int32_t> extent_symbols;
  // Dynamic plans: the symbols whose run-time sizes the index math names (an
  // inner dim of run-time size divided by, a stride that holds one: nanoGPT's
  // `bias[:T, :T]`, ids [B, T] read at b * T + t), the kernel arguments
  // SizeArgName(k) after fb_n (LoweringCore::Finish collects them).
  std::vector<int32_t> size_args;
  std::vector<Pass> passes;
  std::vector<Stmt> elementwise;
  std::vector<Stmt> row_body;
  int num_temps = 0;
  // Some kIndexCheck: the kernel takes the error flag `fb_err` after its
  // buffers (int64[4]: set, bad index, size, op << 8 | dim; FirstBadIndex).
  bool checks_indices = false;

  bool is_reduction() const { return kind != fusion::KernelKind::kPointwise; }
  // See kColumnReductionMinRows.
  bool is_column_reduction() const {
    return is_reduction() && axis == ReductionAxis::kOuter && (dynamic_extent || num_rows >= kColumnReductionMinRows);
  }
  // Reductions: the loops over a row in order, each pass's body and then
  // `elementwise` (loop passes.size()).
  size_t NumRowLoops() const { return passes.size() + 1; }
  const std::vector<Stmt>& RowLoop(size_t loop) const { return loop < passes.size() ? passes[loop].body : elementwise; }
  std::vector<Stmt>& RowLoop(size_t loop) { return loop < passes.size() ? passes[loop].body : elementwise; }
  // Iterations of this launch: numel / num_rows, or from the symbols' sizes.
  int64_t Iterations(const std::vector<int64_t>& symbol_values) const;

  std::string ToString() const;  // readable IR dump
};

}  // namespace fusebox::backend
