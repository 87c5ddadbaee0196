// What users see of each compiled kernel: c.kernels() returns these.
#pragma once

#include <cstdint>
#include <string>

namespace fusebox {

struct KernelInfo {
  std::string name;         // "poi_fused_add_mul_pow_tanh_0"
  std::string source;       // CUDA C++ (cuda devices) or C++ (cpu)
  std::string ptx;          // CUDA only; empty on the CPU
  std::string device;       // "cuda:0", "cpu"
  std::string compile_log;  // ptxas -v (registers, spills) or the host compiler's output
  int64_t numel = 0;        // elements (threads / iterations) per launch
};

}  // namespace fusebox
