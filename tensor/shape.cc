#include "tensor/shape.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tensor/error.h"

namespace fusebox {

int64_t Numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t CheckedNumel(absl::Span<const int64_t> shape, const char* op, int64_t element_size) {
  int64_t numel = 1, extent = element_size;
  bool overflow = false;
  for (int64_t s : shape) {
    FUSEBOX_ENSURE(s >= 0, op, ": invalid shape ", ShapeToString(shape), " (sizes must be >= 0)");
    overflow |= __builtin_mul_overflow(numel, s, &numel);
    overflow |= __builtin_mul_overflow(extent, std::max<int64_t>(s, 1), &extent);
  }
  FUSEBOX_ENSURE(!overflow, op, ": shape ", ShapeToString(shape), " is too large: its ",
                 element_size > 1 ? "size in bytes" : "number of elements", " overflows a 64-bit integer");
  return numel;
}

Strides ContiguousStrides(const Shape& shape) {
  Strides strides(shape.size());
  int64_t s = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

bool ComposeReads(const StridedRead& inner, StridedRead* outer) {
  const Shape& in = inner.shape;
  const Strides rowmajor = ContiguousStrides(in);
  // Outer's first position along each of inner's dims, then its last.
  Shape first(in.size(), 0);
  int64_t rest = outer->offset;
  for (size_t j = 0; j < in.size(); ++j) {
    if (in[j] == 0) return false;
    first[j] = rest / rowmajor[j], rest %= rowmajor[j];
  }
  Shape last = first;
  StridedRead out{.shape = outer->shape, .strides = Strides(outer->shape.size(), 0), .offset = inner.offset};
  for (size_t j = 0; j < in.size(); ++j) out.offset += first[j] * inner.strides[j];
  for (size_t d = 0; d < outer->shape.size(); ++d) {
    if (outer->shape[d] == 1 || outer->strides[d] == 0) continue;
    if (outer->strides[d] < 0) return false;
    // The outermost dim whose row-major stride divides the step takes it.
    size_t j = 0;
    while (j < in.size() && (in[j] == 1 || outer->strides[d] % rowmajor[j] != 0)) ++j;
    if (j == in.size()) return false;
    const int64_t step = outer->strides[d] / rowmajor[j];
    last[j] += (outer->shape[d] - 1) * step;
    out.strides[d] = step * inner.strides[j];
  }
  for (size_t j = 0; j < in.size(); ++j) {
    if (last[j] >= in[j]) return false;
  }
  *outer = std::move(out);
  return true;
}

bool IsContiguous(const Shape& shape, const Strides& strides) {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    if (shape[i] == 0) return true;
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

bool BroadcastShapes(const Shape& a, const Shape& b, Shape* out) {
  const size_t rank = std::max(a.size(), b.size());
  out->assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    (*out)[i] = da == 1 ? db : da;
  }
  return true;
}

std::string ShapeToString(absl::Span<const int64_t> dims) { return absl::StrCat("[", absl::StrJoin(dims, ", "), "]"); }

int64_t WrapDim(int64_t dim, int64_t rank, const char* op) {
  const int64_t lo = rank == 0 ? -1 : -rank, hi = rank == 0 ? 0 : rank - 1;
  FUSEBOX_ENSURE(dim >= lo && dim <= hi, op, ": dimension ", dim, " is out of range for a tensor of rank ",
                 rank, " (expected [", lo, ", ", hi, "])");
  return dim < 0 ? dim + std::max<int64_t>(rank, 1) : dim;
}

}  // namespace fusebox
