// Timing for fusebox_bench, per the device method: the cold first call (which
// compiles) is timed apart on the host clock; then warm-up calls, then timed
// trials reported as median and min. On a GPU each trial is bracketed by CUDA
// events on the default stream (where all fusebox work runs); on the CPU by
// std::chrono::steady_clock (CPU kernels run synchronously). Inputs that fit
// in the cache are rotated over several sets, so trials read memory, not cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensor/device.h"

namespace fusebox::bench {

// The H200's L2. driver.h has no call for CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
// yet; PyTorch read 60 MB on the lent H200 (KINDS.md, 2026-10-28).
inline constexpr double kGpuL2Bytes = 60.0 * 1024 * 1024;
// Rotate input sets until the sets together are this many times the cache.
inline constexpr double kRotationFactor = 2.0;
// Zeroed on the GPU before each timed trial (TimeTrialsMs), as do_bench's cache clear.
inline constexpr int64_t kFlushBytes = int64_t{256} << 20;

// FUSEBOX_BENCH_FLUSH=read: the flush before each trial sums the 256 MB
// instead of zeroing them. Zeroing (do_bench's way, the default) leaves
// ~60 MB of dirty lines in the L2 that the timed kernels write back; reading
// leaves none. For A/B runs that show what that write-back costs; the
// JSON's "flush" records the mode and compare_torch.py times PyTorch alike.
bool FlushByReading();
inline constexpr int kMaxInputSets = 1024;

struct Timing {
  double cold_ms = 0;              // first call, host clock, synchronized
  std::vector<double> trials_ms;   // warm trials: ms per call
  double median_ms() const;
  double min_ms() const;
};

struct TimingPlan {
  int warmup = 0;  // untimed calls first
  int trials = 0;
  // 1: each trial times one call (CUDA events on a GPU). More: each trial
  // times this many calls back to back on the host clock, synchronized at
  // the end, and reports ms per call: the whole call's cost on the host.
  int calls_per_trial = 1;
  int max_input_sets = kMaxInputSets;  // --quick keeps it small: set-up time, not cache, dominates there
  // --profile: after the trials, a few compiled calls under fusebox::Profiler
  // (each kernel's device time) and the host time of a call without waiting.
  bool profile = false;
  // --profile: the copy ceiling the profiler's roofline takes, GB/s (read +
  // write), measured in this run; 0: the driver's theoretical bandwidth.
  double copy_ceiling_gbps = 0;
};

// Waits for all work queued on `device`.
void Synchronize(Device device);

// Host-clock time of one call of `fn`, device synchronized before and after.
double TimeOnceMs(Device device, const std::function<void()>& fn);

// Runs `plan`: fn(call) with call = 0, 1, ... over warm-up and trials (use it
// to pick the input set); returns ms per call of each trial.
std::vector<double> TimeTrialsMs(Device device, const TimingPlan& plan, const std::function<void(int call)>& fn);

// The cache rotation must defeat: the GPU's L2, or the CPU's last-level cache
// (sysconf; 32 MiB when it says nothing).
double CacheBytes(Device device);

// How many input sets to rotate over so that they span kRotationFactor times
// `cache_bytes`: 1 when one set (`working_set_bytes`: inputs and output) is
// already that large, at most `max_sets`.
int RotationSets(double working_set_bytes, double cache_bytes, int max_sets);

// "NVIDIA H200" for a GPU (Driver::DeviceName), the CPU's model name for the CPU.
std::string DeviceName(Device device);

// Bytes per second as GB/s (1e9 bytes).
inline double GBps(double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0.0; }

struct CopyResult {
  size_t bytes = 0;  // copied; GB/s counts 2 * bytes (read + write)
  std::vector<double> trials_ms;
  bool ok = true;  // the destination held the source afterwards
  double median_ms() const { return Timing{0, trials_ms}.median_ms(); }
  double min_ms() const { return Timing{0, trials_ms}.min_ms(); }
  double gbps() const { return GBps(2.0 * bytes, median_ms()); }
};

// A `bytes` device-to-device copy (cuMemcpyDtoD) on a GPU, bytes read +
// written counted: the ceiling for every memory-bound kernel.
CopyResult MeasureCopy(Device device, size_t bytes, const TimingPlan& plan);

// The CPU's copy ceiling for --profile's roofline (STREAM-like): `bytes`
// memcpy'd by every core at once, GB/s read + written, the best of a few.
double MeasureHostCopyGBps(size_t bytes);

// The host's floor under a call-overhead row: a compiled call of one kernel
// cannot cost less than launching that kernel. Timed as those rows are
// (batches of `calls_per_trial` launches on the host clock, synchronized,
// per launch): one cuLaunchKernel per call, through fusebox's driver, of a
// copy of `elements` floats (NVRTC-compiled here, 256 threads a block).
// The launch floor differs from host to host far more than the GPU does.
struct LaunchFloorResult {
  int64_t elements = 0;
  int calls_per_trial = 0;
  std::vector<double> trials_ms;  // ms per launch
  bool ok = true;                 // the copy's destination held its source afterwards
  double median_us() const { return 1e3 * Timing{0, trials_ms}.median_ms(); }
};
LaunchFloorResult MeasureLaunchFloor(Device device, int64_t elements, const TimingPlan& plan, int calls_per_trial);

}  // namespace fusebox::bench
