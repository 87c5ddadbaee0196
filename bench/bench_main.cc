// fusebox_bench: the project's main job. Runs the suite (suite.cc: the seed's
// manual_gelu f32/bf16, an add-mul-tanh chain, manual_softmax on short, square
// and long rows, layer_norm and rms_norm written out, row and column sums, a
// tiny gelu for the call overhead, a gelu size sweep, gelu(x @ w + b) and the
// seed's MLP beside their GEMMs alone, GPT-2's forward and loss) eagerly (one kernel per op) and
// compiled, on Device::default_device(); then the compile latency
// and warm start of a few graphs in fresh processes (compile_latency.h). Each case is checked
// (eager vs compiled, both vs float64) and timed; the tables come last, the
// JSON (--json) is what bench/compare_torch.py merges with PyTorch's numbers.
// On a GPU it also measures the device-to-device copy ceiling.
//   fusebox_bench [--quick | --full] [--json PATH] [--filter WORD,...] [--device cpu|cuda] [--profile] [--sweep]
// --sweep runs the grid of shapes nobody tuned for (sweep.h) instead of the suite.
// Sizes: the on a GPU; small ones (--quick) on the CPU unless --full.
// Exit status: 0 all checks passed, 1 a check failed or an error, 2 bad flags.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/cuda/driver.h"
#include "bench/compile_latency.h"
#include "bench/harness.h"
#include "bench/report.h"
#include "bench/suite.h"
#include "bench/sweep.h"
#include "frontend/fusebox.h"

namespace fusebox::bench {
namespace {

struct Options {
  std::optional<bool> quick;  // unset: quick on the CPU, full on a GPU
  std::string json_path;
  std::string filter;
  std::optional<Device> device;
  std::string compile_child;  // hidden: "cold" or "warm", see compile_latency.h
  bool cuda_twin = true;      // hidden: --no-cuda-twin (the children's CPU kernels skip NVRTC)
  bool profile = false;
  bool sweep = false;
};

TimingPlan PlanFor(Device device, bool quick) {
  if (quick) return {.warmup = 2, .trials = 5, .max_input_sets = 4};
  return device.is_cuda() ? TimingPlan{.warmup = 10, .trials = 50} : TimingPlan{.warmup = 2, .trials = 10};
}

// --sweep: each grid case compiled and timed (no eager side: PyTorch's
// eager and torch.compile are compare_torch.py --sweep's), then the table.
// Each case's line carries its median and GB/s, and the JSON is rewritten
// after each case, so a run cut short (a device call's time limit) still
// leaves every finished case's numbers.
int RunSweep(Report* report, const std::string& filter, uint64_t seed, const std::string& json_path) {
  const std::vector<SweepCase> grid = SweepCases(report->quick);
  std::vector<SweepCase> cases;
  for (const SweepCase& c : grid) {
    if (Matches(filter, c.name())) cases.push_back(c);
  }
  if (cases.empty()) {
    std::fprintf(stderr, "fusebox_bench: --filter '%s' matches no sweep case\n", filter.c_str());
    return 2;
  }
  TimingPlan plan = report->plan;
  plan.warmup = std::min(plan.warmup, 5);
  plan.trials = std::min(plan.trials, 20);
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto start = std::chrono::steady_clock::now();
    report->sweep.push_back(RunSweepCase(cases[i], report->device, plan, report->cache_bytes, seed + 100 * i));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const SweepResult& r = report->sweep.back();
    const double ms = r.ok() ? r.compiled.median_ms() : 0;
    std::printf("[%3zu/%zu] %-48s %6.1f s  %s  %.4f ms  %.0f GB/s\n", i + 1, cases.size(), cases[i].name().c_str(), s,
                r.ok() ? "ok" : r.error.c_str(), ms, ms > 0 ? r.bytes / ms * 1e-6 : 0.0);
    std::fflush(stdout);
    if (!json_path.empty()) WriteJson(*report, json_path);
  }
  PrintSweepTable(*report);
  if (!json_path.empty()) WriteJson(*report, json_path);
  return report->ok() ? 0 : 1;
}

int Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--quick | --full] [--json PATH] [--filter WORD,...] [--device cpu|cuda] [--profile]\n"
               "  --quick   small sizes, few trials (the default without a GPU)\n"
               "  --full    the issue's sizes (the default on a GPU)\n"
               "  --filter  run only the cases whose name contains one of the words; names:\n"
               "            manual_gelu add_mul_tanh manual_softmax manual_layer_norm manual_rms_norm\n"
               "            row_sum col_sum tiny_gelu gelu_sweep gemm_bias_gelu mlp gpt2_forward compile_latency;\n"
               "            labelled rows also by label and dtype (\"gpt2_forward SDPA bfloat16\")\n"
               "  --profile also print each case's kernels' device times (fusebox::Profiler) and the\n"
               "            host time of one compiled call\n"
               "  --sweep   instead of the suite, the grid of odd shapes per class of work (bench/sweep.h);\n"
               "            --filter then matches its rows' names (\"softmax/dim0 [1031, 16273] bfloat16\"); a filter\n"
               "            holding ';' splits there instead (\"sum/dim0 [16411, 1023];softmax/dim0 [16411, 1023]\")\n",
               argv0);
  return 2;
}

