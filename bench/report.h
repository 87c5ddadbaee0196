// fusebox_bench's results and their two outputs: the table printed last (the
// device tool's reply carries the end of the output) and the JSON file that
// tools and later sessions read (--json PATH).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace fusebox::bench {

// What DEVICE.md measured on the H200: 1 GiB device-to-device, read + write.
inline constexpr double kH200CopyCeilingGBps = 4245.0;

struct GeluResult {
  std::string workload;
  Device device;
  Shape shape;
  DType dtype = DType::kFloat32;
  int64_t numel = 0;
  double bytes = 0;  // minimal: input read once + output written once
  int warmup = 0;
  Timing eager, compiled;
  int64_t cold_compiles = 0;    // compiler runs during the compiled cold call
  int64_t cold_disk_hits = 0;   // disk-cache hits during it
  std::vector<std::string> kernels;  // c.kernels() names
  double max_abs_diff = 0, max_abs_diff_tol = 0;
  double rel_err_eager = 0, rel_err_compiled = 0, rel_err_tol = 0;
  std::vector<std::string> failures;
  bool ok() const { return failures.empty(); }
};

struct CopyResult {
  size_t bytes = 0;  // copied; GB/s counts 2 * bytes (read + write)
  std::vector<double> trials_ms;
  bool ok = true;  // the destination held the source afterwards
  double median_ms() const { return Timing{0, trials_ms}.median_ms(); }
  double min_ms() const { return Timing{0, trials_ms}.min_ms(); }
  double gbps() const { return GBps(2.0 * bytes, median_ms()); }
};

struct Report {
  Device device;
  std::string device_name;
  bool quick = false;
  int trials = 0;
  std::vector<std::string> notes;
  std::optional<CopyResult> copy;  // GPU only
  std::vector<GeluResult> gelu;
  bool ok() const;
};

void PrintHeader(const Report& report);
// Per-workload first-call times and checks, then the table.
void PrintTable(const Report& report);
// Throws fusebox::Error when the file cannot be written.
void WriteJson(const Report& report, const std::string& path);

}  // namespace fusebox::bench
