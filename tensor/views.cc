// Views: every one rewrites (shape, strides, offset) and shares the storage or
// the lazy node, so they cost nothing in eager mode and fuse into loads when
// captured. Only reshape of a layout that strides cannot express copies.
#include <algorithm>
#include <numeric>

#include "absl/strings/str_join.h"
#include "tensor/tensor.h"

namespace fusebox {
namespace {

// Field by field rather than copying base's impl: a copy would allocate its
// shape and strides only to overwrite them (views are made on every traced op).
Tensor MakeView(const Tensor& base, Shape shape, Strides strides, int64_t offset) {
  const TensorImpl& from = base.impl();
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = from.dtype;
  impl->device = from.device;
  impl->storage = from.storage;
  impl->lazy = from.lazy;
  return Tensor(std::move(impl));
}

// Strides for viewing (shape, strides) as `target` without copying, or false
// (PyTorch's computeStride: split/merge only dims that are contiguous together).
bool ComputeViewStrides(const Shape& shape, const Strides& strides, const Shape& target,
                        Strides* out) {
  const int64_t numel = Numel(shape);
  out->assign(target.size(), 0);
  if (numel == 0 || shape.empty()) {  // nothing to keep: any dense layout views it
    *out = ContiguousStrides(target);
    return true;
  }
  int64_t view_d = static_cast<int64_t>(target.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || target[view_d] == 1)) {
        (*out)[view_d] = view_numel * chunk_base_stride;
        view_numel *= target[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

Shape InferShape(const Shape& requested, int64_t numel) {
  Shape shape = requested;
  int64_t infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != -1) continue;
    FUSEBOX_ENSURE(infer < 0, "reshape: only one dimension can be -1, got ", ShapeToString(requested));
    infer = static_cast<int64_t>(i);
  }
  Shape known_dims = shape;
  if (infer >= 0) known_dims.erase(known_dims.begin() + infer);
  const int64_t known = CheckedNumel(known_dims, "reshape");
  if (infer >= 0) {
    FUSEBOX_ENSURE(known != 0 && numel % known == 0, "reshape: shape ", ShapeToString(requested),
                   " is invalid for a tensor of ", numel, " elements");
    shape[infer] = numel / known;
  }
  FUSEBOX_ENSURE(Numel(shape) == numel, "reshape: shape ", ShapeToString(requested),
                 " is invalid for a tensor of ", numel, " elements");
  return shape;
}

}  // namespace

int64_t Tensor::size(int64_t d) const {
  FUSEBOX_ENSURE(dim() > 0, "size: dimension ", d, " specified, but the tensor is 0-d (it has no dimensions)");
  return shape()[WrapDim(d, dim(), "size")];
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = WrapDim(d0, dim(), "transpose");
  d1 = WrapDim(d1, dim(), "transpose");
  if (dim() == 0) return *this;  // PyTorch: dims 0 and -1 of a 0-d tensor name the tensor itself
  Shape shape = this->shape();
  Strides strides = this->strides();
  std::swap(shape[d0], shape[d1]);
  std::swap(strides[d0], strides[d1]);
  return MakeView(*this, std::move(shape), std::move(strides), storage_offset());
}

Tensor Tensor::t() const {
  FUSEBOX_ENSURE(dim() <= 2, "t: expects a tensor with <= 2 dims, but got ", dim(), " dims ", ShapeToString(shape()),
                 "; use transpose(d0, d1) or permute");
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  FUSEBOX_ENSURE(static_cast<int64_t>(dims.size()) == dim(), "permute: got ", dims.size(),
                 " dims [", absl::StrJoin(dims, ", "), "] for a tensor of rank ", dim());
  Shape shape(dims.size());
  Strides strides(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = WrapDim(dims[i], dim(), "permute");
    FUSEBOX_ENSURE(!seen[d], "permute: dim ", d, " repeated in [", absl::StrJoin(dims, ", "), "]");
    seen[d] = true;
    shape[i] = this->shape()[d];
    strides[i] = this->strides()[d];
  }
  return MakeView(*this, std::move(shape), std::move(strides), storage_offset());
}

Tensor Tensor::view(const Shape& requested) const {
  Shape shape = InferShape(requested, numel());
  Strides strides;
  FUSEBOX_ENSURE(ComputeViewStrides(this->shape(), this->strides(), shape, &strides),
                 "view: cannot view a tensor of shape ", ShapeToString(this->shape()),
                 " and strides ", ShapeToString(this->strides()), " as ", ShapeToString(shape),
                 "; use reshape() (copies) or contiguous() first");
  return MakeView(*this, std::move(shape), std::move(strides), storage_offset());
}

Tensor Tensor::reshape(const Shape& requested) const {
  Shape shape = InferShape(requested, numel());
  Strides strides;
  if (ComputeViewStrides(this->shape(), this->strides(), shape, &strides)) {
    return MakeView(*this, std::move(shape), std::move(strides), storage_offset());
  }
  return contiguous().view(shape);
}

Tensor Tensor::flatten() const { return reshape({numel()}); }

Tensor Tensor::expand(const Shape& target) const {
  const int64_t rank = static_cast<int64_t>(target.size());
  FUSEBOX_ENSURE(rank >= dim(), "expand: target ", ShapeToString(target),
                 " has fewer dims than the tensor's ", ShapeToString(shape()));
  Shape shape(rank);
  Strides strides(rank);
  const int64_t lead = rank - dim();
  for (int64_t i = rank - 1; i >= 0; --i) {
    const int64_t src = i - lead;
    int64_t size = target[i];
    FUSEBOX_ENSURE(size >= -1, "expand: invalid size ", size, " in ", ShapeToString(target));
    if (src < 0) {
      FUSEBOX_ENSURE(size >= 0, "expand: -1 not allowed for new leading dim in ", ShapeToString(target));
      shape[i] = size;
      strides[i] = 0;
      continue;
    }
    const int64_t have = this->shape()[src];
    if (size == -1) size = have;
    FUSEBOX_ENSURE(have == size || have == 1, "expand: cannot expand ", ShapeToString(this->shape()),
                   " to ", ShapeToString(target), " (dim ", i, ": ", have, " vs ", size,
                   "; only size-1 dims can grow)");
    shape[i] = size;
    strides[i] = (have == size) ? this->strides()[src] : 0;
  }
  CheckedNumel(shape, "expand");
  return MakeView(*this, std::move(shape), std::move(strides), storage_offset());
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  FUSEBOX_ENSURE(dim() > 0, "narrow: cannot narrow a 0-d tensor");
  d = WrapDim(d, dim(), "narrow");
  const int64_t size = shape()[d];
  if (start < 0) start += size;
  // `length <= size - start`, not `start + length <= size`, which wraps.
  FUSEBOX_ENSURE(start >= 0 && start <= size && length >= 0 && length <= size - start, "narrow: start ", start,
                 " length ", length, " is out of range for dim ", d, " of size ", size);
  Shape shape = this->shape();
  shape[d] = length;
  return MakeView(*this, std::move(shape), strides(), storage_offset() + start * strides()[d]);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end) const {
  FUSEBOX_ENSURE(dim() > 0, "slice: cannot slice a 0-d tensor");
  d = WrapDim(d, dim(), "slice");
  const int64_t size = shape()[d];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  return narrow(d, start, end - start);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = WrapDim(d, dim() + 1, "unsqueeze");
  Shape shape = this->shape();
  Strides strides = this->strides();
  const int64_t stride = d < dim() ? shape[d] * strides[d] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  return MakeView(*this, std::move(shape), std::move(strides), storage_offset());
}

Tensor Tensor::squeeze(int64_t d) const {
  d = WrapDim(d, dim(), "squeeze");
  if (dim() == 0 || shape()[d] != 1) return *this;
  Shape shape = this->shape();
  Strides strides = this->strides();
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return MakeView(*this, std::move(shape), std::move(strides), storage_offset());
}

}  // namespace fusebox
