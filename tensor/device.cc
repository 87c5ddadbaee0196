#include "tensor/device.h"

#include "absl/strings/str_cat.h"
#include "backend/cuda/driver.h"

namespace fusebox {

Device Device::default_device() { return cuda_available() ? cuda(0) : cpu(); }

std::string Device::str() const { return is_cpu() ? "cpu" : absl::StrCat("cuda:", index); }

bool cuda_available() { return cuda::Driver::Get().available(); }

}  // namespace fusebox
