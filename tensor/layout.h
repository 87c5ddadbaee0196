// Result layouts of elementwise ops and copies, by PyTorch's rules, so that
// `gelu(x.t())` is laid out like `x.t()` and its kernel walks input and output
// in memory order (a copy's speed) instead of crossing a stride on one side.
// Pure functions of shapes and strides; frontend/ops.cc applies them.
#pragma once

#include <cstdint>

#include "absl/types/span.h"
#include "tensor/shape.h"

namespace fusebox {

// One operand of an elementwise op as PyTorch's TensorIterator sees it: its
// own shape and strides (a scalar or 0-d tensor is the empty shape).
struct StridedOperand {
  const Shape* shape;
  const Strides* strides;
};

// The strides PyTorch's TensorIterator gives an elementwise op's result of
// `shape` (broadcast of the operands, in argument order). Fast setup first:
// when every operand has `shape`, all contiguous -> contiguous, all
// channels-last (4-D) -> channels-last, all non-overlapping and dense with
// equal strides -> those strides. Otherwise (reorder_dimensions) the dims are
// sorted by the operands' strides: a broadcast dim (stride 0) compares equal
// to anything, the first operand that orders two dims decides (equal strides:
// the larger dim goes outer), and the result is dense in that order
// (contiguous when the order is row-major).
Strides ElementwiseStrides(const Shape& shape, absl::Span<const StridedOperand> operands);

// empty_like(x, preserve_format), what clone() and to(dtype) allocate: a
// non-overlapping dense x's own strides, else infer_dense_strides (dense in
// the order x's strides sort to, zero strides keeping their place).
Strides PreserveStrides(const Shape& shape, const Strides& strides);

// Elements from a view's first to its last, inclusive: 1 + sum of (size - 1)
// * stride (strides >= 0; a broadcast dim adds none). Only for a shape with
// elements.
int64_t ElementSpan(const Shape& shape, const Strides& strides);

// PyTorch's is_non_overlapping_and_dense: the elements fill a block of numel
// slots exactly, in some order of the dims.
bool IsNonOverlappingAndDense(const Shape& shape, const Strides& strides);

// The dims of a dense layout in memory order, outermost first: order[k] is
// the dim at position k. Empty when the layout is row-major (IsContiguous)
// or the tensor has no elements, so callers can skip permuting.
absl::InlinedVector<int64_t, 5> MemoryOrder(const Shape& shape, const Strides& strides);

}  // namespace fusebox
