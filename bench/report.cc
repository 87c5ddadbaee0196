#include "bench/report.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tensor/error.h"

namespace fusebox::bench {
namespace {

// The ceiling GB/s figures are compared with: measured in this run if there
// is one, else DEVICE.md's figure (GPU) or none (CPU).
double CeilingGBps(const Report& report) {
  if (report.copy && report.copy->ok) return report.copy->gbps();
  return report.device.is_cuda() ? kH200CopyCeilingGBps : 0.0;
}

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

std::string JsonNumber(double v) { return std::isfinite(v) ? absl::StrFormat("%.6g", v) : "null"; }

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

std::string JsonTiming(const Timing& t, double bytes) {
  return absl::StrCat("{\"cold_ms\": ", JsonNumber(t.cold_ms), ", \"median_ms\": ", JsonNumber(t.median_ms()),
                      ", \"min_ms\": ", JsonNumber(t.min_ms()), ", \"gbps\": ", JsonNumber(GBps(bytes, t.median_ms())),
                      ", \"trials_ms\": ", JsonNumbers(t.trials_ms), "}");
}

}  // namespace

bool Report::ok() const {
  if (copy && !copy->ok) return false;
  for (const GeluResult& r : gelu) {
    if (!r.ok()) return false;
  }
  return true;
}

void PrintHeader(const Report& report) {
  std::printf("fusebox_bench: the seed's manual_gelu, eager (one kernel per op) vs fusebox::compile (fused)%s\n",
              report.quick ? " [--quick: small sizes, few trials]" : "");
  std::printf("device: %s  %s\n", report.device.str().c_str(), report.device_name.c_str());
  for (const std::string& note : report.notes) std::printf("note: %s\n", note.c_str());
  std::printf("method: cold first call timed apart (it compiles); then warm-up, then %d trials, each timed %s;"
              " median (min)\n",
              report.trials, report.device.is_cuda() ? "with CUDA events on the default stream" : "with steady_clock");
  std::fflush(stdout);
}

void PrintTable(const Report& report) {
  const double ceiling = CeilingGBps(report);
  if (report.copy) {
    const CopyResult& c = *report.copy;
    std::printf("\ncopy ceiling: %.0f MiB device-to-device, median %.3f ms (min %.3f) -> %.0f GB/s (read + write)%s;"
                " DEVICE.md measured ~%.0f GB/s on the H200\n",
                c.bytes / 1048576.0, c.median_ms(), c.min_ms(), c.gbps(), c.ok ? "" : " [COPY WRONG]",
                kH200CopyCeilingGBps);
  }
  for (const GeluResult& r : report.gelu) {
    std::printf("\n%s %s %s:\n", r.workload.c_str(), DTypeName(r.dtype), ShapeToString(r.shape).c_str());
    std::printf("  first call: eager %.1f ms, compiled %.1f ms (%lld kernel compiles, %lld disk-cache hits)\n",
                r.eager.cold_ms, r.compiled.cold_ms, static_cast<long long>(r.cold_compiles),
                static_cast<long long>(r.cold_disk_hits));
    std::printf("  check: max|eager - compiled| = %.3g (tol %.3g); rel L2 error vs float64: eager %.3g,"
                " compiled %.3g (tol %.3g) -> %s\n",
                r.max_abs_diff, r.max_abs_diff_tol, r.rel_err_eager, r.rel_err_compiled, r.rel_err_tol,
                r.ok() ? "OK" : "FAILED");
    for (const std::string& f : r.failures) std::printf("  FAILED: %s\n", f.c_str());
  }

  std::printf("\n%-12s %-7s %-13s %-9s %19s %19s %10s %10s %8s %8s %10s  %s\n", "workload", "device", "shape", "dtype",
              "eager ms med (min)", "comp ms med (min)", "eager GB/s", "comp GB/s",
              ceiling > 0 ? "% ceil" : "", "speedup", "max|diff|", "compiled kernels");
  for (const GeluResult& r : report.gelu) {
    const double eager_gbps = GBps(r.bytes, r.eager.median_ms());
    const double compiled_gbps = GBps(r.bytes, r.compiled.median_ms());
    const std::string pct = ceiling > 0 ? absl::StrFormat("%.0f%%", 100.0 * compiled_gbps / ceiling) : "";
    std::printf("%-12s %-7s %-13s %-9s %9.3f (%7.3f) %9.3f (%7.3f) %10.2f %10.2f %8s %7.2fx %10.3g  %s\n",
                r.workload.c_str(), r.device.str().c_str(), ShapeToString(r.shape).c_str(), DTypeName(r.dtype),
                r.eager.median_ms(), r.eager.min_ms(), r.compiled.median_ms(), r.compiled.min_ms(), eager_gbps,
                compiled_gbps, pct.c_str(), r.eager.median_ms() / r.compiled.median_ms(), r.max_abs_diff,
                absl::StrJoin(r.kernels, ",").c_str());
  }
  std::printf("GB/s = minimal bytes (input read once + output written once) / median time%s\n",
              report.copy ? "; % ceil = compiled GB/s over the copy ceiling measured above" :
              report.device.is_cuda() ? "; % ceil against DEVICE.md's 4245 GB/s" : "");
  std::printf("result: %s\n", report.ok() ? "OK" : "FAILED");
  std::fflush(stdout);
}

void WriteJson(const Report& report, const std::string& path) {
  std::string json = absl::StrCat("{\n  \"device\": ", JsonString(report.device.str()),
                                  ",\n  \"device_name\": ", JsonString(report.device_name),
                                  ",\n  \"quick\": ", report.quick ? "true" : "false",
                                  ",\n  \"ok\": ", report.ok() ? "true" : "false",
                                  ",\n  \"notes\": ", JsonStrings(report.notes));
  if (report.copy) {
    const CopyResult& c = *report.copy;
    absl::StrAppend(&json, ",\n  \"copy_ceiling\": {\"bytes\": ", c.bytes, ", \"counted_bytes\": ", 2 * c.bytes,
                    ", \"median_ms\": ", JsonNumber(c.median_ms()), ", \"min_ms\": ", JsonNumber(c.min_ms()),
                    ", \"gbps\": ", JsonNumber(c.gbps()), ", \"ok\": ", c.ok ? "true" : "false",
                    ", \"trials_ms\": ", JsonNumbers(c.trials_ms), "}");
  }
  absl::StrAppend(&json, ",\n  \"reference_ceiling_gbps\": ", JsonNumber(kH200CopyCeilingGBps), ",\n  \"results\": [");
  for (size_t i = 0; i < report.gelu.size(); ++i) {
    const GeluResult& r = report.gelu[i];
    absl::StrAppend(&json, i ? "," : "", "\n    {\"workload\": ", JsonString(r.workload),
                    ", \"device\": ", JsonString(r.device.str()), ", \"shape\": ", JsonString(ShapeToString(r.shape)),
                    ", \"dtype\": ", JsonString(DTypeName(r.dtype)), ", \"numel\": ", r.numel,
                    ", \"bytes\": ", JsonNumber(r.bytes), ", \"warmup\": ", r.warmup,
                    ",\n     \"eager\": ", JsonTiming(r.eager, r.bytes),
                    ",\n     \"compiled\": ", JsonTiming(r.compiled, r.bytes),
                    ",\n     \"speedup\": ", JsonNumber(r.eager.median_ms() / r.compiled.median_ms()),
                    ", \"cold_compiles\": ", r.cold_compiles, ", \"cold_disk_hits\": ", r.cold_disk_hits,
                    ", \"kernels\": ", JsonStrings(r.kernels),
                    ",\n     \"max_abs_diff\": ", JsonNumber(r.max_abs_diff),
                    ", \"max_abs_diff_tol\": ", JsonNumber(r.max_abs_diff_tol),
                    ", \"rel_err_eager\": ", JsonNumber(r.rel_err_eager),
                    ", \"rel_err_compiled\": ", JsonNumber(r.rel_err_compiled),
                    ", \"rel_err_tol\": ", JsonNumber(r.rel_err_tol), ", \"ok\": ", r.ok() ? "true" : "false",
                    ", \"failures\": ", JsonStrings(r.failures), "}");
  }
  absl::StrAppend(&json, "\n  ]\n}\n");
  std::ofstream out(path);
  out << json;
  out.close();
  FUSEBOX_ENSURE(out.good(), "cannot write --json file '", path, "'");
}

}  // namespace fusebox::bench
