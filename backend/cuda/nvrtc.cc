#include "backend/cuda/nvrtc.h"

#include <nvrtc.h>

#include <chrono>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "tensor/mutex.h"

namespace fusebox::cuda {
namespace {

absl::Status NvrtcError(nvrtcResult result, const char* call, const std::string& name) {
  return absl::InternalError(absl::StrCat(call, " for ", name, " failed: ", nvrtcGetErrorString(result)));
}

// NVRTC's sizes count a trailing NUL for the log and PTX; std::string keeps its own.
void DropTrailingNul(std::string& text) {
  while (!text.empty() && text.back() == '\0') text.pop_back();
}

fusebox::Mutex counters_mu;
NvrtcCounters counters ABSL_GUARDED_BY(counters_mu);

void Count(std::chrono::steady_clock::time_point start) {
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  fusebox::MutexLock lock(&counters_mu);
  if (counters.programs++ == 0) counters.first_ms = ms;
  counters.total_ms += ms;
}

}  // namespace

NvrtcCounters GetNvrtcCounters() {
  fusebox::MutexLock lock(&counters_mu);
  return counters;
}

std::vector<std::string> NvrtcBaseOptions(int arch, bool arch_specific) {
  std::vector<std::string> options = {
      // A real architecture: NVRTC then runs ptxas too, so one compile gives
      // both the PTX and the cubin (checked with NVRTC 13.0 for sm_90).
      absl::StrCat("--gpu-architecture=sm_", arch, arch_specific ? "a" : ""),
      "--std=c++17",
      // Registers, spills and stack frame per kernel, into the program log.
      "-Xptxas=-v",
      // Leaves out texture/surface functions, device-side runtime API and
      // launch, which generated kernels never use; ~20-35% faster compiles.
      "--minimal",
  };
  return options;
}

std::string NvrtcVersion() {
  static const std::string* version = [] {
    int major = 0, minor = 0;
    if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return new std::string("unknown");
    return new std::string(absl::StrCat(major, ".", minor));
  }();
  return *version;
}

absl::StatusOr<NvrtcOutput> CompileWithNvrtc(const std::string& source, const std::string& name, int arch,
                                             const std::vector<std::string>& extra_options, bool arch_specific) {
  const auto start = std::chrono::steady_clock::now();
  absl::Cleanup count = [start] { Count(start); };
  nvrtcProgram program = nullptr;
  std::string file_name = absl::StrCat(name, ".cu");  // how the log names the source
  if (nvrtcResult r = nvrtcCreateProgram(&program, source.c_str(), file_name.c_str(), 0, nullptr, nullptr);
      r != NVRTC_SUCCESS) {
    return NvrtcError(r, "nvrtcCreateProgram", name);
  }
  absl::Cleanup destroy = [&program] { nvrtcDestroyProgram(&program); };

  std::vector<std::string> options = NvrtcBaseOptions(arch, arch_specific);
  options.insert(options.end(), extra_options.begin(), extra_options.end());
  std::vector<const char*> option_ptrs;
  option_ptrs.reserve(options.size());
  for (const std::string& option : options) option_ptrs.push_back(option.c_str());
  nvrtcResult compiled = nvrtcCompileProgram(program, static_cast<int>(option_ptrs.size()), option_ptrs.data());

  NvrtcOutput out;
  size_t size = 0;
  if (nvrtcResult r = nvrtcGetProgramLogSize(program, &size); r != NVRTC_SUCCESS) {
    return NvrtcError(r, "nvrtcGetProgramLogSize", name);
  }
  out.log.resize(size);
  if (nvrtcResult r = nvrtcGetProgramLog(program, out.log.data()); r != NVRTC_SUCCESS) {
    return NvrtcError(r, "nvrtcGetProgramLog", name);
  }
  DropTrailingNul(out.log);
  if (compiled != NVRTC_SUCCESS) {
    return absl::InvalidArgumentError(absl::StrCat("NVRTC failed to compile ", name, ":\n", out.log));
  }

  if (nvrtcResult r = nvrtcGetPTXSize(program, &size); r != NVRTC_SUCCESS) {
    return NvrtcError(r, "nvrtcGetPTXSize", name);
  }
  out.ptx.resize(size);
  if (nvrtcResult r = nvrtcGetPTX(program, out.ptx.data()); r != NVRTC_SUCCESS) {
    return NvrtcError(r, "nvrtcGetPTX", name);
  }
  DropTrailingNul(out.ptx);

  // Size 0 when an extra option asked for a virtual architecture (compute_XX).
  if (nvrtcResult r = nvrtcGetCUBINSize(program, &size); r != NVRTC_SUCCESS) {
    return NvrtcError(r, "nvrtcGetCUBINSize", name);
  }
  out.cubin.resize(size);
  if (size > 0) {
    if (nvrtcResult r = nvrtcGetCUBIN(program, out.cubin.data()); r != NVRTC_SUCCESS) {
      return NvrtcError(r, "nvrtcGetCUBIN", name);
    }
  }
  return out;
}

}  // namespace fusebox::cuda