int Main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick" || arg == "--full") {
      options.quick = arg == "--quick";
    } else if (arg == "--json" && i + 1 < argc) {
      options.json_path = argv[++i];
    } else if (arg == "--filter" && i + 1 < argc) {
      options.filter = argv[++i];
    } else if (arg == "--device" && i + 1 < argc) {
      const std::string d = argv[++i];
      if (d != "cpu" && d != "cuda") return Usage(argv[0]);
      options.device = d == "cpu" ? Device::cpu() : Device::cuda(0);
    } else if (arg == "--profile") {
      options.profile = true;
    } else if (arg == "--sweep") {
      options.sweep = true;
    } else if (arg == "--compile-child" && i + 1 < argc) {
      options.compile_child = argv[++i];
    } else if (arg == "--no-cuda-twin") {
      options.cuda_twin = false;
    } else {
      return Usage(argv[0]);
    }
  }

  const Device device = options.device.value_or(Device::default_device());
  if (device.is_cuda() && !cuda_available()) {
    std::fprintf(stderr, "fusebox_bench: no usable GPU: %s\n", cuda::Driver::Get().unavailable_reason().c_str());
    return 1;
  }
  if (!options.compile_child.empty()) {
    return RunCompileChild(options.compile_child, device, options.quick.value_or(device.is_cpu()), options.cuda_twin);
  }
  Report report;
  report.device = device;
  report.device_name = DeviceName(device);
  report.quick = options.quick.value_or(device.is_cpu());
  report.filter = options.filter;
  report.cache_bytes = CacheBytes(device);
  report.plan = PlanFor(device, report.quick);
  report.plan.profile = options.profile;
  if (device.is_cpu() && !cuda_available()) report.notes.push_back(cuda::Driver::Get().unavailable_reason());
  if (device.is_cpu() && !options.quick) report.notes.push_back("CPU: quick sizes (--full for the issue's sizes)");
  const uint64_t seed = std::random_device{}();
  report.notes.push_back(absl::StrCat("inputs: randn from seed ", seed));
  if (device.is_cuda() && FlushByReading()) {
    report.notes.push_back("FUSEBOX_BENCH_FLUSH=read: each trial's flush sums 256 MB instead of zeroing it");
  }
  PrintHeader(report);

  if (device.is_cuda()) {
    report.copy = MeasureCopy(device, report.quick ? (size_t{64} << 20) : (size_t{1} << 30), report.plan);
    // --profile holds kernels to the copy measured here, not the driver's theoretical bandwidth.
    if (report.copy->ok) report.plan.copy_ceiling_gbps = report.copy->gbps();
  } else if (options.profile) {
    report.plan.copy_ceiling_gbps = MeasureHostCopyGBps(size_t{256} << 20);
    std::printf("note: --profile's roofline on the CPU: a memcpy of 256 MiB over every core, %.1f GB/s (read + write)\n",
                report.plan.copy_ceiling_gbps);
  }
  if (options.sweep) return RunSweep(&report, options.filter, seed, options.json_path);
  std::vector<Case> cases;
  for (const Case& c : SuiteCases(report.quick)) {
    if (Matches(options.filter, FilterKey(c))) cases.push_back(c);
  }
  const bool latency = Matches(options.filter, kCompileLatency);
  if (cases.empty() && !latency) {
    std::fprintf(stderr, "fusebox_bench: --filter '%s' matches no case\n", options.filter.c_str());
    return 2;
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const auto start = std::chrono::steady_clock::now();
    report.results.push_back(RunCase(c, device, report.plan, report.cache_bytes, seed + 100 * i));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("[%2zu/%zu] %-17s %-8s %-15s %6.1f s  %s\n", i + 1, cases.size(), c.name.c_str(),
                DTypeName(c.dtype), ShapeToString(c.shape).c_str(), s, report.results.back().ok() ? "ok" : "FAILED");
    std::fflush(stdout);
  }

  // Beside the call-overhead rows, in the same process state: the host's
  // floor under them (one launch of a kernel of the same size).
  for (const Case& c : cases) {
    if (device.is_cuda() && c.calls_per_trial > 1) {
      report.launch_floor = MeasureLaunchFloor(device, Numel(c.shape), report.plan, c.calls_per_trial);
      break;
    }
  }

  if (latency) {
    const auto start = std::chrono::steady_clock::now();
    report.compile_latency = MeasureCompileLatency("", device, report.quick, options.cuda_twin);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("[compile] %-17s in fresh processes %18.1f s  %s\n", kCompileLatency, s,
                report.compile_latency->ok() ? "ok" : "FAILED");
    std::fflush(stdout);
  }

  PrintTables(report);
  if (!options.json_path.empty()) WriteJson(report, options.json_path);
  return report.ok() ? 0 : 1;
}

}  // namespace
}  // namespace fusebox::bench

int main(int argc, char** argv) {
  try {
    return fusebox::bench::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fusebox_bench: %s\n", e.what());
    return 1;
  }
}
