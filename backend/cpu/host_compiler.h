// C++ source -> shared object with the host compiler ($CXX, else c++), through
// the compile cache, then dlopen. A failure carries the compiler's log and the
// path of the source it compiled.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/cpu/cpp_printer.h"

namespace fusebox::backend::cpu {

// A loaded kernel; the shared object stays open for the process lifetime.
struct LoadedCpuKernel {
  CpuKernelFn fn = nullptr;
  std::string so_path;
  bool compiled = false;  // false when it came from the cache
};

absl::StatusOr<LoadedCpuKernel> CompileCpuKernel(const std::string& source, const std::string& name);

// The compiler and its flags as run (argv, no shell), and the same joined by
// spaces ("$CXX -O3 ..."), which is part of every cache key.
std::vector<std::string> HostCompilerArgs();
std::string HostCompilerCommand();

}  // namespace fusebox::backend::cpu
