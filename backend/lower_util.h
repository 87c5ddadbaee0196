// Index helpers shared by the pointwise and reduction lowerings.
#pragma once

#include <climits>
#include <vector>

#include "backend/index_expr.h"
#include "backend/kernel_ir.h"
#include "backend/tuning.h"
#include "fusion/plan.h"
#include "graph/graph.h"
#include "tensor/shape.h"

namespace fusebox::backend {

// A shape with one stride vector per operand, after merging dims.
struct Layout {
  Shape shape;
  std::vector<Strides> strides;  // per operand
  // Dynamic plans: each dim's symbol (fusion::DimSymbols), or -1, and the
  // factor its size is of the symbol's; empty where the shape has none.
  std::vector<int32_t> symbols;
  std::vector<int64_t> factors;
};

// Drops size-1 dims and merges neighbours that every operand walks as one.
// A dim with a run-time size (`symbols[d] >= 0`, where given) merges with
// none: index math divides by its size alone (Unravel).
inline Layout Coalesce(const Shape& shape, const std::vector<Strides>& operands,
                       const std::vector<int32_t>& symbols = {}, const std::vector<int64_t>& factors = {}) {
  Layout out;
  out.strides.resize(operands.size());
  auto symbol = [&](size_t d) { return symbols.empty() ? -1 : symbols[d]; };
  bool any_symbol = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !out.shape.empty() && symbol(d) < 0 && (out.symbols.empty() || out.symbols.back() < 0);
    for (size_t k = 0; merge && k < operands.size(); ++k) {
      merge = out.strides[k].back() == operands[k][d] * shape[d];
    }
    if (merge) {
      out.shape.back() *= shape[d];
      for (size_t k = 0; k < operands.size(); ++k) out.strides[k].back() = operands[k][d];
    } else {
      out.shape.push_back(shape[d]);
      out.symbols.push_back(symbol(d));
      out.factors.push_back(factors.empty() ? 1 : factors[d]);
      for (size_t k = 0; k < operands.size(); ++k) out.strides[k].push_back(operands[k][d]);
    }
    any_symbol |= symbol(d) >= 0;
  }
  if (!any_symbol) out.symbols.clear(), out.factors.clear();
  return out;
}

// Each dim's size as index math: a run-time size (`symbols[d] >= 0`,
// `factors[d]` times symbol's; IndexExpr::Size) or the constant.
inline std::vector<IndexExpr> DimSizes(const Shape& shape, const std::vector<int32_t>& symbols = {},
                                       const std::vector<int64_t>& factors = {}) {
  std::vector<IndexExpr> sizes;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int32_t symbol = symbols.empty() ? -1 : symbols[d];
    sizes.push_back(symbol >= 0 && symbol < IndexExpr::kMaxSizeArgs
                        ? IndexExpr::Size(symbol) * (factors.empty() ? 1 : factors[d])
                        : IndexExpr::Const(shape[d]));
  }
  return sizes;
}

// Multi-index of a linear index `linear` (< Numel(shape)) over `shape`,
// outermost first. The outermost dim of size > 1 needs no `% size` (and the
// size-1 dims before it are 0), so its size never enters the index math: a
// dynamic outer dim stays out of the kernel, also behind a batch of 1.
// Another dim of run-time size (`sizes[d]` not a constant; DimSizes)
// divides by it at run time (the kernel takes it: Kernel::size_args).
inline std::vector<IndexExpr> Unravel(const IndexExpr& linear, const Shape& shape,
                                      const std::vector<IndexExpr>& sizes = {}) {
  // An empty shape has no element to index: the loop around it never runs.
  if (Numel(shape) == 0) return std::vector<IndexExpr>(shape.size(), IndexExpr::Const(0));
  std::vector<IndexExpr> index(shape.size(), IndexExpr::Const(0));
  int64_t outer = 0;
  while (outer + 1 < static_cast<int64_t>(shape.size()) && shape[outer] == 1) ++outer;
  // index[d] = (rest / inner) % size[d], `rest` the linear index divided by
  // the run-time sizes inside d.
  IndexExpr rest = linear;
  int64_t inner = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= outer; --d) {
    if (d == outer) {
      index[d] = rest / inner;
    } else if (!sizes.empty() && !sizes[d].is_const()) {
      index[d] = (rest / inner) % sizes[d];
      rest = rest / inner / sizes[d];
      inner = 1;
      continue;
    } else {
      index[d] = (rest / inner) % shape[d];
    }
    inner *= shape[d];
  }
  return index;
}

