#include "tensor/creation.h"

#include <cstring>

#include "frontend/capture.h"
#include "frontend/ops.h"
#include "frontend/random.h"

namespace fusebox {
namespace {

// Under compile() a factory is part of the graph (as torch.compile traces
// torch.ones): a constant or a position its consumers compute in their own
// kernels. Made on the host instead, each call would fill a buffer element
// by element and copy it to the device (SDPA's causal mask: ones(T, T)
// per layer cost 32 ms of host time per GPT-2 forward, the GPU waiting).
bool Capturing(const char* op, const Shape& shape, DType dtype) {
  return frontend::CaptureSession::Current() != nullptr && CheckedNumel(shape, op, DTypeSize(dtype)) > 0;
}

Tensor CapturedConstant(const char* op, const Shape& shape, double value, Device device, DType dtype) {
  frontend::OpRecorder recorder;
  recorder.session().UseDevice(device, op);
  return recorder.Finish(recorder.session().Constant(value, dtype, shape), device, op);
}

// Fills a host buffer of `dtype` from `value(i)`, then moves it to `device`.
template <typename F>
Tensor Generate(const char* op, const Shape& shape, Device device, DType dtype, F value) {
  CheckedNumel(shape, op, DTypeSize(dtype));
  Tensor host = Tensor::empty(shape, dtype, Device::cpu());
  void* data = UncheckedDataPtr(host);  // fresh memory, filled here
  const int64_t n = host.numel();
  for (int64_t i = 0; i < n; ++i) WriteElement(data, dtype, i, value(i));
  return host.to(device);
}

// Every element `value`: a graph constant under compile(), else a host fill.
Tensor Fill(const char* op, const Shape& shape, double value, Device device, DType dtype) {
  if (Capturing(op, shape, dtype)) return CapturedConstant(op, shape, value, device, dtype);
  return Generate(op, shape, device, dtype, [value](int64_t) { return value; });
}

}  // namespace

Tensor zeros(const Shape& shape, Device device, DType dtype) { return Fill("zeros", shape, 0.0, device, dtype); }
Tensor ones(const Shape& shape, Device device, DType dtype) { return Fill("ones", shape, 1.0, device, dtype); }
Tensor full(const Shape& shape, double value, Device device, DType dtype) {
  return Fill("full", shape, value, device, dtype);
}

Tensor arange(int64_t n, Device device, DType dtype) {
  FUSEBOX_ENSURE(n >= 0, "arange: n must be >= 0, got ", n);
  if (Capturing("arange", {n}, dtype)) return frontend::Iota({n}, device).to(dtype);
  return Generate("arange", {n}, device, dtype, [](int64_t i) { return static_cast<double>(i); });
}

Tensor arange(int64_t start, int64_t end, int64_t step, Device device, DType dtype) {
  FUSEBOX_ENSURE(step != 0, "arange: step must be nonzero");
  FUSEBOX_ENSURE((step > 0 && start <= end) || (step < 0 && start >= end), "arange: upper bound and larger bound ",
                 "inconsistent with step sign: start ", start, ", end ", end, ", step ", step);
  // ceil((end - start) / step) without overflow in the difference.
  const __int128 span = static_cast<__int128>(end) - start;
  const __int128 n = (span + step + (step > 0 ? -1 : 1)) / step;
  if (Capturing("arange", {static_cast<int64_t>(n)}, dtype)) {
    // In int64 (a double scalar would promote to float32 and round).
    auto value = [&](int64_t v) { return CapturedConstant("arange", {}, static_cast<double>(v), device, DType::kInt64); };
    Tensor positions = frontend::Iota({static_cast<int64_t>(n)}, device);
    if (step != 1) positions = positions * value(step);
    if (start != 0) positions = positions + value(start);
    return positions.to(dtype);
  }
  return Generate("arange", {static_cast<int64_t>(n)}, device, dtype,
                  [&](int64_t i) { return static_cast<double>(start + i * step); });
}

}  // namespace fusebox
