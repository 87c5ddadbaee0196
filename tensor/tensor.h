// fusebox::Tensor: a ref-counted handle to a strided view (shape, strides,
// offset) of either concrete storage or, while compile() captures, a node of
// the graph being built (lazy). Views never copy, in both states. Ops on
// tensors live in frontend/ops.h; eager ones run as one kernel each. In-place
// ops (add_, copy_, ...) write through the view into its storage.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <source_location>
#include <string>
#include <type_traits>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/shape.h"
#include "tensor/storage.h"

namespace fusebox {

namespace frontend {
struct LazyValue;  // a node of a graph under capture (frontend/capture.h)
}

// The layout of a copy (PyTorch's torch.memory_format, the two it has for
// every rank): kPreserve keeps a dense tensor's strides (and the order of a
// strided one's), kContiguous is row-major.
enum class MemoryFormat { kPreserve, kContiguous };

struct TensorImpl {
  Shape shape;
  Strides strides;
  int64_t offset = 0;  // in elements, into storage (or into the lazy node's contiguous value)
  DType dtype = DType::kFloat32;
  Device device;
  std::shared_ptr<Storage> storage;            // set when concrete
  std::shared_ptr<frontend::LazyValue> lazy;   // set while captured, until materialized
  // A random op's generator state (seed, offset; frontend/random.h), drawn
  // anew for each call: a replayed call draws a fresh one in its place.
  bool rng_state = false;
};

class Tensor {
 public:
  Tensor() = default;  // undefined tensor
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  Tensor(const Tensor&) = default;
  Tensor(Tensor&&) noexcept = default;
  ~Tensor() = default;
  // Assigning another tensor rebinds this handle (no data moves, as in
  // PyTorch). The memory it viewed counts that (Storage::rebinds): a replay
  // that reads that memory as a tensor captured from outside its arguments
  // traces again rather than read what may be stale (frontend/replay.h).
  Tensor& operator=(const Tensor& other) {
    if (impl_ != other.impl_) {
      NoteRebind();
      impl_ = other.impl_;
    }
    return *this;
  }
  Tensor& operator=(Tensor&& other) noexcept {
    if (impl_ != other.impl_) NoteRebind();
    impl_ = std::move(other.impl_);
    return *this;
  }

  // --- creation (see also randn/zeros/ones/full/arange in frontend/ops.h)
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape,
                            Device device = Device::cpu());
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype,
                            Device device = Device::cpu());
  // Integer vectors give int32 / int64 tensors. A template, so a braced list
  // like from_vector({1, 2}, {2}) unambiguously picks the float overload.
  template <typename T>
    requires(std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>)
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = Device::cpu()) {
    return FromDoubles(std::vector<double>(values.begin(), values.end()), shape,
                       std::is_same_v<T, int32_t> ? DType::kInt32 : DType::kInt64, device);
  }
  // Uninitialized contiguous tensor (for kernels' outputs).
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu());

  // --- reading: materializes a lazy tensor (a graph break under compile())
  std::vector<float> to_vector(std::source_location loc = std::source_location::current()) const;
  std::vector<double> to_double_vector(std::source_location loc = std::source_location::current()) const;
  double item(std::source_location loc = std::source_location::current()) const;

  // The value of a one-element tensor as a condition (`if (gt(x, 0))`); a
  // graph break inside compile(), as in PyTorch.
  explicit operator bool() const;

  // --- metadata
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Strides& strides() const { return impl().strides; }
  int64_t storage_offset() const { return impl().offset; }
  int64_t dim() const { return static_cast<int64_t>(impl().shape.size()); }
  int64_t size(int64_t d) const;
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().device; }
  int64_t numel() const { return Numel(impl().shape); }
  bool is_contiguous() const { return IsContiguous(impl().shape, impl().strides); }
  // Still only a node of a graph being captured (not yet computed).
  bool is_lazy() const;
  // Address of the first element (device pointer for CUDA); materializes,
  // and throws a failure the run that wrote it left pending (a bad index).
  // The memory may be written through it, which fusebox cannot see: the
  // first call counts as a write (version() bumps) and compiled plans no
  // longer assume this memory's values (a mask judged causal is read
  // instead). Reads go through const_data_ptr(), which assumes nothing.
  void* data_ptr() const;
  void* mutable_data_ptr() const { return data_ptr(); }  // PyTorch's spelling of the same
  const void* const_data_ptr() const;
  // In-place writes to this tensor's storage so far, shared by all its views
  // (PyTorch's `_version`). Reads no data: 0 while the tensor is lazy.
  uint64_t version() const;
  std::string str() const;  // "Tensor[2, 3] float32 cpu"

  // --- conversion (one kernel or one copy each in eager mode)
  Tensor to(Device device) const;
  // A new dtype keeps the layout (PyTorch's to(dtype) and clone() do).
  Tensor to(DType dtype, MemoryFormat format = MemoryFormat::kPreserve) const;
  Tensor contiguous() const;
  Tensor clone(MemoryFormat format = MemoryFormat::kPreserve) const;

  // --- views: no copy
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;  // transpose(0, 1) of a 2-D tensor; 0-D and 1-D come back as they are
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor view(const Shape& shape) const;     // errors when the strides do not allow it
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a copy
  Tensor expand(const Shape& shape) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;
  Tensor flatten() const;

  // --- in-place ops (frontend/inplace_ops.cc), spelled as in PyTorch: they
  // write through this view into its storage and bump version(). `other`
  // broadcasts to this tensor's shape, which never changes; the result dtype
  // must cast to this dtype (PyTorch's rule: no float into an integer tensor).
  // The result is computed first, so `x.add_(x.transpose(0, 1))` reads the old
  // values. Inside compile() each is a graph break: what was captured runs,
  // then the op runs on concrete data. A failed op leaves the tensor unchanged.
  const Tensor& add_(const Tensor& other, std::source_location loc = std::source_location::current()) const;
  const Tensor& sub_(const Tensor& other, std::source_location loc = std::source_location::current()) const;
  const Tensor& mul_(const Tensor& other, std::source_location loc = std::source_location::current()) const;
  const Tensor& div_(const Tensor& other, std::source_location loc = std::source_location::current()) const;
  const Tensor& add_(double other, std::source_location loc = std::source_location::current()) const;
  const Tensor& sub_(double other, std::source_location loc = std::source_location::current()) const;
  const Tensor& mul_(double other, std::source_location loc = std::source_location::current()) const;
  const Tensor& div_(double other, std::source_location loc = std::source_location::current()) const;
  // Copies `src` (broadcast; any dtype, cast as to(DType); any device).
  const Tensor& copy_(const Tensor& src, std::source_location loc = std::source_location::current()) const;
  const Tensor& fill_(double value, std::source_location loc = std::source_location::current()) const;
  const Tensor& zero_(std::source_location loc = std::source_location::current()) const;

  // The shared state; for fusebox internals.
  TensorImpl& impl() const {
    FUSEBOX_ENSURE(impl_ != nullptr, "use of an undefined (default-constructed) Tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  void NoteRebind() const {
    if (impl_ != nullptr && impl_->storage != nullptr) impl_->storage->note_rebind();
  }
  static Tensor FromDoubles(const std::vector<double>& values, const Shape& shape, DType dtype, Device device);
  std::shared_ptr<TensorImpl> impl_;
};

// data_ptr() without the pending check (tensor/pending_error.h): for
// fusebox's own runs, which pass the check on to what they compute.
void* UncheckedDataPtr(const Tensor& t);

// Prints shape, dtype, device and the values (the first 20 for larger tensors);
// inside compile() this needs concrete values, so it is a graph break.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace fusebox
