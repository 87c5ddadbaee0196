// Timing for fusebox_bench, per the device method: the cold first call (which
// compiles) is timed apart on the host clock; then warm-up calls, then timed
// trials reported as median and min. On a GPU each trial is bracketed by CUDA
// events on the default stream (where all fusebox work runs); on the CPU by
// std::chrono::steady_clock (CPU kernels run synchronously).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tensor/device.h"

namespace fusebox::bench {

struct Timing {
  double cold_ms = 0;              // first call, host clock, synchronized
  std::vector<double> trials_ms;   // warm calls, one per trial
  double median_ms() const;
  double min_ms() const;
};

// Waits for all work queued on `device`.
void Synchronize(Device device);

// Host-clock time of one call of `fn`, device synchronized before and after.
double TimeOnceMs(Device device, const std::function<void()>& fn);

// Calls `fn` `warmup` times untimed, then `trials` times, each timed alone.
std::vector<double> TimeTrialsMs(Device device, int warmup, int trials, const std::function<void()>& fn);

// "NVIDIA H200" for a GPU (Driver::DeviceName), the CPU's model name for the CPU.
std::string DeviceName(Device device);

// Bytes per second as GB/s (1e9 bytes).
inline double GBps(double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0.0; }

}  // namespace fusebox::bench
