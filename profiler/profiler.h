// fusebox::Profiler: while one is alive, every graph run (eager op or compiled
// graph) and every kernel it launches, on the CPU and on CUDA, is recorded with
// its name, input shapes, CPU time, device time (CUDA events) and launch count.
// table() prints the torch.profiler-style summary, export_chrome_trace() writes
// a trace Perfetto opens. Every kernel carries its minimal bytes and FLOPs, so
// table() and worst() hold it to the device's roofline (copy ceiling, math
// peaks). Without a live profiler, recording costs one relaxed atomic load per
// graph run and per kernel.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/device.h"
#include "tensor/shape.h"

namespace fusebox {

namespace profiler {
class Session;
}

// The math peak a kernel's FLOPs are held to: dense bf16/f16 tensor cores,
// TF32 tensor cores (f32 GEMMs with set_matmul_allow_tf32), or plain f32
// units (every generated kernel, f32 GEMMs otherwise).
enum class MathPeak { kFloat32, kTF32, kTensor16 };

// What one launch of a kernel must do at least: its minimal bytes (every
// buffer it reads once, every buffer it writes once, at their dtypes) and
// FLOPs (GEMMs: 2 * m * n * k * batch; generated kernels: the elements they
// compute, a lower bound), computed once per kernel when it is compiled.
struct KernelCost {
  int64_t bytes = 0;
  int64_t flops = 0;
  MathPeak math = MathPeak::kFloat32;
};

// A device's ceilings: the time a kernel needs at best is the slower of
// moving its bytes at copy_bytes_per_s and doing its FLOPs at the peak of
// its MathPeak. A zero peak bounds nothing; a zero copy ceiling means no
// roofline (the CPU's default).
struct Roofline {
  double copy_bytes_per_s = 0;      // read + written bytes per second
  double tensor16_flops_per_s = 0;  // dense bf16/f16 tensor cores
  double tf32_flops_per_s = 0;      // dense TF32 tensor cores
  double f32_flops_per_s = 0;       // f32 units, an FMA counted as 2
  bool known() const { return copy_bytes_per_s > 0; }
  double peak(MathPeak math) const;
  double seconds(const KernelCost& cost) const;  // at the roofline; 0 when unknown
  std::string ToString() const;  // "copy 4245 GB/s, bf16/f16 989.4 TFLOP/s, tf32 494.7 TFLOP/s, f32 67.1 TFLOP/s"
};

// The device's theoretical roofline from the driver: DRAM bandwidth (2 x the
// memory clock x the bus width) and peaks from SMs x clock x what one SM does
// per clock at its compute capability (dense bf16/f16: 4096 on sm_90, 2048
// on sm_80; TF32 half of that; f32 2 x 128). Unknown (all 0) on the CPU, and
// where the driver cannot tell.
Roofline DeviceRoofline(Device device);

struct ProfilerEvent {
  enum class Kind {
    kHostOp,  // one graph run: "eager: mul", "compiled graph: poi_fused_add_mul_pow_tanh_0"
    kKernel,  // one kernel of a graph run: "poi_fused_add_mul_pow_tanh_0"
  };
  Kind kind = Kind::kKernel;
  std::string name;
  std::string device;               // "cpu", "cuda:0"
  std::vector<Shape> input_shapes;  // graph inputs (host ops), input buffers (kernels)
  int64_t id = 0;                   // unique within the profiler, in order of start
  int64_t parent = -1;              // kernels: the id of the graph run that launched them
  int thread = 0;                   // host thread, numbered from 1 in order of first use
  double cpu_start_us = 0;          // since the profiler started
  // Host op: the whole run (plan-cache lookup, compiles, launches). CPU kernel:
  // its execution. CUDA kernel: the launch (the kernel runs asynchronously).
  double cpu_time_us = 0;
  double cuda_start_us = -1;  // CUDA kernels: when the device started it, on the host clock; else -1
  double cuda_time_us = 0;    // CUDA kernels: device time; host ops: the sum over their kernels
  int launches = 0;           // kernels: 2 for a split reduction, else 1; host ops: their kernels' sum
  int compiles = 0;           // host ops: kernels compiled during this run
  // Kernels: the minimal bytes and FLOPs of the launch (KernelCost).
  int64_t bytes = 0;
  int64_t flops = 0;
  MathPeak math = MathPeak::kFloat32;
};

// One line of table(): the events of one name added up.
struct ProfilerRow {
  std::string name;
  int64_t calls = 0;
  int64_t launches = 0;
  double cpu_time_total_us = 0;
  double cuda_time_total_us = 0;
  double cpu_percent = 0;   // of the host time spent in top-level events (graph runs)
  double cuda_percent = 0;  // of the device time of all kernels
  // Kernels: the minimal bytes and FLOPs over all calls, the time they ran
  // (device time on CUDA, execution time on the CPU), and the time they
  // would take at their device's roofline (-1: no roofline for the device).
  bool kernel = false;
  double bytes_total = 0, flops_total = 0;
  double kernel_time_total_us = 0;
  double roofline_time_total_us = -1;
  double cpu_time_avg_us() const { return calls ? cpu_time_total_us / calls : 0; }
  double cuda_time_avg_us() const { return calls ? cuda_time_total_us / calls : 0; }
  double bytes_per_s() const { return kernel_time_total_us > 0 ? bytes_total / (kernel_time_total_us * 1e-6) : 0; }
  double flops_per_s() const { return kernel_time_total_us > 0 ? flops_total / (kernel_time_total_us * 1e-6) : 0; }
  bool has_roofline() const { return roofline_time_total_us >= 0; }
  // Time at the roofline over time taken, in percent (-1: no roofline).
  double roofline_percent() const {
    if (!has_roofline()) return -1;
    return kernel_time_total_us > 0 ? 100.0 * roofline_time_total_us / kernel_time_total_us : 0;
  }
  // Time taken beyond the roofline's, over all calls (0 without a roofline).
  double time_lost_us() const { return has_roofline() ? kernel_time_total_us - roofline_time_total_us : 0; }
};

// RAII, like torch.profiler.profile():
//   fusebox::Profiler prof;
//   f(x);
//   std::cout << prof.table("cuda_time_total", 10);
//   prof.export_chrome_trace("trace.json");
// Records on every thread from construction until stop() or destruction. Only
// one profiler records at a time: constructing a second while one records
// throws fusebox::Error (stop() the first to start another). CUDA times are
// read lazily (events(), summary(), table(), export), which waits for the
// kernels recorded so far; the first CUDA kernel on a device synchronizes that
// device once to anchor the device clock to the host clock.
class Profiler {
 public:
  Profiler();
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Ends recording; what was recorded stays readable. Idempotent.
  void stop();
  bool recording() const { return recording_; }

