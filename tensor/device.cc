#include "tensor/device.h"

#include "absl/strings/str_cat.h"
#include "backend/cuda/driver.h"
#include "tensor/error.h"

namespace fusebox {

Device Device::default_device() { return cuda_available() ? cuda(0) : cpu(); }

std::string Device::str() const { return is_cpu() ? "cpu" : absl::StrCat("cuda:", index); }

bool cuda_available() { return cuda::Driver::Get().available(); }

void synchronize(Device device) {
  if (!device.is_cuda()) return;
  FUSEBOX_ENSURE(cuda_available(), "synchronize: no usable CUDA device for ", device.str());
  ThrowIfError(cuda::Driver::Get().Synchronize(device.index));
}

}  // namespace fusebox
