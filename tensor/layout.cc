// Follows aten/src/ATen/TensorIterator.cpp (compute_fast_setup_type,
// compute_strides, reorder_dimensions, allocate_or_resize_outputs) and
// infer_dense_strides (aten/src/ATen/TensorUtils.cpp) step by step, so the
// strides match PyTorch's also where the choice is arbitrary (size-1 dims).
#include "tensor/layout.h"

#include <algorithm>
#include <numeric>

namespace fusebox {
namespace {

using Perm = absl::InlinedVector<int64_t, 5>;

// PyTorch's insertion sort of the dims, fastest first, starting from
// row-major order: compare(a, b) > 0 moves a after b, < 0 stops, 0 (ambiguous)
// looks at the dims further back.
template <typename Compare>
Perm SortDims(int64_t ndim, Compare compare) {
  Perm perm(ndim);
  for (int64_t k = 0; k < ndim; ++k) perm[k] = ndim - 1 - k;
  for (int64_t i = 1; i < ndim; ++i) {
    int64_t dim1 = i;
    for (int64_t dim0 = i - 1; dim0 >= 0; --dim0) {
      const int c = compare(perm[dim0], perm[dim1]);
      if (c > 0) {
        std::swap(perm[dim0], perm[dim1]);
        dim1 = dim0;
      } else if (c < 0) {
        break;
      }
    }
  }
  return perm;
}

bool IsRowMajor(const Perm& perm) {
  for (size_t k = 0; k < perm.size(); ++k) {
    if (perm[k] != static_cast<int64_t>(perm.size() - 1 - k)) return false;
  }
  return true;
}

// PyTorch's is_contiguous(): an empty tensor is.
bool TorchContiguous(const Shape& shape, const Strides& strides) {
  return Numel(shape) == 0 || IsContiguous(shape, strides);
}

// is_contiguous(MemoryFormat::ChannelsLast) of a 4-D tensor: dims C, W, H, N
// fastest first, size-1 dims ignored.
bool IsChannelsLast(const Shape& shape, const Strides& strides) {
  if (shape.size() != 4) return false;
  int64_t expected = 1;
  for (int d : {1, 3, 2, 0}) {
    if (shape[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

Strides ChannelsLastStrides(const Shape& shape) {
  Strides s(4);
  s[1] = 1;
  s[3] = shape[1];
  s[2] = s[3] * shape[3];
  s[0] = s[2] * shape[2];
  return s;
}

// The strides of a layout dense in `perm`'s order (fastest first), each dim's
// stride the product of the faster dims' sizes (TensorIterator's
// compatible_stride: sizes as they are, so 0 propagates).
Strides DenseInOrder(const Shape& shape, const Perm& perm) {
  Strides out(shape.size());
  int64_t next = 1;
  for (int64_t d : perm) {
    out[d] = next;
    next *= shape[d];
  }
  return out;
}

template <typename F>
bool AllOf(absl::Span<const StridedOperand> operands, F f) {
  return std::all_of(operands.begin(), operands.end(), [&](const StridedOperand& op) { return f(op); });
}

}  // namespace

int64_t ElementSpan(const Shape& shape, const Strides& strides) {
  int64_t span = 1;
  for (size_t d = 0; d < shape.size(); ++d) span += (shape[d] - 1) * strides[d];
  return span;
}

bool IsNonOverlappingAndDense(const Shape& shape, const Strides& strides) {
  const size_t ndim = shape.size();
  if (ndim == 1) return shape[0] < 2 || strides[0] == 1;
  Perm perm(ndim);
  std::iota(perm.begin(), perm.end(), 0);
  // Size 0 and 1 dims sort last: they place nothing.
  std::sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
    if (shape[a] < 2) return false;
    if (shape[b] < 2) return true;
    return strides[a] < strides[b];
  });
  int64_t require = 1;
  for (int64_t d : perm) {
    if (shape[d] < 2) return true;
    if (strides[d] != require) return false;
    require *= shape[d];
  }
  return true;
}

Strides ElementwiseStrides(const Shape& shape, absl::Span<const StridedOperand> operands) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  if (AllOf(operands, [&](const StridedOperand& op) { return *op.shape == shape; })) {
    if (AllOf(operands, [](const StridedOperand& op) { return TorchContiguous(*op.shape, *op.strides); })) {
      return ContiguousStrides(shape);
    }
    if (AllOf(operands, [](const StridedOperand& op) { return IsChannelsLast(*op.shape, *op.strides); })) {
      return ChannelsLastStrides(shape);
    }
    if (AllOf(operands, [&](const StridedOperand& op) {
          return IsNonOverlappingAndDense(*op.shape, *op.strides) && *op.strides == *operands.back().strides;
        })) {
      return *operands.back().strides;
    }
  }
  // compute_strides: an operand's stride along dim d of the result, 0 where
  // it is broadcast (a missing leading dim, or size 1 against a larger size).
  auto stride = [&](const StridedOperand& op, int64_t d) -> int64_t {
    const int64_t lead = ndim - static_cast<int64_t>(op.shape->size());
    if (d < lead) return 0;
    return (*op.shape)[d - lead] == 1 && shape[d] != 1 ? 0 : (*op.strides)[d - lead];
  };
  const Perm perm = SortDims(ndim, [&](int64_t d0, int64_t d1) {
    for (const StridedOperand& op : operands) {
      const int64_t s0 = stride(op, d0), s1 = stride(op, d1);
      if (s0 == 0 || s1 == 0) continue;  // broadcast: the next operand decides
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (shape[d0] > shape[d1]) return 1;  // equal strides: the larger dim outer
    }
    return 0;
  });
  return IsRowMajor(perm) ? ContiguousStrides(shape) : DenseInOrder(shape, perm);
}

Strides PreserveStrides(const Shape& shape, const Strides& strides) {
  if (IsNonOverlappingAndDense(shape, strides)) return strides;
  const int64_t ndim = static_cast<int64_t>(shape.size());
  if (ndim <= 1) return Strides(ndim, 1);
  const Perm perm = SortDims(ndim, [&](int64_t d0, int64_t d1) {
    const int64_t s0 = strides[d0], s1 = strides[d1];
    if (s0 == 0 || s1 == 0) return 0;  // keep the row-major place
    if (s0 < s1) return -1;
    if (s0 > s1) return 1;
    return shape[d0] > shape[d1] ? 1 : 0;
  });
  Strides out(ndim);
  int64_t next = 1;
  for (int64_t d : perm) {
    out[d] = next;
    if (shape[d] > 1) next *= shape[d];  // infer_dense_strides treats size 0 as 1
  }
  return out;
}

absl::InlinedVector<int64_t, 5> MemoryOrder(const Shape& shape, const Strides& strides) {
  if (Numel(shape) == 0 || IsContiguous(shape, strides)) return {};
  absl::InlinedVector<int64_t, 5> order(shape.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  return order;
}

}  // namespace fusebox
