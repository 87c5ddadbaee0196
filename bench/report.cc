#include "bench/report.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace fusebox::bench {
namespace {

constexpr char kSweep[] = "gelu_sweep";

std::string Percent(double gbps, double ceiling) {
  return ceiling > 0 ? absl::StrFormat("%.0f%%", 100.0 * gbps / ceiling) : "";
}

void PrintDetails(const Result& r) {
  std::printf("\n%s %s %s%s:\n", r.name.c_str(), DTypeName(r.dtype), ShapeToString(r.shape).c_str(),
              r.label.empty() ? "" : absl::StrCat(" (", r.label, ")").c_str());
  std::vector<std::string> inputs;
  for (const Shape& s : r.input_shapes) inputs.push_back(ShapeToString(s));
  const CompileTimes& t = r.cold_times;
  std::printf("  %s(%s): %.3g MB minimal, %d input set%s; first call: eager %.1f ms, compiled %.1f ms"
              " (%lld compiles, %lld disk-cache hits; plan %.1f, codegen %.1f, compilers %.1f, load %.1f ms),"
              " warm start %.2f ms\n",
              r.workload.c_str(), absl::StrJoin(inputs, ", ").c_str(), r.bytes / 1e6, r.input_sets,
              r.input_sets == 1 ? "" : "s", r.eager.timing.cold_ms, r.compiled.timing.cold_ms,
              static_cast<long long>(r.cold_compiles), static_cast<long long>(r.cold_disk_hits), t.plan_ms,
              t.codegen_ms, t.compile_ms, t.load_ms, r.warm_start_ms);
  std::printf("  kernels per call: eager %lld (%s), compiled %lld (%s)\n",
              static_cast<long long>(r.eager.kernels_per_call), absl::StrJoin(r.eager.kernels, " ").c_str(),
              static_cast<long long>(r.compiled.kernels_per_call), absl::StrJoin(r.compiled.kernels, " ").c_str());
  for (const std::string& line : r.compiled.ptx) std::printf("  ptx: %s\n", line.c_str());
  if (r.gemms) {
    std::printf("  the GEMMs alone (%.3g GFLOP per call%s): %lld kernels (%s)\n", r.flops / 1e9,
                r.epilogue_fusion ? "" : "; matmul epilogue fusion off",
                static_cast<long long>(r.gemms->kernels_per_call), absl::StrJoin(r.gemms->kernels, " ").c_str());
  }
  std::printf("  check: max|eager - compiled| = %.3g (tol %.3g); rel L2 error vs float64 on %lld elements: eager"
              " %.3g, compiled %.3g (tol %.3g) -> %s\n",
              r.max_abs_diff, r.max_abs_diff_tol, static_cast<long long>(r.checked), r.rel_err_eager,
              r.rel_err_compiled, r.rel_err_tol, r.ok() ? "OK" : "FAILED");
  if (!r.profile_table.empty()) {
    std::printf("  profile (--profile): one compiled call takes %.3f ms on the host without waiting (%.3f ms under"
                " the profiler); the profiler over 5 calls:\n%s",
                r.host_ms_per_call, r.host_ms_per_call_profiled, r.profile_table.c_str());
    std::printf("  worst kernels by time lost against the roofline (%s):%s\n", r.profile_roofline.c_str(),
                r.profile_worst.empty() ? " none (no roofline)" : "");
    for (const std::string& line : r.profile_worst) std::printf("    %s\n", line.c_str());
    // The worst ten by name: fusebox's kernels, then the library's.
    auto print = [](const char* what, int64_t count, const std::vector<std::string>& under) {
      if (count == 0) return;
      const std::vector<std::string> shown(under.begin(), under.begin() + std::min<size_t>(under.size(), 10));
      std::printf("  %s under 80%% of the copy ceiling: %zu of %lld%s%s%s\n", what, under.size(),
                  static_cast<long long>(count), under.empty() ? "" : ": ", absl::StrJoin(shown, ", ").c_str(),
                  under.size() > shown.size() ? ", ..." : "");
    };
    print("memory-bound kernels", r.profile_memory_bound, r.profile_memory_bound_under_80);
    print("memory-bound library kernels (extern_)", r.profile_library_memory_bound, r.profile_library_under_80);
  }
  for (const std::string& f : r.failures) std::printf("  FAILED: %s\n", f.c_str());
}

void PrintMainTable(const Report& report, double ceiling) {
  std::printf("\n%-17s %-7s %-15s %-8s %19s %19s %10s %10s %6s %8s %7s %9s  %s\n", "workload", "device", "shape",
              "dtype", "eager ms med (min)", "comp ms med (min)", "eager GB/s", "comp GB/s", "%ceil", "speedup",
              "kernels", "max|diff|", "compiled kernels");
  for (const Result& r : report.results) {
    if (r.name == kSweep || r.compute_bound()) continue;
    const double eager_gbps = GBps(r.bytes, r.eager.timing.median_ms());
    const double compiled_gbps = GBps(r.bytes, r.compiled.timing.median_ms());
    const std::string kernels = absl::StrCat(r.eager.kernels_per_call, "->", r.compiled.kernels_per_call);
    std::printf("%-17s %-7s %-15s %-8s %9.4f (%7.4f) %9.4f (%7.4f) %10.1f %10.1f %6s %7.2fx %7s %9.3g  %s%s\n",
                r.name.c_str(), r.device.str().c_str(), ShapeToString(r.shape).c_str(), DTypeName(r.dtype),
                r.eager.timing.median_ms(), r.eager.timing.min_ms(), r.compiled.timing.median_ms(),
                r.compiled.timing.min_ms(), eager_gbps, compiled_gbps, Percent(compiled_gbps, ceiling).c_str(),
                r.eager.timing.median_ms() / r.compiled.timing.median_ms(), kernels.c_str(), r.max_abs_diff,
                absl::StrJoin(r.compiled.kernels, ",").c_str(), r.ok() ? "" : "  FAILED");
  }
}

double Tflops(double flops, double ms) { return ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0; }

// Matmul workloads: time and TFLOP/s of eager, compiled and the same GEMMs
// alone; compiled over GEMMs is what the epilogues cost.
void PrintMatmulTable(const Report& report) {
  bool header = false;
  for (const Result& r : report.results) {
    if (!r.compute_bound()) continue;
    if (!header) {
      std::printf("\nmatmul workloads: median ms (TFLOP/s); gemms = the same GEMMs alone, compiled\n%-15s %-16s %-8s %-5s"
                  " %19s %19s %19s %13s %7s  %s\n",
                  "workload", "shape", "dtype", "epi", "eager", "compiled", "gemms", "comp / gemms", "kernels",
                  "compiled kernels");
      header = true;
    }
    const double eager = r.eager.timing.median_ms(), compiled = r.compiled.timing.median_ms();
    const double gemms = r.gemms ? r.gemms->timing.median_ms() : 0.0;
    const std::string kernels = absl::StrCat(r.eager.kernels_per_call, "->", r.compiled.kernels_per_call);
    std::vector<std::string> names = r.compiled.kernels;
    if (names.size() > 4) names = {names[0], names[1], "...", names.back()};
    std::printf("%-15s %-16s %-8s %-5s %9.4f (%7.1f) %9.4f (%7.1f) %9.4f (%7.1f) %12.3fx %7s  %s%s\n", r.name.c_str(),
                ShapeToString(r.shape).c_str(), DTypeName(r.dtype), r.epilogue_fusion ? "yes" : "no", eager,
                Tflops(r.flops, eager), compiled, Tflops(r.flops, compiled), gemms, Tflops(r.flops, gemms),
                gemms > 0 ? compiled / gemms : 0.0, kernels.c_str(), absl::StrJoin(names, ",").c_str(),
                r.ok() ? "" : "  FAILED");
  }
}

void PrintSweep(const Report& report, double ceiling) {
  bool header = false;
  for (const Result& r : report.results) {
    if (r.name != kSweep) continue;
    if (!header) {
      std::printf("\n%s (%s, %s): GB/s against size\n%12s %10s %10s %10s %10s %6s %5s\n", kSweep,
                  r.workload.c_str(), DTypeName(r.dtype), "elements", "eager ms", "comp ms", "eager GB/s",
                  "comp GB/s", "%ceil", "sets");
      header = true;
    }
    const double compiled_gbps = GBps(r.bytes, r.compiled.timing.median_ms());
    std::printf("%12lld %10.4f %10.4f %10.1f %10.1f %6s %5d%s\n", static_cast<long long>(r.numel),
                r.eager.timing.median_ms(), r.compiled.timing.median_ms(), GBps(r.bytes, r.eager.timing.median_ms()),
                compiled_gbps, Percent(compiled_gbps, ceiling).c_str(), r.input_sets, r.ok() ? "" : "  FAILED");
  }
}

void PrintCallOverhead(const Report& report) {
  for (const Result& r : report.results) {
    if (!r.per_call()) continue;
    std::printf("\ncall overhead (%s %s %s, %d calls per trial on the host clock, synchronized): eager %.1f us per call"
                " (%lld kernels), compiled %.1f us per call (%lld kernel%s, the whole compiled call: %s)\n",
                r.name.c_str(), DTypeName(r.dtype), ShapeToString(r.shape).c_str(), r.plan.calls_per_trial,
                1e3 * r.eager.timing.median_ms(), static_cast<long long>(r.eager.kernels_per_call),
                1e3 * r.compiled.timing.median_ms(), static_cast<long long>(r.compiled.kernels_per_call),
                r.compiled.kernels_per_call == 1 ? "" : "s",
                r.replay ? "guard, replay of the recorded plan, launch" : "trace, guard, launch");
  }
  if (const auto& f = report.launch_floor) {
    std::printf("\nlaunch floor (this host): %.1f us per call: one cuLaunchKernel of a %lld-float copy, %d per trial on"
                " the host clock, synchronized%s; a compiled call of one kernel costs this plus fusebox's host work\n",
                f->median_us(), static_cast<long long>(f->elements), f->calls_per_trial, f->ok ? "" : " [COPY WRONG]");
  }
}

void PrintCompileLatency(const CompileLatency& c) {
  std::printf("\n%s: the first compiled call of each graph in a fresh process on a new, empty FUSEBOX_CACHE_DIR"
              " (cold), then in a second process on that directory (warm: kernels from the disk cache)%s\n",
              kCompileLatency, c.cold.cuda_twin ? "; CPU kernels also compiled for sm_90 by NVRTC (their CUDA twins)" : "");
  if (c.cold.first_nvrtc_ms > 0) {
    std::printf("  first NVRTC program in a process (a trivial kernel, before the graphs): %.1f ms; the same again:"
                " %.1f ms\n",
                c.cold.first_nvrtc_ms, c.cold.trivial_nvrtc_ms);
  }
  std::printf("  %-17s %-13s %7s %12s %9s %9s %9s %12s %8s\n", "graph", "shape", "kernels", "cold ms/kern",
              "NVRTC", "other cc", "rest", "warm ms/kern", "compiles");
  for (size_t i = 0; i < c.cold.graphs.size(); ++i) {
    const GraphLatency& g = c.cold.graphs[i];
    const GraphLatency* w = i < c.warm.graphs.size() ? &c.warm.graphs[i] : nullptr;
    const double k = static_cast<double>(std::max<int64_t>(g.kernels, 1));
    const std::string compiles = absl::StrCat(g.compiles, "/", w ? absl::StrCat(w->compiles) : "-");
    std::printf("  %-17s %-13s %7lld %12.1f %9.1f %9.1f %9.1f %12.2f %8s\n", g.workload.c_str(),
                ShapeToString(Shape(g.shape.begin(), g.shape.end())).c_str(), static_cast<long long>(g.kernels),
                g.first_call_ms / k, g.nvrtc_ms / k, (g.compiler_ms - g.nvrtc_ms) / k,
                (g.first_call_ms - g.compiler_wall_ms) / k, w ? w->first_call_ms / k : 0.0,
                compiles.c_str());
  }
  std::printf("  per kernel: cold = the whole first call; NVRTC and other compilers (host C++) inside it, summed"
              " over threads; rest = the call outside compilers (trace, plan, print, cache, load, launch); warm = the whole first call with every kernel from"
              " disk; compiles = compiler runs cold/warm (warm must be 0). Issue 6 on the H200: cold <= 50 ms,"
              " warm <= 2 ms per kernel\n");
  for (const std::string& f : c.failures) std::printf("  FAILED: %s\n", f.c_str());
}

}  // namespace

