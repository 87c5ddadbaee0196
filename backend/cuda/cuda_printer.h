// Kernel IR -> CUDA C++ for NVRTC: one thread per element, 256 threads per
// block, 32-bit index math unless the kernel needs 64. The prelude is a few
// lines of our own (no CUDA headers), which keeps NVRTC fast.
#pragma once

#include <string>

#include "backend/kernel_ir.h"

namespace fusebox::backend {

inline constexpr int kCudaBlockSize = 256;

std::string PrintCuda(const Kernel& kernel);

}  // namespace fusebox::backend
