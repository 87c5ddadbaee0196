// fusebox_bench: the project's main job. Runs the seed's manual_gelu on a large
// tensor eagerly (one kernel per op) and compiled (one fused kernel), on
// Device::default_device() (the GPU when one is usable, else the CPU), checks
// that both agree with each other and with a float64 host reference, and
// prints median/min times, effective GB/s (minimal bytes: input read once,
// output written once) and the fused kernels' names, for float32 and bf16. On a
// GPU it also measures the device-to-device copy ceiling in the same run.
//   fusebox_bench [--quick] [--json PATH] [--device cpu|cuda]
// Exit status: 0 all checks passed, 1 a check failed or an error, 2 bad flags.
#include <cmath>
#include <functional>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "backend/compile_cache.h"
#include "backend/cuda/driver.h"
#include "bench/harness.h"
#include "bench/report.h"
#include "frontend/fusebox.h"

namespace fusebox::bench {
namespace {

constexpr char kGeluKernel[] = "poi_fused_add_mul_pow_tanh_0";

Tensor ManualGelu(const Tensor& x) {
  return 0.5 * x * (1.0 + tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * pow(x, 3.0))));
}

double ManualGeluRef(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

struct Options {
  bool quick = false;
  std::string json_path;
  std::optional<Device> device;
};

struct Settings {
  int warmup;
  int trials;
};

Settings SettingsFor(Device device, bool quick) {
  if (quick) return {2, 5};
  return device.is_cuda() ? Settings{10, 50} : Settings{2, 10};
}

Shape GeluShape(Device device, bool quick) {
  // GPU: 8192x8192 f32 is 256 MB, past the H200's 60 MB L2, so every trial
  // reads HBM. CPU: 4M elements keeps the whole CPU run to seconds.
  if (device.is_cuda()) return quick ? Shape{1024, 1024} : Shape{8192, 8192};
  return quick ? Shape{512, 512} : Shape{2048, 2048};
}

// Tolerances: eager and compiled compute the same expression with the same
// math functions, so float32 differs by rounding only; bf16 eager rounds
// every intermediate to bf16 while the fused kernel keeps them in float32.
void SetTolerances(GeluResult& r) {
  if (r.dtype == DType::kBFloat16) {
    r.max_abs_diff_tol = 0.0625;  // two bf16 ulps at |y| in [4, 8)
    r.rel_err_tol = 1e-2;
  } else {
    r.max_abs_diff_tol = 1e-4;
    r.rel_err_tol = 1e-5;
  }
}

// Max |a - b| and the two relative L2 errors ||out - ref|| / ||ref|| against
// a float64 reference of the input as stored. NaN never passes.
using Reference = std::function<std::vector<double>(const std::vector<double>& x, const Shape& shape)>;

void Check(const Tensor& x, const Tensor& eager, const Tensor& compiled, const Reference& reference, GeluResult& r) {
  const std::vector<double> refs = reference(x.to_double_vector(), x.shape());
  const std::vector<double> es = eager.to_double_vector();
  const std::vector<double> cs = compiled.to_double_vector();
  double max_diff = 0, ref_sq = 0, eager_sq = 0, compiled_sq = 0;
  bool finite = es.size() == refs.size() && cs.size() == refs.size();
  for (size_t i = 0; finite && i < refs.size(); ++i) {
    const double ref = refs[i];
    if (!std::isfinite(es[i]) || !std::isfinite(cs[i])) finite = false;
    max_diff = std::max(max_diff, std::abs(es[i] - cs[i]));
    ref_sq += ref * ref;
    eager_sq += (es[i] - ref) * (es[i] - ref);
    compiled_sq += (cs[i] - ref) * (cs[i] - ref);
  }
  r.max_abs_diff = finite ? max_diff : NAN;
  r.rel_err_eager = finite && ref_sq > 0 ? std::sqrt(eager_sq / ref_sq) : NAN;
  r.rel_err_compiled = finite && ref_sq > 0 ? std::sqrt(compiled_sq / ref_sq) : NAN;
  // Written as !(x <= tol) so that NaN fails.
  if (!(r.max_abs_diff <= r.max_abs_diff_tol)) r.failures.push_back("eager and compiled results disagree");
  if (!(r.rel_err_eager <= r.rel_err_tol)) r.failures.push_back("eager result is off the float64 reference");
  if (!(r.rel_err_compiled <= r.rel_err_tol)) r.failures.push_back("compiled result is off the float64 reference");
}

// Rows of the last dim: softmax in float64.
std::vector<double> SoftmaxRef(const std::vector<double>& x, const Shape& shape) {
  const int64_t cols = shape.back(), rows = static_cast<int64_t>(x.size()) / cols;
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = &x[r * cols];
    double m = -INFINITY, sum = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, row[c]);
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(row[c] - m);
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = std::exp(row[c] - m) / sum;
  }
  return out;
}

