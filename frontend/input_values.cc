#include "frontend/input_values.h"

#include <cmath>
#include <cstring>

#include "backend/cuda/driver.h"
#include "tensor/dtype.h"

namespace fusebox::frontend {
namespace {

// Elements read at most: a mask the evaluator judges (2^22) of a view at most
// four times larger in memory (a crop of a bigger buffer).
constexpr int64_t kMaxElements = int64_t{1} << 22;
constexpr int64_t kMaxSpan = int64_t{1} << 24;

// `t`'s elements in row-major order, as float where that is exact (every
// float dtype here converts exactly; integers up to 2^24).
std::optional<std::vector<float>> ReadExactly(const Tensor& t) {
  const TensorImpl& impl = t.impl();
  if (impl.lazy || impl.storage == nullptr || impl.storage->pending() != nullptr) return std::nullopt;
  if (t.numel() > kMaxElements) return std::nullopt;
  int64_t span = 1;  // elements from the view's first to its last, inclusive
  for (size_t d = 0; d < impl.shape.size(); ++d) {
    if (impl.shape[d] == 0) return std::vector<float>();
    if (impl.strides[d] < 0) return std::nullopt;
    span += (impl.shape[d] - 1) * impl.strides[d];
  }
  if (span > kMaxSpan) return std::nullopt;
  const size_t size = DTypeSize(impl.dtype);
  std::vector<char> bytes(static_cast<size_t>(span) * size);
  const char* base = static_cast<const char*>(impl.storage->data()) + impl.offset * size;
  if (impl.device.is_cuda()) {
    if (!cuda::Driver::Get()
             .CopyDeviceToHost(impl.device.index, bytes.data(), reinterpret_cast<CUdeviceptr>(base), bytes.size())
             .ok()) {
      return std::nullopt;
    }
  } else {
    std::memcpy(bytes.data(), base, bytes.size());
  }
  std::vector<float> out(static_cast<size_t>(t.numel()));
  // Row by row along the last dim (a float32 buffer is read as floats).
  const size_t r = impl.shape.size();
  const int64_t cols = r == 0 ? 1 : impl.shape[r - 1], col_stride = r == 0 ? 0 : impl.strides[r - 1];
  for (int64_t row = 0; row < t.numel() / cols; ++row) {
    int64_t rest = row, at = 0;
    for (size_t d = r - (r == 0 ? 0 : 1); d-- > 0;) {
      at += (rest % impl.shape[d]) * impl.strides[d];
      rest /= impl.shape[d];
    }
    float* dst = out.data() + row * cols;
    if (impl.dtype == DType::kFloat32) {
      const float* src = reinterpret_cast<const float*>(bytes.data()) + at;
      for (int64_t j = 0; j < cols; ++j) dst[j] = src[j * col_stride];
      continue;
    }
    for (int64_t j = 0; j < cols; ++j) {
      const double v = ReadElement(bytes.data(), impl.dtype, at + j * col_stride);
      // Integers from 2^24 on may round as float.
      if (!IsFloating(impl.dtype) && std::fabs(v) >= 16777216.0) return std::nullopt;
      dst[j] = static_cast<float>(v);
    }
  }
  return out;
}

}  // namespace

const std::vector<float>* TensorInputValues::Values(int32_t index) {
  if (index < 0 || static_cast<size_t>(index) >= inputs_.size()) return nullptr;
  auto [it, inserted] = read_.try_emplace(index);
  if (inserted) it->second = ReadExactly(inputs_[index]);
  return it->second ? &*it->second : nullptr;
}

int64_t TensorInputValues::ContentId(int32_t index) {
  if (auto it = content_.find(index); it != content_.end()) return it->second;
  const std::vector<float>* mine = Values(index);
  int64_t id = index;
  if (mine != nullptr) {
    // The first input of equal dtype and elements (bit for bit), if any.
    for (int32_t other : distinct_) {
      const std::vector<float>& values = *read_.at(other);
      if (values.size() == mine->size() && inputs_[other].dtype() == inputs_[index].dtype() &&
          std::memcmp(values.data(), mine->data(), mine->size() * sizeof(float)) == 0) {
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
