#include "tensor/creation.h"

#include <cstring>

namespace fusebox {
namespace {

// Fills a host buffer of `dtype` from `value(i)`, then moves it to `device`.
template <typename F>
Tensor Generate(const char* op, const Shape& shape, Device device, DType dtype, F value) {
  CheckedNumel(shape, op, DTypeSize(dtype));
  Tensor host = Tensor::empty(shape, dtype, Device::cpu());
  void* data = host.data_ptr();
  const int64_t n = host.numel();
  for (int64_t i = 0; i < n; ++i) WriteElement(data, dtype, i, value(i));
  return host.to(device);
}

}  // namespace

Tensor zeros(const Shape& shape, Device device, DType dtype) {
  return Generate("zeros", shape, device, dtype, [](int64_t) { return 0.0; });
}
Tensor ones(const Shape& shape, Device device, DType dtype) {
  return Generate("ones", shape, device, dtype, [](int64_t) { return 1.0; });
}

Tensor full(const Shape& shape, double value, Device device, DType dtype) {
  return Generate("full", shape, device, dtype, [&](int64_t) { return value; });
}

Tensor arange(int64_t n, Device device, DType dtype) {
  FUSEBOX_ENSURE(n >= 0, "arange: n must be >= 0, got ", n);
  return Generate("arange", {n}, device, dtype, [](int64_t i) { return static_cast<double>(i); });
}

Tensor arange(int64_t start, int64_t end, int64_t step, Device device, DType dtype) {
  FUSEBOX_ENSURE(step != 0, "arange: step must be nonzero");
  FUSEBOX_ENSURE((step > 0 && start <= end) || (step < 0 && start >= end), "arange: upper bound and larger bound ",
                 "inconsistent with step sign: start ", start, ", end ", end, ", step ", step);
  // ceil((end - start) / step) without overflow in the difference.
  const __int128 span = static_cast<__int128>(end) - start;
  const __int128 n = (span + step + (step > 0 ? -1 : 1)) / step;
  return Generate("arange", {static_cast<int64_t>(n)}, device, dtype,
                  [&](int64_t i) { return static_cast<double>(start + i * step); });
}

}  // namespace fusebox