std::vector<double> LayerNormRef(const std::vector<double>& x, const Shape& shape) {
  const int64_t cols = shape.back(), rows = static_cast<int64_t>(x.size()) / cols;
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = &x[r * cols];
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mean += row[c] / cols;
    for (int64_t c = 0; c < cols; ++c) var += (row[c] - mean) * (row[c] - mean) / cols;
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = (row[c] - mean) / std::sqrt(var + 1e-5);
  }
  return out;
}

Tensor ManualSoftmax(const Tensor& x) {
  Tensor shifted = x - max(x, -1, /*keepdim=*/true);
  Tensor numerator = exp(shifted);
  return numerator / sum(numerator, -1, /*keepdim=*/true);
}

Tensor ManualLayerNorm(const Tensor& x) {
  Tensor centered = x - mean(x, -1, /*keepdim=*/true);
  return centered * rsqrt(mean(centered * centered, -1, /*keepdim=*/true) + 1e-5);
}

struct Workload {
  std::string name;
  std::function<Tensor(const Tensor&)> fn;
  Reference reference;
  std::string expected_kernel;
};

GeluResult RunWorkload(const Workload& w, Device device, DType dtype, const Shape& shape, const Settings& settings);

GeluResult RunGelu(Device device, DType dtype, const Shape& shape, const Settings& settings) {
  Reference ref = [](const std::vector<double>& x, const Shape&) {
    std::vector<double> out;
    for (double v : x) out.push_back(ManualGeluRef(v));
    return out;
  };
  return RunWorkload({"manual_gelu", ManualGelu, ref, kGeluKernel}, device, dtype, shape, settings);
}

GeluResult RunWorkload(const Workload& w, Device device, DType dtype, const Shape& shape, const Settings& settings) {
  GeluResult r;
  r.workload = w.name;
  r.device = device;
  r.shape = shape;
  r.dtype = dtype;
  r.numel = Numel(shape);
  r.bytes = static_cast<double>(r.numel) * 2 * DTypeSize(dtype);  // read x once, write y once
  r.warmup = settings.warmup;
  SetTolerances(r);

  Tensor x = randn(shape, device, /*seed=*/1);
  if (dtype != DType::kFloat32) x = x.to(dtype);
  auto compiled_gelu = compile(w.fn);

  // Cold calls first (they compile); their outputs are the ones checked, taken
  // before any timed call could leave a correct result in a reused block.
  Tensor eager_out, compiled_out;
  r.eager.cold_ms = TimeOnceMs(device, [&] { eager_out = w.fn(x); });
  const backend::CompileCacheStats before = backend::CompileCache::Get().stats();
  r.compiled.cold_ms = TimeOnceMs(device, [&] { compiled_out = compiled_gelu(x); });
  const backend::CompileCacheStats after = backend::CompileCache::Get().stats();
  r.cold_compiles = after.compiles - before.compiles;
  r.cold_disk_hits = after.disk_hits - before.disk_hits;
  for (const KernelInfo& k : compiled_gelu.kernels()) r.kernels.push_back(k.name);
  // Reductions are named per_ or red_ by row length; the rest of the name is fixed.
  auto named = [&](const std::string& k) { return k == w.expected_kernel || k.substr(3) == w.expected_kernel.substr(3); };
  if (std::none_of(r.kernels.begin(), r.kernels.end(), named)) {
    r.failures.push_back(absl::StrCat("no kernel named ", w.expected_kernel, " (got: ", absl::StrJoin(r.kernels, ", "), ")"));
  }
  Check(x, eager_out, compiled_out, w.reference, r);
  eager_out = compiled_out = Tensor();

  r.eager.trials_ms = TimeTrialsMs(device, settings.warmup, settings.trials, [&] { (void)w.fn(x); });
  r.compiled.trials_ms = TimeTrialsMs(device, settings.warmup, settings.trials, [&] { (void)compiled_gelu(x); });
  return r;
}

