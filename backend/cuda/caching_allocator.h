// A caching allocator for CUDA memory, like PyTorch's: freed blocks go back to
// a per-device pool and are reused by later allocations of a fitting size
// instead of being returned to the driver each time (cuMemAlloc/cuMemFree
// synchronize the device and cost tens of microseconds). Reuse is safe because
// all fusebox work runs in order on one stream per device.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

namespace fusebox::cuda {

struct AllocatorStats {
  int64_t bytes_in_use = 0;        // handed out and not yet freed
  int64_t bytes_cached = 0;        // held in the pool, free for reuse
  int64_t driver_allocations = 0;  // cuMemAlloc calls
  int64_t cache_hits = 0;          // allocations served from the pool
};

class CachingAllocator {
 public:
  // One allocator per device, created on first use.
  static CachingAllocator& ForDevice(int device);

  // Sizes are rounded up (512 B granularity for small blocks, 2 MiB for large
  // ones); a cached block is reused when it is at least the rounded size and not
  // wastefully larger. When the driver is out of memory the pool is released
  // and the allocation retried once. Zero bytes returns a null pointer.
  absl::StatusOr<void*> Allocate(size_t bytes);
  void Free(void* ptr);   // returns the block to the pool; null is ignored
  void EmptyCache();      // returns every pooled block to the driver
  AllocatorStats stats() const;

 private:
  explicit CachingAllocator(int device);
  struct Impl;
  Impl* impl_;
};

}  // namespace fusebox::cuda
