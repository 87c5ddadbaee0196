// The profiler's roofline: a device's copy ceiling and math peaks, read from
// the driver (clocks, bus width, SM count, compute capability) rather than
// one GPU's constants, and the time a kernel's minimal bytes and FLOPs need
// at them.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backend/cuda/driver.h"
#include "profiler/profiler.h"

namespace fusebox {
namespace {

// What one SM does per clock: dense bf16/f16 tensor-core FLOPs (f32
// accumulate) and f32 lanes, by compute capability; 0 where unknown.
struct PerSm {
  int tensor16 = 0;
  int f32_lanes = 0;
};

PerSm PerSmPerClock(int capability) {
  if (capability >= 100 && capability < 110) return {8192, 128};  // B200
  if (capability >= 120) return {512, 128};                        // GeForce Blackwell
  switch (capability) {
    case 90: return {4096, 128};                        // H100, H200
    case 89: return {512, 128};                         // Ada (L40, RTX 40)
    case 86: case 87: return {1024, 128};               // A10, Orin
    case 80: return {2048, 64};                         // A100
    case 70: case 72: case 75: return {1024, 64};       // V100, T4
    default: return {0, 0};
  }
}

std::string Rate(double per_s, const char* unit) {
  if (per_s >= 1e12) return absl::StrFormat("%.1f T%s/s", per_s / 1e12, unit);
  if (per_s >= 1e9) return absl::StrFormat("%.1f G%s/s", per_s / 1e9, unit);
  return absl::StrFormat("%.3g %s/s", per_s, unit);
}

}  // namespace

double Roofline::peak(MathPeak math) const {
  switch (math) {
    case MathPeak::kTensor16: return tensor16_flops_per_s;
    case MathPeak::kTF32: return tf32_flops_per_s;
    case MathPeak::kFloat32: return f32_flops_per_s;
  }
  return 0;
}

double Roofline::seconds(const KernelCost& cost) const {
  if (!known()) return 0;
  const double peak_flops = peak(cost.math);
  const double math_s = peak_flops > 0 ? static_cast<double>(cost.flops) / peak_flops : 0;
  return std::max(static_cast<double>(cost.bytes) / copy_bytes_per_s, math_s);
}

std::string Roofline::ToString() const {
  if (!known()) return "none";
  std::string out = absl::StrFormat("copy %.0f GB/s", copy_bytes_per_s / 1e9);
  if (tensor16_flops_per_s > 0) absl::StrAppend(&out, ", bf16/f16 ", Rate(tensor16_flops_per_s, "FLOP"));
  if (tf32_flops_per_s > 0) absl::StrAppend(&out, ", tf32 ", Rate(tf32_flops_per_s, "FLOP"));
  if (f32_flops_per_s > 0) absl::StrAppend(&out, ", f32 ", Rate(f32_flops_per_s, "FLOP"));
  return out;
}

Roofline DeviceRoofline(Device device) {
  if (!device.is_cuda()) return {};
  cuda::Driver& driver = cuda::Driver::Get();
  if (!driver.available()) return {};
  auto attribute = [&](CUdevice_attribute a) {
    absl::StatusOr<int> v = driver.DeviceAttribute(device.index, a);
    return v.ok() ? static_cast<double>(*v) : 0.0;
  };
  const double memory_khz = attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  const double bus_bits = attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  const double sms = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  const double clock_hz = 1e3 * attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  absl::StatusOr<int> capability = driver.ComputeCapability(device.index);
  const PerSm per_sm = PerSmPerClock(capability.ok() ? *capability : 0);
  Roofline r;
  r.copy_bytes_per_s = 2 * memory_khz * 1e3 * bus_bits / 8;  // double data rate
  r.tensor16_flops_per_s = sms * clock_hz * per_sm.tensor16;
  r.tf32_flops_per_s = capability.ok() && *capability >= 80 ? r.tensor16_flops_per_s / 2 : 0;
  r.f32_flops_per_s = sms * clock_hz * 2 * per_sm.f32_lanes;
  return r;
}

}  // namespace fusebox