// 1 GiB device-to-device copy (cuMemcpyDtoD), bytes read + written counted:
// the ceiling for every memory-bound kernel on this GPU.
CopyResult MeasureCopy(Device device, size_t bytes, const Settings& settings) {
  cuda::Driver& driver = cuda::Driver::Get();
  CopyResult r;
  r.bytes = bytes;
  const CUdeviceptr src = ValueOrThrow(driver.MemAlloc(device.index, bytes));
  const CUdeviceptr dst = ValueOrThrow(driver.MemAlloc(device.index, bytes));
  {
    std::vector<uint32_t> pattern(bytes / sizeof(uint32_t));
    for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint32_t>(i * 2654435761u);
    ThrowIfError(driver.CopyHostToDevice(device.index, src, pattern.data(), bytes));
  }
  r.trials_ms = TimeTrialsMs(device, settings.warmup, settings.trials,
                             [&] { ThrowIfError(driver.CopyDeviceToDevice(device.index, dst, src, bytes)); });
  // The copy must have happened: compare the last 4 KiB.
  std::vector<uint32_t> tail(1024);
  ThrowIfError(driver.CopyDeviceToHost(device.index, tail.data(), dst + bytes - 4096, 4096));
  const size_t first = (bytes - 4096) / sizeof(uint32_t);
  for (size_t i = 0; i < tail.size(); ++i) {
    if (tail[i] != static_cast<uint32_t>((first + i) * 2654435761u)) r.ok = false;
  }
  ThrowIfError(driver.MemFree(device.index, src));
  ThrowIfError(driver.MemFree(device.index, dst));
  return r;
}

int Usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--quick] [--json PATH] [--device cpu|cuda]\n", argv0);
  return 2;
}

int Main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      options.quick = true;
    } else if (arg == "--json" && i + 1 < argc) {
      options.json_path = argv[++i];
    } else if (arg == "--device" && i + 1 < argc) {
      const std::string d = argv[++i];
      if (d != "cpu" && d != "cuda") return Usage(argv[0]);
      options.device = d == "cpu" ? Device::cpu() : Device::cuda(0);
    } else {
      return Usage(argv[0]);
    }
  }

  const Device device = options.device.value_or(Device::default_device());
  if (device.is_cuda() && !cuda_available()) {
    std::fprintf(stderr, "fusebox_bench: no usable GPU: %s\n", cuda::Driver::Get().unavailable_reason().c_str());
    return 1;
  }
  const Settings settings = SettingsFor(device, options.quick);
  Report report;
  report.device = device;
  report.device_name = DeviceName(device);
  report.quick = options.quick;
  report.trials = settings.trials;
  if (device.is_cpu() && !cuda_available()) report.notes.push_back(cuda::Driver::Get().unavailable_reason());
  PrintHeader(report);

  if (device.is_cuda()) {
    report.copy = MeasureCopy(device, options.quick ? (size_t{64} << 20) : (size_t{1} << 30), settings);
  }
  const Shape shape = GeluShape(device, options.quick);
  report.gelu.push_back(RunGelu(device, DType::kFloat32, shape, settings));
  report.gelu.push_back(RunGelu(device, DType::kBFloat16, shape, settings));

  // The seed's fused softmax (section 6) and a hand-written layer_norm: one
  // reduction kernel each. GPU shapes are the issue's; the CPU's are smaller.
  const Workload softmax{"manual_softmax", ManualSoftmax, SoftmaxRef, "red_fused_div_exp_max_sub_sum_0"};
  const Workload layer_norm{"manual_layer_norm", ManualLayerNorm, LayerNormRef,
                            "red_fused_add_div_mul_rsqrt_sub_sum_0"};
  const bool gpu = device.is_cuda();
  for (const Shape& s : options.quick ? std::vector<Shape>{{256, 512}}
                        : gpu         ? std::vector<Shape>{{8192, 8192}, {1024, 65536}, {32768, 1024}}
                                      : std::vector<Shape>{{1024, 1024}}) {
    report.gelu.push_back(RunWorkload(softmax, device, DType::kFloat32, s, settings));
  }
  report.gelu.push_back(RunWorkload(layer_norm, device, DType::kFloat32,
                                    options.quick ? Shape{256, 512} : gpu ? Shape{16384, 4096} : Shape{1024, 1024},
                                    settings));

  PrintTable(report);
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
