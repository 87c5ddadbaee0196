#include "tensor/storage.h"

#include <cstdlib>

#include "backend/cuda/caching_allocator.h"
#include "tensor/error.h"

namespace fusebox {

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

Storage::~Storage() {
  if (device_.is_cpu()) {
    std::free(data_);
  } else {
    cuda::CachingAllocator::ForDevice(device_.index).Free(data_);
  }
}

}  // namespace fusebox
