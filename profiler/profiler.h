// fusebox::Profiler: while one is alive, every graph run (eager op or compiled
// graph) and every kernel it launches, on the CPU and on CUDA, is recorded with
// its name, input shapes, CPU time, device time (CUDA events) and launch count.
// table() prints the torch.profiler-style summary, export_chrome_trace() writes
// a trace Perfetto opens. Without a live profiler, recording costs one relaxed
// atomic load per graph run and per kernel.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/shape.h"

namespace fusebox {

namespace profiler {
class Session;
}

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
  double cpu_time_avg_us() const { return calls ? cpu_time_total_us / calls : 0; }
  double cuda_time_avg_us() const { return calls ? cuda_time_total_us / calls : 0; }
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
  // time avg, CPU total %, CUDA total, CUDA time avg, CUDA total %, Launches.
  // sort_by: cuda_time_total, cpu_time_total, cuda_time, cpu_time (averages),
  // count (descending; ties by CPU total, then name) or name. row_limit < 0: all rows.
  std::string table(const std::string& sort_by = "cuda_time_total", int row_limit = -1) const;
  // Chrome trace JSON (chrome://tracing, ui.perfetto.dev): graph runs and CPU
  // kernels on a host track per thread, CUDA kernels on one track per device,
  // joined to their launches by flow arrows. Throws fusebox::Error naming
  // `path` when it cannot be written.
  void export_chrome_trace(const std::string& path) const;

 private:
  std::shared_ptr<profiler::Session> session_;
  bool recording_ = false;
};

}  // namespace fusebox
