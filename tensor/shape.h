// Shapes and strides (in elements), and the small helpers every layer needs:
// contiguous strides, numel, NumPy broadcasting, printing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fusebox {

using Shape = std::vector<int64_t>;    // sizes, outermost first
using Strides = std::vector<int64_t>;  // element strides, same rank as the shape

int64_t Numel(const Shape& shape);
Strides ContiguousStrides(const Shape& shape);
// True when `strides` address `shape` row-major densely (size-1 dims ignored).
bool IsContiguous(const Shape& shape, const Strides& strides);
// NumPy broadcasting; nullopt-like failure is reported by returning false.
bool BroadcastShapes(const Shape& a, const Shape& b, Shape* out);
std::string ShapeToString(const Shape& shape);  // "[8192, 8192]"
// Wraps a possibly negative dim into [0, rank); throws fusebox::Error naming `op`.
int64_t WrapDim(int64_t dim, int64_t rank, const char* op);

}  // namespace fusebox