bool Report::ok() const {
  if (copy && !copy->ok) return false;
  if (launch_floor && !launch_floor->ok) return false;
  if (compile_latency && !compile_latency->ok()) return false;
  for (const Result& r : results) {
    if (!r.ok()) return false;
  }
  for (const SweepResult& r : sweep) {
    if (!r.ok()) return false;
  }
  return true;
}

void PrintSweepTable(const Report& report) {
  const double ceiling = report.ceiling_gbps();
  std::printf("\nsweep: compiled, median of %d trials; GB/s over the minimal bytes; %%ceil of %.0f GB/s\n",
              std::min(report.plan.trials, 20), ceiling);
  std::printf("%-20s %-24s %-9s %10s %10s %6s %7s  %s\n", "class", "shape", "dtype", "comp ms", "GB/s", "%ceil",
              "kernels", "compiled kernels");
  for (const SweepResult& r : report.sweep) {
    const double ms = r.compiled.median_ms(), gbps = GBps(r.bytes, ms);
    std::printf("%-20s %-24s %-9s %10.4f %10.1f %5.0f%% %7d  %s%s\n", r.c.cls.c_str(), ShapeToString(r.c.shape).c_str(),
                DTypeName(r.c.dtype), ms, gbps, ceiling > 0 ? 100 * gbps / ceiling : 0.0, r.kernels,
                absl::StrJoin(r.kernel_names, ",").c_str(), r.ok() ? "" : ("  FAILED: " + r.error).c_str());
  }
}

