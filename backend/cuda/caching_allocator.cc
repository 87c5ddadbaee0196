#include "backend/cuda/caching_allocator.h"

#include <cstdint>
#include <map>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "tensor/mutex.h"
#include "backend/cuda/driver.h"
#include "spdlog/spdlog.h"

namespace fusebox::cuda {
namespace {

constexpr size_t kSmallGranularity = 512;
constexpr size_t kLargeGranularity = size_t{2} << 20;  // 2 MiB
constexpr size_t kSmallLimit = size_t{1} << 20;        // requests up to 1 MiB are "small"

size_t RoundUp(size_t bytes, size_t granularity) { return (bytes + granularity - 1) / granularity * granularity; }

size_t RoundSize(size_t bytes) {
  return bytes <= kSmallLimit ? RoundUp(bytes, kSmallGranularity) : RoundUp(bytes, kLargeGranularity);
}

// Blocks are never split, so a reused block wastes its surplus until freed.
// Small blocks may be up to twice the request (their waste is cheap); large
// ones at most a quarter more.
size_t MaxReusableSize(size_t rounded) { return rounded <= kSmallLimit ? 2 * rounded : rounded + rounded / 4; }

void* ToPointer(CUdeviceptr ptr) { return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr)); }
CUdeviceptr ToDevicePtr(void* ptr) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr)); }

}  // namespace

struct CachingAllocator::Impl {
  explicit Impl(int device) : device(device) {}

  const int device;
  mutable fusebox::Mutex mu;
  std::multimap<size_t, CUdeviceptr> free_blocks ABSL_GUARDED_BY(mu);       // size -> block
  absl::flat_hash_map<CUdeviceptr, size_t> in_use ABSL_GUARDED_BY(mu);      // block -> size
  AllocatorStats stats ABSL_GUARDED_BY(mu);

  // Takes the smallest pooled block of at least `rounded` bytes and at most
  // `max_size`; 0 when none fits.
  CUdeviceptr TakeCached(size_t rounded, size_t max_size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = free_blocks.lower_bound(rounded);
    if (it == free_blocks.end() || it->first > max_size) return 0;
    CUdeviceptr ptr = it->second;
    size_t size = it->first;
    free_blocks.erase(it);
    stats.bytes_cached -= size;
    stats.cache_hits += 1;
    in_use.emplace(ptr, size);
    stats.bytes_in_use += size;
    return ptr;
  }

  void ReleaseCached() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (const auto& [size, ptr] : free_blocks) {
      // A failing free here means the context is broken; keep going so the
      // pool's accounting stays right.
      if (absl::Status s = Driver::Get().MemFree(device, ptr); !s.ok()) spdlog::warn("{}", s.ToString());
      stats.bytes_cached -= size;
    }
    free_blocks.clear();
  }
};

CachingAllocator& CachingAllocator::ForDevice(int device) {
  // Allocators live for the whole process: tensors freed during static
  // destruction still return their blocks here.
  static fusebox::Mutex mu;
  static auto* allocators = new std::map<int, std::unique_ptr<CachingAllocator>>();
  fusebox::MutexLock lock(&mu);
  std::unique_ptr<CachingAllocator>& allocator = (*allocators)[device];
  if (allocator == nullptr) allocator.reset(new CachingAllocator(device));
  return *allocator;
}

CachingAllocator::CachingAllocator(int device) : impl_(new Impl(device)) {}

absl::StatusOr<void*> CachingAllocator::Allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  size_t rounded = RoundSize(bytes);
  fusebox::MutexLock lock(&impl_->mu);
  if (CUdeviceptr ptr = impl_->TakeCached(rounded, MaxReusableSize(rounded))) return ToPointer(ptr);

  absl::StatusOr<CUdeviceptr> ptr = Driver::Get().MemAlloc(impl_->device, rounded);
  if (absl::IsResourceExhausted(ptr.status()) && !impl_->free_blocks.empty()) {
    // Under memory pressure a wasteful fit beats failing; then give the whole
    // pool back so the driver can find one contiguous range.
    if (CUdeviceptr cached = impl_->TakeCached(rounded, SIZE_MAX)) return ToPointer(cached);
    spdlog::debug("cuda:{} out of memory for {} bytes; releasing {} cached bytes and retrying", impl_->device,
                  rounded, impl_->stats.bytes_cached);
    impl_->ReleaseCached();
    ptr = Driver::Get().MemAlloc(impl_->device, rounded);
  }
  if (!ptr.ok()) return ptr.status();
  impl_->stats.driver_allocations += 1;
  impl_->stats.bytes_in_use += rounded;
  impl_->in_use.emplace(*ptr, rounded);
  return ToPointer(*ptr);
}

void CachingAllocator::Free(void* ptr) {
  if (ptr == nullptr) return;
  fusebox::MutexLock lock(&impl_->mu);
  auto it = impl_->in_use.find(ToDevicePtr(ptr));
  if (it == impl_->in_use.end()) {
    // Not ours, or freed twice: a fusebox bug. Free runs from destructors, so
    // it logs instead of throwing.
    spdlog::error("CachingAllocator(cuda:{}): Free of unknown pointer {}", impl_->device, ptr);
    return;
  }
  size_t size = it->second;
  impl_->in_use.erase(it);
  impl_->stats.bytes_in_use -= size;
  impl_->free_blocks.emplace(size, ToDevicePtr(ptr));
  impl_->stats.bytes_cached += size;
}

void CachingAllocator::EmptyCache() {
  fusebox::MutexLock lock(&impl_->mu);
  impl_->ReleaseCached();
}

AllocatorStats CachingAllocator::stats() const {
  fusebox::MutexLock lock(&impl_->mu);
  return impl_->stats;
}

}  // namespace fusebox::cuda
