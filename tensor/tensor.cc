#include "tensor/tensor.h"

#include <cstring>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "backend/cuda/driver.h"
#include "frontend/capture.h"

namespace fusebox {
namespace {

void CheckShape(const Shape& shape, size_t values, const char* what) {
  const int64_t numel = CheckedNumel(shape, what);
  FUSEBOX_ENSURE(static_cast<int64_t>(values) == numel, what, ": got ", values, " values for shape ",
                 ShapeToString(shape), " (", numel, " elements)");
}

template <typename T>
Tensor FromHost(const std::vector<T>& values, const Shape& shape, DType dtype, Device device) {
  CheckShape(shape, values.size(), "from_vector");
  Tensor host = Tensor::empty(shape, dtype, Device::cpu());
  for (size_t i = 0; i < values.size(); ++i) WriteElement(UncheckedDataPtr(host), dtype, i, static_cast<double>(values[i]));
  return host.to(device);
}

// Concrete, contiguous host copy of `t` (row-major values).
Tensor HostContiguous(const Tensor& t, const std::source_location& loc, const char* why) {
  frontend::Realize(t.impl(), why, loc);
  return t.contiguous().to(Device::cpu());
}

}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  const int64_t numel = CheckedNumel(shape, "empty", DTypeSize(dtype));
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->strides = ContiguousStrides(shape);
  impl->dtype = dtype;
  impl->device = device;
  impl->storage = Storage::Allocate(static_cast<size_t>(numel) * DTypeSize(dtype), device);
  return Tensor(std::move(impl));
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape, Device device) {
  CheckShape(shape, values.size(), "from_vector");
  Tensor host = empty(shape, DType::kFloat32, Device::cpu());
  if (!values.empty()) std::memcpy(UncheckedDataPtr(host), values.data(), values.size() * sizeof(float));
  return host.to(device);
}
Tensor Tensor::from_vector(const std::vector<double>& values, const Shape& shape, DType dtype, Device device) {
  return FromHost(values, shape, dtype, device);
}
Tensor Tensor::FromDoubles(const std::vector<double>& values, const Shape& shape, DType dtype, Device device) {
  return FromHost(values, shape, dtype, device);
}

std::vector<double> Tensor::to_double_vector(std::source_location loc) const {
  Tensor host = HostContiguous(*this, loc, "to_double_vector() called");
  std::vector<double> out(host.numel());
  for (int64_t i = 0; i < host.numel(); ++i) out[i] = ReadElement(host.const_data_ptr(), host.dtype(), i);
  return out;
}

std::vector<float> Tensor::to_vector(std::source_location loc) const {
  Tensor host = HostContiguous(*this, loc, "to_vector() called");
  std::vector<float> out(host.numel());
  if (host.dtype() == DType::kFloat32) {
    if (!out.empty()) std::memcpy(out.data(), host.const_data_ptr(), out.size() * sizeof(float));
  } else {
    for (int64_t i = 0; i < host.numel(); ++i) out[i] = static_cast<float>(ReadElement(host.const_data_ptr(), host.dtype(), i));
  }
  return out;
}

double Tensor::item(std::source_location loc) const {
  FUSEBOX_ENSURE(numel() == 1, "item(): the tensor has ", numel(), " elements (shape ", ShapeToString(shape()),
                 "); item() needs exactly one");
  Tensor host = HostContiguous(*this, loc, "item() called");
  return ReadElement(host.const_data_ptr(), host.dtype(), 0);
}

Tensor::operator bool() const {
  FUSEBOX_ENSURE(numel() == 1, "converting a tensor of ", numel(), " elements (shape ", ShapeToString(shape()),
                 ") to bool is ambiguous; reduce it first, e.g. with sum() or max()");
  frontend::Realize(impl(), "a tensor was converted to bool (branch on its value)", std::source_location::current());
  return item() != 0;
}

const void* Tensor::const_data_ptr() const {
  void* address = UncheckedDataPtr(*this);
  if (impl().storage != nullptr) impl().storage->CheckPending();
  return address;
}

void* Tensor::data_ptr() const {
  const void* address = const_data_ptr();
  if (impl().storage != nullptr) impl().storage->note_escape();
  return const_cast<void*>(address);
}

void* UncheckedDataPtr(const Tensor& t) {
  frontend::Realize(t.impl(), "data_ptr() called", std::source_location::current());
  const TensorImpl& i = t.impl();
  if (i.storage == nullptr) return nullptr;
  return static_cast<char*>(i.storage->data()) + i.offset * DTypeSize(i.dtype);
}

uint64_t Tensor::version() const {
  const TensorImpl& i = impl();
  if (i.storage != nullptr) return i.storage->version();
  // Flushed but not adopted yet: the storage it will adopt.
  if (i.lazy != nullptr && i.lazy->storage != nullptr) return i.lazy->storage->version();
  return 0;
}

bool Tensor::is_lazy() const { return impl().lazy != nullptr && !impl().lazy->realized; }

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  return absl::StrCat("Tensor", ShapeToString(shape()), " ", DTypeName(dtype()), " ", device().str(),
                      is_lazy() ? " (lazy)" : "");
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(undefined)";
  frontend::Realize(t.impl(), "a tensor was printed (operator<<)", std::source_location::current());
  const std::vector<double> values = t.to_double_vector();
  os << "tensor([";
  for (size_t i = 0; i < values.size() && i < 20; ++i) os << (i ? ", " : "") << values[i];
  if (values.size() > 20) os << ", ... (" << values.size() << " values)";
  return os << "], shape=" << ShapeToString(t.shape()) << ", dtype=" << DTypeName(t.dtype())
            << ", device=" << t.device().str() << ")";
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  frontend::Realize(impl(), "to(Device) called", std::source_location::current());
  // A copy exposes the values: a failure still pending for them throws here.
  if (impl().storage != nullptr) impl().storage->CheckPending();
  const Tensor src = contiguous();
  Tensor dst = empty(shape(), dtype(), target);
  const size_t bytes = static_cast<size_t>(numel()) * DTypeSize(dtype());
  if (bytes == 0) return dst;
  auto& driver = cuda::Driver::Get();
  // dst is fresh memory this copy fills; src is only read.
  void* into = UncheckedDataPtr(dst);
  const void* from = src.const_data_ptr();
  if (device().is_cpu() && target.is_cuda()) {
    ThrowIfError(driver.CopyHostToDevice(target.index, reinterpret_cast<CUdeviceptr>(into), from, bytes));
  } else if (device().is_cuda() && target.is_cpu()) {
    ThrowIfError(driver.CopyDeviceToHost(device().index, into, reinterpret_cast<CUdeviceptr>(from), bytes));
  } else {
    // Between two GPUs: through the host (peer copies are not wired up yet).
    return to(Device::cpu()).to(target);
  }
  return dst;
}

}  // namespace fusebox
