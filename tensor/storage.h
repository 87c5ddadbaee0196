// Ref-counted memory on one device. CPU memory is 64-byte aligned; CUDA memory
// comes from the caching allocator and goes back to it when the last tensor
// using it dies. Its version counter (PyTorch's `_version`) counts in-place
// writes, so every view of the memory sees the same count.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tensor/device.h"

namespace fusebox {

class Storage {
 public:
  // Throws fusebox::Error when the device has no memory left or is unusable.
  static std::shared_ptr<Storage> Allocate(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  // Called once by every in-place op that wrote this memory.
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  Storage(void* data, size_t nbytes, Device device) : data_(data), nbytes_(nbytes), device_(device) {}
  void* data_;
  size_t nbytes_;
  Device device_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace fusebox
