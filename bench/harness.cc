#include "bench/harness.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/nvrtc.h"
#include "frontend/fusebox.h"
#include "tensor/error.h"

namespace fusebox::bench {
namespace {

double HostMsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (absl::StartsWith(line, "model name")) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  return "unknown CPU";
}

}  // namespace

double Timing::median_ms() const {
  if (trials_ms.empty()) return 0;
  std::vector<double> sorted = trials_ms;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

double Timing::min_ms() const {
  return trials_ms.empty() ? 0 : *std::min_element(trials_ms.begin(), trials_ms.end());
}

void Synchronize(Device device) {
  if (device.is_cuda()) ThrowIfError(cuda::Driver::Get().Synchronize(device.index));
}

double TimeOnceMs(Device device, const std::function<void()>& fn) {
  Synchronize(device);
  const auto start = std::chrono::steady_clock::now();
  fn();
  Synchronize(device);
  return HostMsSince(start);
}

bool FlushByReading() {
  static const bool by_reading = [] {
    const char* mode = std::getenv("FUSEBOX_BENCH_FLUSH");
    return mode != nullptr && std::string_view(mode) == "read";
  }();
  return by_reading;
}

std::vector<double> TimeTrialsMs(Device device, const TimingPlan& plan, const std::function<void(int call)>& fn) {
  int call = 0;
  for (; call < plan.warmup; ++call) fn(call);
  Synchronize(device);
  std::vector<double> times;
  times.reserve(plan.trials);
  if (device.is_cuda() && plan.calls_per_trial == 1) {
    cuda::Driver& driver = cuda::Driver::Get();
    CUevent start = ValueOrThrow(driver.CreateEvent(device.index));
    CUevent end = ValueOrThrow(driver.CreateEvent(device.index));
    // Before each trial the GPU zeroes 256 MB, as triton.testing.do_bench
    // does: that evicts the L2 and keeps the GPU busy while the host launches
    // the call, so the events time the call's kernels, not the host's launch
    // path (the call-overhead row measures that).
    const bool flush_by_reading = FlushByReading();
    const Tensor flush = Tensor::empty({kFlushBytes / 4}, flush_by_reading ? DType::kFloat32 : DType::kInt32, device);
    if (flush_by_reading) flush.zero_();  // defined values to sum
    for (int i = 0; i < plan.trials; ++i) {
      if (flush_by_reading) {
        (void)sum(flush);
      } else {
        flush.zero_();
      }
      ThrowIfError(driver.RecordEvent(device.index, start));
      fn(call++);
      ThrowIfError(driver.RecordEvent(device.index, end));
      times.push_back(ValueOrThrow(driver.ElapsedMs(start, end)));  // waits for `end`
    }
    driver.DestroyEvent(start);
    driver.DestroyEvent(end);
  } else {
    for (int i = 0; i < plan.trials; ++i) {
      const auto start = std::chrono::steady_clock::now();
      for (int k = 0; k < plan.calls_per_trial; ++k) fn(call++);
      Synchronize(device);
      times.push_back(HostMsSince(start) / plan.calls_per_trial);
    }
  }
  return times;
}

double CacheBytes(Device device) {
  if (device.is_cuda()) return kGpuL2Bytes;
  const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return llc > 0 ? static_cast<double>(llc) : 32.0 * 1024 * 1024;
}

int RotationSets(double working_set_bytes, double cache_bytes, int max_sets) {
  if (working_set_bytes <= 0) return std::max(1, max_sets);
  const double sets = std::ceil(kRotationFactor * cache_bytes / working_set_bytes);
  return static_cast<int>(std::clamp(sets, 1.0, static_cast<double>(std::max(1, max_sets))));
}

std::string DeviceName(Device device) {
  if (device.is_cuda()) return ValueOrThrow(cuda::Driver::Get().DeviceName(device.index));
  return absl::StrCat(CpuModelName(), " (", std::thread::hardware_concurrency(), " threads)");
}

CopyResult MeasureCopy(Device device, size_t bytes, const TimingPlan& plan) {
  cuda::Driver& driver = cuda::Driver::Get();
  CopyResult r;
  r.bytes = bytes;
  const CUdeviceptr src = ValueOrThrow(driver.MemAlloc(device.index, bytes));
  const CUdeviceptr dst = ValueOrThrow(driver.MemAlloc(device.index, bytes));
  {
    std::vector<uint32_t> pattern(bytes / sizeof(uint32_t));
    for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint32_t>(i * 2654435761u);
    ThrowIfError(driver.CopyHostToDevice(device.index, src, pattern.data(), bytes));
  }
  r.trials_ms = TimeTrialsMs(device, plan,
                             [&](int) { ThrowIfError(driver.CopyDeviceToDevice(device.index, dst, src, bytes)); });
  // The copy must have happened: compare the last 4 KiB.
  std::vector<uint32_t> tail(1024);
  ThrowIfError(driver.CopyDeviceToHost(device.index, tail.data(), dst + bytes - 4096, 4096));
  const size_t first = (bytes - 4096) / sizeof(uint32_t);
  for (size_t i = 0; i < tail.size(); ++i) {
    if (tail[i] != static_cast<uint32_t>((first + i) * 2654435761u)) r.ok = false;
  }
  ThrowIfError(driver.MemFree(device.index, src));
  ThrowIfError(driver.MemFree(device.index, dst));
  return r;
}

double MeasureHostCopyGBps(size_t bytes) {
  const size_t threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const size_t chunk = (bytes + threads - 1) / threads;
  double best_s = 0;
  for (int trial = 0; trial < 5; ++trial) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads && t * chunk < bytes; ++t) {
      pool.emplace_back([&, t] { std::memcpy(dst.data() + t * chunk, src.data() + t * chunk, std::min(chunk, bytes - t * chunk)); });
    }
    for (std::thread& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (trial == 0 || s < best_s) best_s = s;
  }
  FUSEBOX_CHECK(dst[bytes - 1] == 1, "the host copy did not happen");
  return 2.0 * static_cast<double>(bytes) / best_s / 1e9;
}

