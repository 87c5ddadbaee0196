#include "tensor/storage.h"

#include <cstdlib>

#include "backend/cuda/caching_allocator.h"
#include "tensor/error.h"

namespace fusebox {

Storage::Storage(void* data, size_t nbytes, Device device) : data_(data), nbytes_(nbytes), device_(device) {
  static std::atomic<uint64_t> next_id{1};
  id_ = next_id.fetch_add(1, std::memory_order_relaxed);
}

std::shared_ptr<Storage> Storage::Allocate(size_t nbytes, Device device) {
  void* data = nullptr;
  if (device.is_cpu()) {
    if (nbytes > 0) {
      data = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
      FUSEBOX_ENSURE(data != nullptr, "out of CPU memory allocating ", nbytes, " bytes");
    }
  } else {
    FUSEBOX_ENSURE(cuda_available(), "cannot allocate on ", device.str(),
                   ": no usable CUDA device (", "use Device::cpu() or Device::default_device())");
    data = ValueOrThrow(cuda::CachingAllocator::ForDevice(device.index).Allocate(nbytes));
  }
  return std::shared_ptr<Storage>(new Storage(data, nbytes, device));
}

std::shared_ptr<PendingError> Storage::pending() const {
  if (!has_pending_.load(std::memory_order_acquire)) return nullptr;
  fusebox::MutexLock lock(&mu_);
  return pending_;
}

void Storage::set_pending(std::shared_ptr<PendingError> pending) {
  fusebox::MutexLock lock(&mu_);
  has_pending_.store(pending != nullptr, std::memory_order_release);
  pending_ = std::move(pending);
}

void Storage::CheckPending() {
  std::shared_ptr<PendingError> pending = this->pending();
  if (pending == nullptr) return;
  pending->Check();  // throws while it stays failed
  fusebox::MutexLock lock(&mu_);
  if (pending_ == pending) {
    pending_ = nullptr;
    has_pending_.store(false, std::memory_order_release);
  }
}

Storage::~Storage() {
  if (device_.is_cpu()) {
    std::free(data_);
  } else {
    cuda::CachingAllocator::ForDevice(device_.index).Free(data_);
  }
}

}  // namespace fusebox
