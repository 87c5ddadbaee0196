// What users see of each compiled kernel: c.kernels() returns KernelInfo,
// c.numerics() (with the numerics check on) KernelNumerics.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "backend/ptx_summary.h"

namespace fusebox {

// Where a compile's time went, in milliseconds (CompileStats::times sums a
// compiled function's; torch._dynamo.utils.compile_times() is the like).
// Tracing is not in it: it runs with the ops, on every traced call.
struct CompileTimes {
  double plan_ms = 0;     // the graph passes and fusion (fusion::BuildPlan)
  double codegen_ms = 0;  // lowering and printing the kernels
  double compile_ms = 0;  // the compilers (NVRTC, the host compiler), wall: they run in parallel
  double load_ms = 0;     // loading the binaries, preparing library calls (cuBLASLt, flash attention)
  double total_ms() const { return plan_ms + codegen_ms + compile_ms + load_ms; }
  CompileTimes& operator+=(const CompileTimes& o) {
    plan_ms += o.plan_ms, codegen_ms += o.codegen_ms, compile_ms += o.compile_ms, load_ms += o.load_ms;
    return *this;
  }
};

struct KernelInfo {
  std::string name;         // "poi_fused_add_mul_pow_tanh_0"
  std::string source;       // CUDA C++ (cuda devices) or C++ (cpu)
  std::string ptx;          // CUDA only; empty on the CPU
  std::string device;       // "cuda:0", "cpu"
  std::string compile_log;  // ptxas -v (registers, spills) or the host compiler's output
  int64_t numel = 0;        // elements (threads / iterations) per launch
  // The profiler's roofline facts per launch (profiler.h KernelCost): minimal
  // bytes (each buffer read once, each written once) and FLOPs (GEMMs: 2 *
  // m * n * k * batch; generated kernels: the elements computed). A dynamic
  // plan's, at the sizes it was compiled with.
  int64_t bytes = 0;
  int64_t flops = 0;
  std::string schedule;     // CUDA: the launch schedule (backend/cuda/cuda_schedule.h); empty on the CPU
  // Loads/stores by width, shuffles, registers, spills, shared memory: of
  // the PTX on CUDA; on the CPU, of the sm_90 PTX when CUDA cross-compiling
  // is on (backend::SetAlsoCompileCudaForCpu, as in the tests), else unset.
  std::optional<PtxSummary> ptx_summary;
};

// The numerics check (CompileOptions::check_numerics): the values one fused
// kernel stored, against the same values computed op by op (one kernel per
// op, 16-bit float ops computed in float32).
struct KernelNumerics {
  std::string kernel;    // its name
  double max_abs = 0;    // max |fused - unfused| over every value it stored
  double max_rel = 0;    // max |fused - unfused| / |unfused| (elements where unfused != 0)
  bool flagged = false;  // some element is off by more than its dtype's tolerance
  std::string worst;     // flagged: the element furthest out of tolerance,
                         // "%7[12]: fused 0.25 vs unfused 0.75 (bfloat16)"
};

}  // namespace fusebox
