#include "bench/harness.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "backend/cuda/driver.h"
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

std::vector<double> TimeTrialsMs(Device device, int warmup, int trials, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  Synchronize(device);
  std::vector<double> times;
  times.reserve(trials);
  if (device.is_cuda()) {
    cuda::Driver& driver = cuda::Driver::Get();
    CUevent start = ValueOrThrow(driver.CreateEvent(device.index));
    CUevent end = ValueOrThrow(driver.CreateEvent(device.index));
    for (int i = 0; i < trials; ++i) {
      ThrowIfError(driver.RecordEvent(device.index, start));
      fn();
      ThrowIfError(driver.RecordEvent(device.index, end));
      times.push_back(ValueOrThrow(driver.ElapsedMs(start, end)));  // waits for `end`
    }
    driver.DestroyEvent(start);
    driver.DestroyEvent(end);
  } else {
    for (int i = 0; i < trials; ++i) {
      const auto start = std::chrono::steady_clock::now();
      fn();
      times.push_back(HostMsSince(start));
    }
  }
  return times;
}

std::string DeviceName(Device device) {
  if (device.is_cuda()) return ValueOrThrow(cuda::Driver::Get().DeviceName(device.index));
  return absl::StrCat(CpuModelName(), " (", std::thread::hardware_concurrency(), " threads)");
}

}  // namespace fusebox::bench
