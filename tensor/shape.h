// Shapes and strides (in elements), and the small helpers every layer needs:
// contiguous strides, numel, NumPy broadcasting, printing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"

namespace fusebox {

// Sizes (outermost first) and element strides (same rank as the shape). Small
// vectors: up to five dims live inline, as in PyTorch's SizesAndStrides, so
// making a tensor or a graph node allocates nothing for them.
using Shape = absl::InlinedVector<int64_t, 5>;
using Strides = absl::InlinedVector<int64_t, 5>;

int64_t Numel(const Shape& shape);
// Numel for op `op`, checked: every size >= 0, and the dense layout's extent
// (the product of max(size, 1), which contiguous strides reach) times
// `element_size` bytes fits in int64. Throws fusebox::Error naming the op and
// the shape, so no size, stride or byte count wraps.
int64_t CheckedNumel(absl::Span<const int64_t> shape, const char* op, int64_t element_size = 1);
Strides ContiguousStrides(const Shape& shape);
// True when `strides` address `shape` row-major densely (size-1 dims ignored).
bool IsContiguous(const Shape& shape, const Strides& strides);
// A strided read of a value: position p at offset + sum(p * strides).
struct StridedRead {
  Shape shape;
  Strides strides;
  int64_t offset = 0;
};
// `outer`, a read of `inner`'s row-major value, as one read of what `inner`
// reads (a view of a view as one view). False, `outer` untouched, where a
// step along one of outer's dims would carry across a dim of inner (so an
// outer dim never spans two of inner's: dims split, they do not merge).
bool ComposeReads(const StridedRead& inner, StridedRead* outer);
// NumPy broadcasting; nullopt-like failure is reported by returning false.
bool BroadcastShapes(const Shape& a, const Shape& b, Shape* out);
std::string ShapeToString(absl::Span<const int64_t> dims);  // "[8192, 8192]" (shapes, strides, axes)
// Wraps a possibly negative dim into [0, rank); throws fusebox::Error naming `op`.
int64_t WrapDim(int64_t dim, int64_t rank, const char* op);

}  // namespace fusebox
