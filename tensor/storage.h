// Ref-counted memory on one device. CPU memory is 64-byte aligned; CUDA memory
// comes from the caching allocator and goes back to it when the last tensor
// using it dies. Its version counter (PyTorch's `_version`) counts in-place
// writes, so every view of the memory sees the same count. Memory a CUDA run
// wrote may carry that run's pending error check (tensor/pending_error.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tensor/device.h"
#include "tensor/mutex.h"
#include "tensor/pending_error.h"

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
  // Unique to this allocation for the process's life (an address may be
  // reused once memory is freed; an id never is): with version(), what a
  // plan specialized on these values guards on (fusion::ValueGuard).
  uint64_t id() const { return id_; }
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  // Called once by every in-place op that wrote this memory.
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

  // Whether a writable pointer to this memory was handed out
  // (Tensor::data_ptr()): writes through it bump no version, so no plan may
  // assume these values (fusion::InputValues). The first escape counts as a
  // write, so plans that assumed them before check again.
  bool escaped() const { return escaped_.load(std::memory_order_relaxed); }
  void note_escape() {
    if (!escaped_.exchange(true, std::memory_order_relaxed)) bump_version();
  }

  // Times a Tensor handle viewing this memory was assigned another tensor
  // (Tensor::operator=): replays that read this memory as a tensor from
  // outside their arguments trace again once it changed (frontend/replay.h).
  uint64_t rebinds() const { return rebinds_.load(std::memory_order_relaxed); }
  void note_rebind() { rebinds_.fetch_add(1, std::memory_order_relaxed); }

  // The check a run that wrote this memory left pending (null: none).
  std::shared_ptr<PendingError> pending() const;
  void set_pending(std::shared_ptr<PendingError> pending);
  // Throws the pending failure, if any (waiting for the run); clears a passed check.
  void CheckPending();

 private:
  Storage(void* data, size_t nbytes, Device device);
  void* data_;
  size_t nbytes_;
  Device device_;
  uint64_t id_;
  std::atomic<uint64_t> version_{0};
  std::atomic<uint64_t> rebinds_{0};
  std::atomic<bool> escaped_{false};
  std::atomic<bool> has_pending_{false};  // a lock-free "nothing pending"
  mutable fusebox::Mutex mu_;
  std::shared_ptr<PendingError> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fusebox
