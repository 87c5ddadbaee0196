// WriteJson (report.h): fusebox_bench's results as JSON, the format that
// bench/compare_torch.py reads ("schema": "fusebox_bench/2").
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/report.h"
#include "tensor/error.h"

namespace fusebox::bench {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      absl::StrAppend(&out, "\\", std::string(1, c));
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

std::string JsonNumber(double v) { return std::isfinite(v) ? absl::StrFormat("%.9g", v) : "null"; }
std::string JsonBool(bool b) { return b ? "true" : "false"; }

std::string JsonNumbers(const std::vector<double>& vs) {
  std::vector<std::string> parts;
  for (double v : vs) parts.push_back(JsonNumber(v));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

std::string JsonStrings(const std::vector<std::string>& ss) {
  std::vector<std::string> parts;
  for (const std::string& s : ss) parts.push_back(JsonString(s));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

std::string JsonShape(const Shape& shape) { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

std::string JsonSide(const Side& side, double bytes) {
  const Timing& t = side.timing;
  return absl::StrCat("{\"cold_ms\": ", JsonNumber(t.cold_ms), ", \"median_ms\": ", JsonNumber(t.median_ms()),
                      ", \"min_ms\": ", JsonNumber(t.min_ms()), ", \"gbps\": ", JsonNumber(GBps(bytes, t.median_ms())),
                      ", \"kernels_per_call\": ", side.kernels_per_call, ", \"kernels\": ", JsonStrings(side.kernels),
                      ", \"ptx\": ", JsonStrings(side.ptx),
                      ",\n       \"trials_ms\": ", JsonNumbers(t.trials_ms), "}");
}

// --profile's kernels (Result::profile_kernels), as ", \"profile_kernels\": [...]"; nothing without --profile.
std::string JsonProfileKernels(const std::vector<Result::ProfileKernel>& kernels) {
  if (kernels.empty()) return "";
  std::vector<std::string> parts;
  for (const Result::ProfileKernel& k : kernels) {
    parts.push_back(absl::StrCat("\n       {\"name\": ", JsonString(k.name), ", \"calls\": ", k.calls,
                                 ", \"time_us\": ", JsonNumber(k.time_us), ", \"bytes\": ", JsonNumber(k.bytes),
                                 ", \"flops\": ", JsonNumber(k.flops), ", \"roofline_percent\": ",
                                 JsonNumber(k.roofline_percent), ", \"memory_bound\": ", JsonBool(k.memory_bound),
                                 ", \"library\": ", JsonBool(k.library), "}"));
  }
  return absl::StrCat(",\n     \"profile_kernels\": [", absl::StrJoin(parts, ","), "]");
}

std::string JsonResult(const Result& r) {
  std::vector<std::string> inputs;
  for (const Shape& s : r.input_shapes) inputs.push_back(JsonShape(s));
  return absl::StrCat(
      "\n    {\"name\": ", JsonString(r.name), ", \"workload\": ", JsonString(r.workload),
      ", \"label\": ", JsonString(r.label), ", \"replay\": ", r.replay ? "true" : "false", ", \"device\": ", JsonString(r.device.str()),
      ", \"shape\": ", JsonShape(r.shape), ", \"input_shapes\": [", absl::StrJoin(inputs, ", "), "]",
      ", \"dtype\": ", JsonString(DTypeName(r.dtype)), ", \"numel\": ", r.numel, ", \"bytes\": ", absl::StrFormat("%.0f", r.bytes),
      ",\n     \"input_sets\": ", r.input_sets, ", \"warmup\": ", r.plan.warmup, ", \"trials\": ", r.plan.trials,
      ", \"calls_per_trial\": ", r.plan.calls_per_trial,
      ", \"flops\": ", JsonNumber(r.flops), ", \"input_scales\": ", JsonNumbers(r.input_scales),
      ", \"epilogue_fusion\": ", JsonBool(r.epilogue_fusion),
      ", \"config\": ", r.config_json.empty() ? "null" : r.config_json,
      ",\n     \"eager\": ", JsonSide(r.eager, r.bytes), ",\n     \"compiled\": ", JsonSide(r.compiled, r.bytes),
      ",\n     \"gemms\": ", r.gemms ? JsonSide(*r.gemms, r.bytes) : "null",
      ",\n     \"speedup\": ", JsonNumber(r.eager.timing.median_ms() / r.compiled.timing.median_ms()),
      ", \"warm_start_ms\": ", JsonNumber(r.warm_start_ms), ", \"cold_compiles\": ", r.cold_compiles,
      ", \"cold_disk_hits\": ", r.cold_disk_hits, ", \"cold_times_ms\": {\"plan\": ", JsonNumber(r.cold_times.plan_ms),
      ", \"codegen\": ", JsonNumber(r.cold_times.codegen_ms), ", \"compilers\": ", JsonNumber(r.cold_times.compile_ms),
      ", \"load\": ", JsonNumber(r.cold_times.load_ms), "}", ",\n     \"max_abs_diff\": ", JsonNumber(r.max_abs_diff),
      ", \"max_abs_diff_tol\": ", JsonNumber(r.max_abs_diff_tol), ", \"rel_err_eager\": ", JsonNumber(r.rel_err_eager),
      ", \"rel_err_compiled\": ", JsonNumber(r.rel_err_compiled), ", \"rel_err_tol\": ", JsonNumber(r.rel_err_tol),
      ", \"checked_elements\": ", r.checked, ", \"ok\": ", JsonBool(r.ok()), ", \"failures\": ", JsonStrings(r.failures),
      JsonProfileKernels(r.profile_kernels), "}");
}

std::string JsonSweep(const SweepResult& r) {
  const Timing& t = r.compiled;
  return absl::StrCat("\n    {\"name\": ", JsonString(r.c.name()), ", \"class\": ", JsonString(r.c.cls),
                      ", \"op\": ", JsonString(SweepOpName(r.c.op)), ", \"layout\": ", JsonString(SweepLayoutName(r.c.layout)),
                      ", \"shape\": ", JsonShape(r.c.shape), ", \"dim\": ", r.c.dim, ", \"dtype\": ", JsonString(DTypeName(r.c.dtype)),
                      ", \"bytes\": ", absl::StrFormat("%.0f", r.bytes), ",\n     \"cold_ms\": ", JsonNumber(t.cold_ms),
                      ", \"median_ms\": ", JsonNumber(t.median_ms()), ", \"min_ms\": ", JsonNumber(t.min_ms()),
                      ", \"gbps\": ", JsonNumber(GBps(r.bytes, t.median_ms())), ", \"kernels\": ", JsonStrings(r.kernel_names),
                      ", \"max_diff\": ", JsonNumber(r.max_diff), ", \"ok\": ", JsonBool(r.ok()),
                      ", \"error\": ", JsonString(r.error), "}");
}

}  // namespace

void WriteJson(const Report& report, const std::string& path) {
  std::string json = absl::StrCat(
      "{\n  \"schema\": \"fusebox_bench/2\", \"device\": ", JsonString(report.device.str()),
      ", \"device_name\": ", JsonString(report.device_name), ", \"quick\": ", JsonBool(report.quick),
      ", \"filter\": ", JsonString(report.filter), ", \"ok\": ", JsonBool(report.ok()),
      ",\n  \"notes\": ", JsonStrings(report.notes), ",\n  \"cache_bytes\": ", JsonNumber(report.cache_bytes),
      ", \"rotation_factor\": ", JsonNumber(kRotationFactor), ", \"max_input_sets\": ", report.plan.max_input_sets,
      ", \"warmup\": ", report.plan.warmup, ", \"trials\": ", report.plan.trials,
      ", \"flush\": ", JsonString(FlushByReading() ? "read" : "zero"));
  if (report.copy) {
    const CopyResult& c = *report.copy;
    absl::StrAppend(&json, ",\n  \"copy_ceiling\": {\"bytes\": ", c.bytes, ", \"counted_bytes\": ", 2 * c.bytes,
                    ", \"median_ms\": ", JsonNumber(c.median_ms()), ", \"min_ms\": ", JsonNumber(c.min_ms()),
                    ", \"gbps\": ", JsonNumber(c.gbps()), ", \"ok\": ", JsonBool(c.ok),
                    ", \"trials_ms\": ", JsonNumbers(c.trials_ms), "}");
  }
  if (const auto& f = report.launch_floor) {
    absl::StrAppend(&json, ",\n  \"launch_floor\": {\"elements\": ", f->elements,
                    ", \"calls_per_trial\": ", f->calls_per_trial, ", \"median_us\": ", JsonNumber(f->median_us()),
                    ", \"ok\": ", JsonBool(f->ok), ", \"trials_ms\": ", JsonNumbers(f->trials_ms), "}");
  }
  if (report.compile_latency) {
    const CompileLatency& c = *report.compile_latency;
    absl::StrAppend(&json, ",\n  \"compile_latency\": {\"ok\": ", JsonBool(c.ok()),
                    ", \"failures\": ", JsonStrings(c.failures), ",\n    \"cold\": ", ChildReportJson(c.cold),
                    ",\n    \"warm\": ", ChildReportJson(c.warm), "}");
  }
  absl::StrAppend(&json, ",\n  \"reference_ceiling_gbps\": ", JsonNumber(kH200CopyCeilingGBps),
                  ", \"ceiling_gbps\": ", JsonNumber(report.ceiling_gbps()), ",\n  \"results\": [");
  for (size_t i = 0; i < report.results.size(); ++i) {
    absl::StrAppend(&json, i ? "," : "", JsonResult(report.results[i]));
  }
  absl::StrAppend(&json, "\n  ],\n  \"sweep\": [");
  for (size_t i = 0; i < report.sweep.size(); ++i) absl::StrAppend(&json, i ? "," : "", JsonSweep(report.sweep[i]));
  absl::StrAppend(&json, "\n  ]\n}\n");
  std::ofstream out(path);
  out << json;
  out.close();
  FUSEBOX_ENSURE(out.good(), "cannot write --json file '", path, "'");
}

}  // namespace fusebox::bench
