// Compile latency and warm start, each measured in a fresh process (issue 6):
// fusebox_bench re-executes itself with the hidden flag --compile-child
// cold|warm and FUSEBOX_CACHE_DIR set to a new empty directory. The cold child
// compiles a few graphs with nothing cached; the warm child, a second process
// on the same directory, finds every kernel in the disk cache and must run no
// compiler. Each child prints its timings as one JSON line on stdout.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tensor/device.h"

namespace fusebox::bench {

// Its name for --filter, the tables and the JSON.
inline constexpr char kCompileLatency[] = "compile_latency";

// The first compiled call of one graph in a child.
struct GraphLatency {
  std::string workload;  // "manual_gelu"
  std::vector<int64_t> shape;
  int64_t kernels = 0;       // the compiled call launched
  int64_t compiles = 0;      // compile-cache misses (compiler runs) during the call
  int64_t disk_hits = 0;     // kernels loaded from the disk cache
  double first_call_ms = 0;  // the whole call, synchronized: trace, plan, compile or load, launch
  double compiler_ms = 0;    // inside compilers, summed over threads (parallel compiles overlap)
  double nvrtc_ms = 0;       // of compiler_ms, NVRTC (on the CPU: the CUDA twins)
  double compiler_wall_ms = 0;  // of first_call_ms, with a compiler running; the rest is fusebox's own

  int64_t nvrtc_programs = 0;
};

struct ChildReport {
  std::string mode;    // "cold" or "warm"
  std::string device;  // "cuda:0", "cpu"
  bool cuda_twin = false;  // CPU: each kernel also compiled for sm_90 with NVRTC
  // Cold only (else 0): a trivial kernel compiled with NVRTC before the
  // graphs, the process's first program (NVRTC's one-time start is in it),
  // then the same program again.
  double first_nvrtc_ms = 0;
  double trivial_nvrtc_ms = 0;
  int64_t nvrtc_programs = 0;  // the whole child, the trivial ones included
  int64_t compiles = 0;        // compile-cache misses in the whole child
  std::vector<GraphLatency> graphs;
  std::string error;  // what went wrong in the child; empty when it ran
};

// The parent's section of the report.
struct CompileLatency {
  ChildReport cold, warm;
  std::vector<std::string> failures;  // a child failed, or the warm start compiled
  bool ok() const { return failures.empty(); }
};

// One line of JSON (no newline), and back. ParseChildReport reads the last
// line of `output` that starts with '{' (a child may log before it).
std::string ChildReportJson(const ChildReport& report);
absl::StatusOr<ChildReport> ParseChildReport(std::string_view output);

// The graphs both children run: manual_gelu, manual_softmax and
// manual_layer_norm in float32 at the suite's shape (quick or full).
struct LatencyGraph {
  std::string workload;
  std::vector<int64_t> shape;
};
std::vector<LatencyGraph> LatencyGraphs(bool quick);

// The failures a pair of reports shows: a child's error, a graph missing,
// a cold child that compiled nothing, a warm one that compiled or ran NVRTC.
std::vector<std::string> CheckLatency(const ChildReport& cold, const ChildReport& warm);

// Child side (--compile-child MODE): runs the graphs on `device`, prints the
// JSON line, returns the exit status. `cuda_twin`: CPU only, see ChildReport.
int RunCompileChild(const std::string& mode, Device device, bool quick, bool cuda_twin);

// Parent side: runs `binary` (fusebox_bench; "" for this process's own
// executable) as the cold child, then as the warm child, on a new temporary
// cache directory it removes afterwards.
CompileLatency MeasureCompileLatency(const std::string& binary, Device device, bool quick, bool cuda_twin);

}  // namespace fusebox::bench