double Report::ceiling_gbps() const {
  if (copy && copy->ok) return copy->gbps();
  return device.is_cuda() ? kH200CopyCeilingGBps : 0.0;
}

void PrintHeader(const Report& report) {
  std::printf("fusebox_bench: eager (one kernel per op) vs fusebox::compile (fused)%s\n",
              report.quick ? " [quick: small sizes, few trials]" : "");
  std::printf("device: %s  %s\n", report.device.str().c_str(), report.device_name.c_str());
  for (const std::string& note : report.notes) std::printf("note: %s\n", note.c_str());
  std::printf("method: the first call of each is timed apart (it compiles); then %d warm-up calls and %d trials,"
              " each one call timed %s; median (min). Inputs are rotated over several sets when one set is under"
              " %.0fx the %s (%.0f MiB); the call-overhead case times batches of calls on the host clock.\n",
              report.plan.warmup, report.plan.trials,
              report.device.is_cuda() ? "with CUDA events on the default stream" : "with steady_clock",
              kRotationFactor, report.device.is_cuda() ? "L2" : "last-level cache", report.cache_bytes / 1048576.0);
  if (!report.filter.empty()) std::printf("filter: %s\n", report.filter.c_str());
  std::fflush(stdout);
}

void PrintTables(const Report& report) {
  const double ceiling = report.ceiling_gbps();
  for (const Result& r : report.results) PrintDetails(r);
  if (report.copy) {
    const CopyResult& c = *report.copy;
    std::printf("\ncopy ceiling: %.0f MiB device-to-device, median %.3f ms (min %.3f) -> %.0f GB/s (read + write)%s;"
                " DEVICE.md measured ~%.0f GB/s on the H200\n",
                c.bytes / 1048576.0, c.median_ms(), c.min_ms(), c.gbps(), c.ok ? "" : " [COPY WRONG]",
                kH200CopyCeilingGBps);
  }
  PrintMainTable(report, ceiling);
  PrintMatmulTable(report);
  PrintSweep(report, ceiling);
  PrintCallOverhead(report);
  if (report.compile_latency) PrintCompileLatency(*report.compile_latency);
  std::printf("\nGB/s = minimal bytes (each input read once, the output written once) / median time%s;"
              " kernels = per call, eager->compiled\n",
              report.copy ? "; %ceil = compiled GB/s over the copy ceiling measured above"
              : report.device.is_cuda() ? "; %ceil against DEVICE.md's 4245 GB/s" : "");
  std::printf("result: %s\n", report.ok() ? "OK" : "FAILED");
  std::fflush(stdout);
}

}  // namespace fusebox::bench
