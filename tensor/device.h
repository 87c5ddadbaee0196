// Where a tensor lives. Device::default_device() is the first CUDA device when
// one is usable, else the CPU.
#pragma once

#include <string>

namespace fusebox {

enum class DeviceType { kCPU, kCUDA };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  static Device cpu() { return Device{DeviceType::kCPU, 0}; }
  static Device cuda(int index = 0) { return Device{DeviceType::kCUDA, index}; }
  static Device default_device();

  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  std::string str() const;  // "cpu", "cuda:0"
  friend bool operator==(const Device&, const Device&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const Device& d) {
    return H::combine(std::move(h), d.type, d.index);
  }
};

// True when the CUDA driver loads and reports at least one device.
bool cuda_available();

// Waits until every kernel and copy queued on `device` has finished (as
// torch.cuda.synchronize); the CPU runs its kernels at once, so there it
// returns. Use it before reading a host clock around CUDA work.
void synchronize(Device device = Device::default_device());

}  // namespace fusebox
