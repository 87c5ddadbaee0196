#include "frontend/input_values.h"

#include <cstring>

#include "backend/cuda/driver.h"
#include "tensor/dtype.h"
#include "tensor/layout.h"

namespace fusebox::frontend {
namespace {

// Elements an input's memory may span to be read: a [2048, 2048] int64 mask
// is 32 MB.
constexpr int64_t kMaxSpan = int64_t{1} << 23;

// The bytes of `t` from its first element to its last (a broadcast dim adds
// none), copied from its memory without running an op.
std::optional<std::vector<char>> ReadSpan(const Tensor& t) {
  const TensorImpl& impl = t.impl();
  // Memory a raw pointer was handed out for may change with no version bump.
  if (impl.lazy || impl.storage == nullptr || impl.storage->pending() != nullptr || impl.storage->escaped()) {
    return std::nullopt;
  }
  for (size_t d = 0; d < impl.shape.size(); ++d) {
    if (impl.shape[d] == 0) return std::vector<char>();
    if (impl.strides[d] < 0) return std::nullopt;
  }
  const int64_t span = ElementSpan(impl.shape, impl.strides);
  if (span > kMaxSpan) return std::nullopt;
  std::vector<char> bytes(static_cast<size_t>(span) * DTypeSize(impl.dtype));
  const char* base = static_cast<const char*>(impl.storage->data()) + impl.offset * DTypeSize(impl.dtype);
  if (impl.device.is_cuda()) {
    const absl::Status copied = cuda::Driver::Get().CopyDeviceToHost(impl.device.index, bytes.data(),
                                                                     reinterpret_cast<CUdeviceptr>(base), bytes.size());
    if (!copied.ok()) return std::nullopt;
  } else {
    std::memcpy(bytes.data(), base, bytes.size());
  }
  return bytes;
}

}  // namespace

const std::optional<std::vector<char>>& TensorInputValues::Bytes(int32_t index) {
  auto [it, inserted] = read_.try_emplace(index);
  if (inserted) it->second = ReadSpan(inputs_[index]);
  return it->second;
}

bool TensorInputValues::Readable(int32_t index) {
  return index >= 0 && static_cast<size_t>(index) < inputs_.size() && Bytes(index).has_value();
}

void TensorInputValues::Gather(int32_t index, const std::vector<int64_t>& at, std::vector<double>* out) {
  const std::vector<char>& bytes = *Bytes(index);
  const TensorImpl& impl = inputs_[index].impl();
  std::vector<int64_t> elements;
  fusion::StridedOffsets(impl.shape, impl.strides, /*offset=*/0, at, &elements);
  out->resize(at.size());
  if (impl.dtype == DType::kFloat32) {  // the common buffer, without ReadElement's switch
    const float* data = reinterpret_cast<const float*>(bytes.data());
    for (size_t k = 0; k < at.size(); ++k) (*out)[k] = data[elements[k]];
    return;
  }
  for (size_t k = 0; k < at.size(); ++k) (*out)[k] = ReadElement(bytes.data(), impl.dtype, elements[k]);
}

int64_t TensorInputValues::ContentId(int32_t index) {
  if (auto it = content_.find(index); it != content_.end()) return it->second;
  int64_t id = index;
  if (Readable(index)) {
    // The first input read of equal dtype, shape, strides and bytes, if any.
    const TensorImpl& mine = inputs_[index].impl();
    const std::vector<char>& bytes = *Bytes(index);
    for (int32_t other : distinct_) {
      const TensorImpl& theirs = inputs_[other].impl();
      if (theirs.dtype == mine.dtype && theirs.shape == mine.shape && theirs.strides == mine.strides &&
          *Bytes(other) == bytes) {
        id = other;
        break;
      }
    }
    if (id == index) distinct_.push_back(index);
  }
  content_.emplace(index, id);
  return id;
}

fusion::ValueGuard TensorInputValues::Guard(int32_t index) {
  const TensorImpl& impl = inputs_[index].impl();
  return {.input = index,
          .storage = impl.storage ? impl.storage->id() : 0,
          .version = impl.storage ? impl.storage->version() : 0,
          .offset = impl.offset};
}

bool TensorInputValues::Escaped(int32_t index) {
  if (index < 0 || static_cast<size_t>(index) >= inputs_.size() || !inputs_[index].defined()) return false;
  const TensorImpl& impl = inputs_[index].impl();
  return impl.storage != nullptr && impl.storage->escaped();
}

bool ValueGuardHolds(const fusion::ValueGuard& guard, const Tensor& t) {
  if (!t.defined()) return false;
  const TensorImpl& impl = t.impl();
  return impl.storage != nullptr && impl.storage->id() == guard.storage && impl.storage->version() == guard.version &&
         impl.offset == guard.offset;
}

bool ValueGuardsHold(absl::Span<const fusion::ValueGuard> guards, absl::Span<const Tensor> inputs) {
  for (const fusion::ValueGuard& g : guards) {
    if (g.input < 0 || static_cast<size_t>(g.input) >= inputs.size() || !ValueGuardHolds(g, inputs[g.input])) {
      return false;
    }
  }
  return true;
}

}  // namespace fusebox::frontend
