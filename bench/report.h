// fusebox_bench's results and their two outputs: the tables printed last (the
// device tool's reply carries the end of the output) and the JSON file that
// bench/compare_torch.py and later sessions read (--json PATH).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/compile_latency.h"
#include "bench/harness.h"
#include "bench/sweep.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace fusebox::bench {

// What DEVICE.md measured on the H200: 1 GiB device-to-device, read + write.
inline constexpr double kH200CopyCeilingGBps = 4245.0;

// One way of running a case: eager (one kernel per op) or compiled.
struct Side {
  Timing timing;
  // Kernels one warm call launches. Eager: one per graph run, counted by the
  // runtime; `kernels` then lists the ops, one kernel each. Compiled: the
  // fused kernels' names (c.kernels()).
  int64_t kernels_per_call = 0;
  std::vector<std::string> kernels;
  // Compiled CUDA kernels: what their PTX and ptxas -v say (PtxSummary), one
  // line per distinct summary: "poi_gelu_1 (x16): loads: 4 x 16B, ...".
  std::vector<std::string> ptx;
};

struct Result {
  std::string name;      // the suite's row: "manual_softmax", "gelu_sweep", "tiny_gelu"
  std::string workload;  // the function it runs: "manual_gelu"
  std::string label;     // "long rows", "call overhead", ...
  bool replay = false;   // compiled with CompileOptions::replay
  Device device;
  Shape shape;
  std::vector<Shape> input_shapes;
  DType dtype = DType::kFloat32;
  int64_t numel = 0;  // of the shape
  double bytes = 0;   // minimal: each input read once, the output written once
  double flops = 0;   // matmul workloads: the GEMMs' FLOPs per call (else 0)
  std::vector<double> input_scales;  // input k is randn * input_scales[k]
  // A whole-model row: its configuration as a JSON object (gpt2_case.h's
  // Gpt2Json), from which compare_torch.py builds the same model; else empty.
  std::string config_json;
  bool epilogue_fusion = false;      // compiled with set_matmul_epilogue_fusion on
  int input_sets = 1;  // rotated over (harness.h)
  TimingPlan plan;
  Side eager, compiled;
  std::optional<Side> gemms;  // matmul workloads: the same GEMMs alone, compiled
  double warm_start_ms = 0;      // first call of a second compile() of it: plan from the process's cache
  int64_t cold_compiles = 0;     // compiler runs during the compiled cold call
  int64_t cold_disk_hits = 0;    // disk-cache hits during it
  CompileTimes cold_times;       // where its compile time went (the rest: tracing, the run)
  // Checks: max |eager - compiled| over the whole output, against a tolerance
  // scaled by max(1, max |eager|); relative L2 errors against float64 on the
  // sampled slices (`checked` elements).
  double max_abs_diff = 0, max_abs_diff_tol = 0;
  double rel_err_eager = 0, rel_err_compiled = 0, rel_err_tol = 0;
  int64_t checked = 0;
  // --profile: the profiler's table of a few compiled calls, and the median
  // host time of one compiled call that does not wait for the device, without
  // and with the profiler recording.
  std::string profile_table;
  // The same calls' kernels that lost the most time against the roofline
  // (Profiler::worst), one line each, and the roofline they were held to.
  std::vector<std::string> profile_worst;
  std::string profile_roofline;
  // Their memory-bound kernels (the roofline's time is the copy's) and those
  // under 80% of the copy ceiling, worst first: "name 71.2%".
  int64_t profile_memory_bound = 0;  // fusebox's own kernels (not extern_)
  std::vector<std::string> profile_memory_bound_under_80;
  int64_t profile_library_memory_bound = 0;  // extern_ kernels (cuBLASLt, flash attention) the same way
  std::vector<std::string> profile_library_under_80;
  // Every kernel of those calls with a roofline, for the JSON (the table
  // above is cut at 40 rows): totals over the calls.
  struct ProfileKernel {
    std::string name;
    int64_t calls = 0;
    double time_us = 0, bytes = 0, flops = 0, roofline_percent = 0;
    bool memory_bound = false, library = false;
  };
  std::vector<ProfileKernel> profile_kernels;
  double host_ms_per_call = 0, host_ms_per_call_profiled = 0;
  std::vector<std::string> failures;
  bool ok() const { return failures.empty(); }
  bool per_call() const { return plan.calls_per_trial > 1; }
  bool compute_bound() const { return flops > 0; }  // reported in TFLOP/s, not GB/s
};

struct Report {
  Device device;
  std::string device_name;
  bool quick = false;
  std::string filter;
  double cache_bytes = 0;  // what input rotation is sized against
  TimingPlan plan;         // the usual one; per-call cases run more calls per trial
  std::vector<std::string> notes;
  std::optional<CopyResult> copy;  // GPU only
  std::optional<LaunchFloorResult> launch_floor;  // GPU, with a call-overhead row
  std::vector<Result> results;
  std::optional<CompileLatency> compile_latency;  // unless --filter leaves it out
  std::vector<SweepResult> sweep;                 // --sweep
  bool ok() const;
  // The ceiling GB/s figures are compared with: the copy measured in this
  // run, else DEVICE.md's (GPU) or none (0, CPU).
  double ceiling_gbps() const;
};

void PrintHeader(const Report& report);
// Per-case first-call times and checks, then the tables.
void PrintTables(const Report& report);
// --sweep: per class, each shape's compiled time, GB/s and share of the ceiling.
void PrintSweepTable(const Report& report);
// Throws fusebox::Error when the file cannot be written.
void WriteJson(const Report& report, const std::string& path);

}  // namespace fusebox::bench