// index . strides where dims may have run-time sizes (`sizes`, DimSizes):
// a dim whose stride is the next dim's size times its stride, that size a
// run-time one, is folded in Horner's way, (i_d * size + i_next) * stride,
// so no stride prints a run-time size (and i / s * s + i % s folds to i).
inline IndexExpr DotSized(const std::vector<IndexExpr>& index, const Shape& shape, const std::vector<IndexExpr>& sizes,
                          const Strides& strides, int64_t offset = 0) {
  IndexExpr sum = IndexExpr::Const(offset);
  for (size_t d = 0; d < index.size();) {
    IndexExpr run = index[d];
    size_t e = d;
    while (e + 1 < index.size() && !sizes[e + 1].is_const() && strides[e + 1] != 0 &&
           strides[e] == shape[e + 1] * strides[e + 1]) {
      run = run * sizes[e + 1] + index[e + 1];
      ++e;
    }
    sum = sum + run * strides[e];
    d = e + 1;
  }
  return sum;
}

inline IndexExpr Dot(const std::vector<IndexExpr>& index, const Strides& strides, int64_t offset = 0) {
  IndexExpr sum = IndexExpr::Const(offset);
  for (size_t d = 0; d < index.size(); ++d) sum = sum + index[d] * strides[d];
  return sum;
}

// Element index, for a value of `shape` laid out with `strides`, of the element
// at contiguous position `linear`.
inline IndexExpr Address(const IndexExpr& linear, const Shape& shape, const Strides& strides) {
  Layout l = Coalesce(shape, {ContiguousStrides(shape), strides});
  return Dot(Unravel(linear, l.shape), l.strides[1]);
}

// Element strides a node is read with: its own (inputs) or, for a value an
// earlier kernel stored, the contiguous strides of its shape.
inline Strides OperandStrides(const graph::Node& n, bool stored_by_earlier_kernel) {
  return stored_by_earlier_kernel ? ContiguousStrides(n.shape) : n.strides;
}

// Dynamic plans: sets `k`'s run-time extent from the symbols of `dims` (the
// dims it iterates over, with `symbols` their symbols or -1, `factors` what
// their sizes are of the symbols') and returns whether it has one. Then the
// loop index bound is unknown, and index64 follows the plan.
inline bool SetDynamicExtent(const Shape& dims, const std::vector<int32_t>& symbols,
                             const std::vector<int64_t>& factors, Kernel* k) {
  k->extent_factor = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (symbols[d] >= 0) {
      k->extent_symbols.push_back(symbols[d]);
      k->extent_factor *= factors[d];
    } else {
      k->extent_factor *= dims[d];
    }
  }
  k->dynamic_extent = !k->extent_symbols.empty();
  return k->dynamic_extent;
}

// index64 of a kernel whose index bounds came out as `max_bound`.
inline bool NeedsIndex64(const fusion::Plan& plan, const Kernel& k, int64_t max_bound) {
  if (k.dynamic_extent) return plan.index64;
  return plan.index64 || k.numel > INT_MAX - (1 << 16) || max_bound > INT_MAX;
}

// Reductions (lower_reduction.cc).
Kernel LowerReduction(const fusion::Plan& plan, const fusion::KernelGroup& group);

}  // namespace fusebox::backend