  // Every event recorded so far, in order of completion (kernels before the
  // graph run that launched them).
  std::vector<ProfilerEvent> events() const;
  // Events added up by name, sorted by `sort_by` (see table()).
  std::vector<ProfilerRow> summary(const std::string& sort_by = "cuda_time_total") const;
  // torch.profiler's key_averages().table(): Name, # of Calls, CPU total, CPU
  // time avg, CPU total %, CUDA total, CUDA time avg, CUDA total %, Launches;
  // then, for kernels, the roofline's: GB/s and FLOP/s achieved (minimal
  // bytes and FLOPs over the kernel's time) and % Roofline (the time at the
  // roofline over the time taken; blank without one), with each device's
  // roofline under the table.
  // sort_by: cuda_time_total, cpu_time_total, cuda_time, cpu_time (averages),
  // count (descending; ties by CPU total, then name) or name. row_limit < 0: all rows.
  std::string table(const std::string& sort_by = "cuda_time_total", int row_limit = -1) const;
  // The `n` kernels (by name) that lost the most time against their
  // device's roofline, summed over their calls (time_lost_us()), most first;
  // kernels of devices without a roofline are left out.
  std::vector<ProfilerRow> worst(int n = 5) const;
  // The roofline kernels on `device` are held to: set_roofline's, else
  // DeviceRoofline(device). A caller that measured its device (the copy
  // ceiling of a large device-to-device copy, say) passes what it measured;
  // on the CPU that is the only way to have one. Applies to what was
  // recorded before too: the roofline is read when the results are. Not
  // while another thread reads this profiler's results.
  void set_roofline(Device device, const Roofline& roofline);
  Roofline roofline(Device device) const;
  // Chrome trace JSON (chrome://tracing, ui.perfetto.dev): graph runs and CPU
  // kernels on a host track per thread, CUDA kernels on one track per device,
  // joined to their launches by flow arrows. Throws fusebox::Error naming
  // `path` when it cannot be written.
  void export_chrome_trace(const std::string& path) const;

 private:
  std::shared_ptr<profiler::Session> session_;
  bool recording_ = false;
  std::vector<std::pair<Device, Roofline>> rooflines_;  // set_roofline's
};

}  // namespace fusebox
