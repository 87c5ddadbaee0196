// CUDA C++ -> PTX + cubin with NVRTC. Needs no GPU, so CI compiles every
// generated kernel for sm_90 on a machine without one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fusebox::cuda {

struct NvrtcOutput {
  std::string ptx;
  std::string cubin;
  std::string log;  // compiler + ptxas (-Xptxas=-v: registers, spills, smem)
};

// Compiles `source` for sm_<arch> (e.g. 90), or sm_<arch>a when
// `arch_specific` (wgmma and the other features of that one architecture;
// the cubin then loads on it alone). On failure the status message holds the
// NVRTC log. `name` is only used for diagnostics.
absl::StatusOr<NvrtcOutput> CompileWithNvrtc(const std::string& source, const std::string& name,
                                             int arch, const std::vector<std::string>& extra_options = {},
                                             bool arch_specific = false);

// "13.0": part of every compile-cache key.
std::string NvrtcVersion();

// The options every compile uses (also part of the cache key).
std::vector<std::string> NvrtcBaseOptions(int arch, bool arch_specific = false);

// NVRTC programs compiled by this process and the time they took (create to
// cubin): the benchmark splits compile latency with it, and a warm start
// (every kernel from the disk cache) must leave `programs` at 0.
struct NvrtcCounters {
  int64_t programs = 0;
  double total_ms = 0;
  double first_ms = 0;  // the process's first program: NVRTC's one-time start is in it
};
NvrtcCounters GetNvrtcCounters();

}  // namespace fusebox::cuda
