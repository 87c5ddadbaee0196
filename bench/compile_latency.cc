#include "bench/compile_latency.h"

#include <stdlib.h>

#include <cstdio>
#include <exception>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "backend/compile_cache.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/nvrtc.h"
#include "backend/executable.h"
#include "bench/harness.h"
#include "bench/suite.h"
#include "bench/workloads.h"
#include "nlohmann/json.hpp"
#include "tensor/error.h"

namespace fusebox::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kNoDeviceArch = 90;  // what the CPU's CUDA twins compile for (backend/executable.cc)

// NVRTC's start, apart from any kernel of ours: the smallest useful program.
constexpr char kTrivialKernel[] =
    "extern \"C\" __global__ void fb_trivial(float* x) { x[threadIdx.x] *= 2.0f; }\n";

const Workload* FindWorkload(const std::string& name) {
  for (const Workload* w : {&kManualGelu, &kManualSoftmax, &kManualLayerNorm}) {
    if (name == w->name) return w;
  }
  FUSEBOX_CHECK(false, "no workload named ", name);
  return nullptr;
}

double NvrtcOnceMs(int arch) {
  const double before = cuda::GetNvrtcCounters().total_ms;
  ValueOrThrow(cuda::CompileWithNvrtc(kTrivialKernel, "fb_trivial", arch));
  return cuda::GetNvrtcCounters().total_ms - before;
}

std::string ShellQuote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

// Runs `command`, returns its stdout; `status` gets pclose's.
std::string RunCapturing(const std::string& command, int* status) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *status = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  *status = ::pclose(pipe);
  return out;
}

json GraphJson(const GraphLatency& g) {
  return {{"workload", g.workload},       {"shape", g.shape},
          {"kernels", g.kernels},         {"compiles", g.compiles},
          {"disk_hits", g.disk_hits},     {"first_call_ms", g.first_call_ms},
          {"compiler_ms", g.compiler_ms}, {"nvrtc_ms", g.nvrtc_ms},
          {"compiler_wall_ms", g.compiler_wall_ms},
          {"nvrtc_programs", g.nvrtc_programs}};
}

}  // namespace

std::string ChildReportJson(const ChildReport& r) {
  json graphs = json::array();
  for (const GraphLatency& g : r.graphs) graphs.push_back(GraphJson(g));
  const json j = {{"mode", r.mode},
                  {"device", r.device},
                  {"cuda_twin", r.cuda_twin},
                  {"first_nvrtc_ms", r.first_nvrtc_ms},
                  {"trivial_nvrtc_ms", r.trivial_nvrtc_ms},
                  {"nvrtc_programs", r.nvrtc_programs},
                  {"compiles", r.compiles},
                  {"graphs", graphs},
                  {"error", r.error}};
  return j.dump();
}

absl::StatusOr<ChildReport> ParseChildReport(std::string_view output_view) {
  const absl::string_view output(output_view.data(), output_view.size());
  absl::string_view line;
  for (absl::string_view l : absl::StrSplit(output, '\n')) {
    if (!l.empty() && l.front() == '{') line = l;
  }
  if (line.empty()) return absl::InvalidArgumentError("no JSON line in the child's output");
  const json j = json::parse(line.begin(), line.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("the child's JSON line does not parse: ", line));
  }
  try {
    ChildReport r;
    r.mode = j.at("mode").get<std::string>();
    r.device = j.at("device").get<std::string>();
    r.cuda_twin = j.at("cuda_twin").get<bool>();
    r.first_nvrtc_ms = j.at("first_nvrtc_ms").get<double>();
    r.trivial_nvrtc_ms = j.at("trivial_nvrtc_ms").get<double>();
    r.nvrtc_programs = j.at("nvrtc_programs").get<int64_t>();
    r.compiles = j.at("compiles").get<int64_t>();
    r.error = j.at("error").get<std::string>();
    for (const json& g : j.at("graphs")) {
      r.graphs.push_back({.workload = g.at("workload").get<std::string>(),
                          .shape = g.at("shape").get<std::vector<int64_t>>(),
                          .kernels = g.at("kernels").get<int64_t>(),
                          .compiles = g.at("compiles").get<int64_t>(),
                          .disk_hits = g.at("disk_hits").get<int64_t>(),
                          .first_call_ms = g.at("first_call_ms").get<double>(),
                          .compiler_ms = g.at("compiler_ms").get<double>(),
                          .nvrtc_ms = g.at("nvrtc_ms").get<double>(),
                          .compiler_wall_ms = g.at("compiler_wall_ms").get<double>(),
                          .nvrtc_programs = g.at("nvrtc_programs").get<int64_t>()});
    }
    return r;
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("the child's JSON line lacks a field (", e.what(), "): ", line));
  }
}

std::vector<LatencyGraph> LatencyGraphs(bool quick) {
  std::vector<LatencyGraph> graphs;
  for (const char* name : {"manual_gelu", "manual_softmax", "manual_layer_norm"}) {
    for (const Case& c : SuiteCases(quick)) {
      if (c.name == name && c.dtype == DType::kFloat32) {
        graphs.push_back({name, {c.shape.begin(), c.shape.end()}});
        break;
      }
    }
  }
  return graphs;
}