LaunchFloorResult MeasureLaunchFloor(Device device, int64_t elements, const TimingPlan& plan, int calls_per_trial) {
  FUSEBOX_CHECK(device.is_cuda(), "the launch floor is measured on a GPU");
  cuda::Driver& driver = cuda::Driver::Get();
  const std::string source =
      "extern \"C\" __global__ void fb_launch_floor(const float* __restrict__ x, float* __restrict__ y, long long n) {\n"
      "  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
      "  if (i < n) y[i] = x[i];\n"
      "}\n";
  const int arch = ValueOrThrow(driver.ComputeCapability(device.index));
  const cuda::NvrtcOutput compiled = ValueOrThrow(cuda::CompileWithNvrtc(source, "fb_launch_floor", arch));
  const CUmodule module = ValueOrThrow(driver.LoadModule(device.index, compiled.cubin));
  const CUfunction function = ValueOrThrow(driver.GetFunction(module, "fb_launch_floor"));

  LaunchFloorResult r;
  r.elements = elements;
  r.calls_per_trial = calls_per_trial;
  const size_t bytes = static_cast<size_t>(elements) * sizeof(float);
  CUdeviceptr x = ValueOrThrow(driver.MemAlloc(device.index, bytes));
  CUdeviceptr y = ValueOrThrow(driver.MemAlloc(device.index, bytes));
  std::vector<float> values(elements);
  for (int64_t i = 0; i < elements; ++i) values[i] = static_cast<float>(i % 977) - 488.5f;
  ThrowIfError(driver.CopyHostToDevice(device.index, x, values.data(), bytes));
  long long n = elements;
  void* args[] = {&x, &y, &n};
  cuda::LaunchDims dims;
  dims.grid_x = static_cast<unsigned>((elements + 255) / 256);
  dims.block_x = 256;
  TimingPlan batches = plan;
  batches.calls_per_trial = calls_per_trial;
  r.trials_ms = TimeTrialsMs(device, batches, [&](int) { ThrowIfError(driver.Launch(device.index, function, dims, args)); });
  std::vector<float> copied(elements);
  ThrowIfError(driver.CopyDeviceToHost(device.index, copied.data(), y, bytes));
  r.ok = copied == values;
  ThrowIfError(driver.MemFree(device.index, x));
  ThrowIfError(driver.MemFree(device.index, y));
  return r;
}

}  // namespace fusebox::bench