std::vector<std::string> CheckLatency(const ChildReport& cold, const ChildReport& warm) {
  std::vector<std::string> failures;
  for (const ChildReport* r : {&cold, &warm}) {
    if (!r->error.empty()) failures.push_back(absl::StrCat(r->mode, " child: ", r->error));
  }
  if (!failures.empty()) return failures;
  if (cold.graphs.size() != warm.graphs.size()) {
    failures.push_back(absl::StrCat("the cold child ran ", cold.graphs.size(), " graphs, the warm one ",
                                    warm.graphs.size()));
  }
  for (const GraphLatency& g : cold.graphs) {
    if (g.compiles == 0) failures.push_back(absl::StrCat("cold start of ", g.workload, " compiled nothing"));
  }
  for (const GraphLatency& g : warm.graphs) {
    if (g.compiles != 0) {
      failures.push_back(absl::StrCat("warm start of ", g.workload, " ran a compiler ", g.compiles, " times"));
    }
    if (g.disk_hits == 0) failures.push_back(absl::StrCat("warm start of ", g.workload, " read nothing from disk"));
  }
  if (warm.nvrtc_programs != 0) {
    failures.push_back(absl::StrCat("the warm child ran NVRTC ", warm.nvrtc_programs, " times"));
  }
  return failures;
}

int RunCompileChild(const std::string& mode, Device device, bool quick, bool cuda_twin) {
  ChildReport report;
  report.mode = mode;
  report.device = device.str();
  report.cuda_twin = device.is_cpu() && cuda_twin;
  try {
    FUSEBOX_ENSURE(mode == "cold" || mode == "warm", "--compile-child takes cold or warm, not '", mode, "'");
    backend::SetAlsoCompileCudaForCpu(report.cuda_twin);
    // Inputs first: on a GPU they create the context, which is no part of compiling.
    const std::vector<LatencyGraph> graphs = LatencyGraphs(quick);
    std::vector<std::vector<Tensor>> inputs;
    for (const LatencyGraph& g : graphs) {
      inputs.emplace_back();
      uint64_t seed = 1;
      for (const Shape& s : InputShapes(*FindWorkload(g.workload), Shape(g.shape.begin(), g.shape.end()))) {
        inputs.back().push_back(randn(s, device, seed++));
      }
    }
    Synchronize(device);
    if (mode == "cold" && (device.is_cuda() || report.cuda_twin)) {
      const int arch =
          device.is_cuda() ? ValueOrThrow(cuda::Driver::Get().ComputeCapability(device.index)) : kNoDeviceArch;
      report.first_nvrtc_ms = NvrtcOnceMs(arch);
      report.trivial_nvrtc_ms = NvrtcOnceMs(arch);
    }
    for (size_t i = 0; i < graphs.size(); ++i) {
      GraphLatency g{.workload = graphs[i].workload, .shape = graphs[i].shape};
      CompiledWorkload compiled(FindWorkload(g.workload)->fn);
      const backend::CompileCacheStats before = backend::CompileCache::Get().stats();
      const cuda::NvrtcCounters nvrtc_before = cuda::GetNvrtcCounters();
      g.first_call_ms = TimeOnceMs(device, [&] { (void)compiled(inputs[i]); });
      const backend::CompileCacheStats after = backend::CompileCache::Get().stats();
      const cuda::NvrtcCounters nvrtc_after = cuda::GetNvrtcCounters();
      g.kernels = static_cast<int64_t>(compiled.kernels().size());
      g.compiles = after.compiles - before.compiles;
      FUSEBOX_CHECK(g.compiles == compiled.stats().kernel_compiles, "the compile cache counted ", g.compiles,
                    " compiles, the compiled function ", compiled.stats().kernel_compiles);
      g.disk_hits = after.disk_hits - before.disk_hits;
      g.compiler_ms = after.compile_ms - before.compile_ms;
      g.compiler_wall_ms = after.busy_ms - before.busy_ms;
      g.nvrtc_ms = nvrtc_after.total_ms - nvrtc_before.total_ms;
      g.nvrtc_programs = nvrtc_after.programs - nvrtc_before.programs;
      report.graphs.push_back(std::move(g));
    }
  } catch (const std::exception& e) {
    report.error = e.what();
  }
  report.nvrtc_programs = cuda::GetNvrtcCounters().programs;
  report.compiles = backend::CompileCache::Get().stats().compiles;
  std::printf("%s\n", ChildReportJson(report).c_str());
  std::fflush(stdout);
  return report.error.empty() ? 0 : 1;
}

CompileLatency MeasureCompileLatency(const std::string& binary, Device device, bool quick, bool cuda_twin) {
  CompileLatency out;
  std::error_code ec;
  const std::string exe = binary.empty() ? fs::read_symlink("/proc/self/exe", ec).string() : binary;
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = absl::StrCat(tmp && *tmp ? tmp : "/tmp", "/fusebox-compile-latency-XXXXXX");
  if (ec || ::mkdtemp(dir.data()) == nullptr) {
    out.failures.push_back(absl::StrCat("cannot start the children: ", ec ? ec.message() : "mkdtemp failed"));
    return out;
  }
  for (ChildReport* r : {&out.cold, &out.warm}) {
    const std::string mode = r == &out.cold ? "cold" : "warm";
    const std::string command = absl::StrCat(
        "FUSEBOX_CACHE_DIR=", ShellQuote(dir), " ", ShellQuote(exe), " --compile-child ", mode, " --device ",
        device.is_cuda() ? "cuda" : "cpu", quick ? " --quick" : " --full", cuda_twin ? "" : " --no-cuda-twin");
    int status = 0;
    const std::string output = RunCapturing(command, &status);
    absl::StatusOr<ChildReport> parsed = ParseChildReport(output);
    if (parsed.ok()) {
      *r = *std::move(parsed);
    } else {
      r->mode = mode;
      r->error = absl::StrCat(parsed.status().message(), " (exit status ", status, "; command: ", command, ")");
    }
  }
  fs::remove_all(dir, ec);
  out.failures = CheckLatency(out.cold, out.warm);
  return out;
}

}  // namespace fusebox::bench
