#include "bench/suite.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "backend/compile_cache.h"
#include "frontend/capture.h"
#include "frontend/runtime.h"
#include "graph/op.h"

namespace fusebox::bench {
namespace {

using Sets = std::vector<std::vector<Tensor>>;

// The float64 check reads up to three slices of about this many elements.
constexpr int64_t kSliceElements = int64_t{1} << 16;

std::vector<Tensor> MakeInputs(const Case& c, Device device, uint64_t seed) {
  const std::vector<Shape> shapes = InputShapes(*c.workload, c.shape);
  const std::vector<double> scales = InputScales(*c.workload, c.shape);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Tensor t = randn(shapes[i], device, seed++);
    if (scales[i] != 1.0) t = t * scales[i];
    inputs.push_back(c.dtype == DType::kFloat32 ? t : t.to(c.dtype));
  }
  return inputs;
}

double Bytes(const Tensor& t) { return static_cast<double>(t.numel()) * DTypeSize(t.dtype()); }

// The ops one eager call runs, each as its own kernel: the compute nodes of
// the graph compile() would capture.
std::vector<std::string> EagerOps(const WorkloadFn& fn, const std::vector<Tensor>& inputs) {
  frontend::CaptureSession session(/*eager=*/false);
  const graph::Graph g = session.Snapshot({Invoke(fn, inputs)});
  std::vector<std::string> ops;
  for (const graph::Node& n : g.nodes()) {
    const graph::OpKind kind = graph::Info(n.op).kind;
    if (kind == graph::OpKind::kPointwise || kind == graph::OpKind::kReduction || kind == graph::OpKind::kExtern ||
        kind == graph::OpKind::kMove) {
      ops.push_back(graph::OpName(n.op));
    }
  }
  return ops;
}

// Start and length of the slices along a dim of `size` positions that the
// float64 check reads: the first, middle and last `len`, or all of it.
std::vector<std::pair<int64_t, int64_t>> Slices(int64_t size, int64_t len) {
  if (3 * len >= size) return {{0, size}};
  return {{0, len}, {(size - len) / 2, len}, {size - len, len}};
}

// Tolerances: eager and compiled compute the same expression with the same
// math functions, so float32 differs by rounding (and summation order) only;
// bf16 eager rounds every intermediate to bf16 while the fused kernel keeps
// them in float32 (two bf16 ulps).
void SetTolerances(Result& r, double max_abs_eager) {
  const bool bf16 = r.dtype == DType::kBFloat16;
  r.max_abs_diff_tol = (bf16 ? 1.0 / 64 : 1e-5) * std::max(1.0, max_abs_eager);
  r.rel_err_tol = bf16 ? 1e-2 : 1e-5;
}

// Max |eager - compiled| over the whole output, then relative L2 errors of
// both against float64 on sampled slices. On the host: on the CPU, eager
// check ops would each compile a kernel per shape. NaN never passes.
void Check(const Workload& w, const std::vector<Tensor>& inputs, const Tensor& eager, const Tensor& compiled,
           Result& r) {
  // Floats hold every float32 and bf16 value exactly, and to_vector() copies
  // float32 with memcpy: 64M-element outputs take well under a second.
  const std::vector<float> es = eager.to_vector(), cs = compiled.to_vector();
  FUSEBOX_CHECK(eager.shape() == compiled.shape(), "eager ", ShapeToString(eager.shape()), " vs compiled ",
                ShapeToString(compiled.shape()));
  double max_abs_eager = 0;
  for (size_t i = 0; i < es.size(); ++i) {
    r.max_abs_diff = std::max(r.max_abs_diff, std::abs(static_cast<double>(es[i]) - cs[i]));
    max_abs_eager = std::max(max_abs_eager, std::abs(static_cast<double>(es[i])));
    if (!std::isfinite(es[i]) || !std::isfinite(cs[i])) r.max_abs_diff = NAN;
  }
  SetTolerances(r, max_abs_eager);

  const int64_t positions = inputs[0].size(w.sample_dim);
  const int64_t per_position = std::max<int64_t>(1, inputs[0].numel() / std::max<int64_t>(1, positions));
  const size_t out_per_position = es.size() / static_cast<size_t>(eager.size(0));
  double ref_sq = 0, eager_sq = 0, compiled_sq = 0;
  const int64_t slice_len = w.check_rows > 0 ? w.check_rows : std::max<int64_t>(1, kSliceElements / per_position);
  for (const auto& [start, len] : Slices(positions, slice_len)) {
    std::vector<std::vector<double>> in;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const bool sliced = Sliced(w.inputs[i]);
      in.push_back((sliced ? inputs[i].narrow(w.sample_dim, start, len) : inputs[i]).to_double_vector());
    }
    Shape slice = inputs[0].shape();
    slice[w.sample_dim] = len;
    const std::vector<double> ref = w.reference_at != nullptr ? w.reference_at(in, slice, start) : w.reference(in, slice);
    const size_t first = static_cast<size_t>(start) * out_per_position;
    FUSEBOX_CHECK(ref.size() == static_cast<size_t>(len) * out_per_position && first + ref.size() <= es.size(),
                  "the reference slice of ", ref.size(), " elements does not match the output");
    for (size_t i = 0; i < ref.size(); ++i) {
      ref_sq += ref[i] * ref[i];
      const double e = es[first + i], c = cs[first + i];
      eager_sq += (e - ref[i]) * (e - ref[i]);
      compiled_sq += (c - ref[i]) * (c - ref[i]);
    }
    r.checked += static_cast<int64_t>(ref.size());
  }
  // Non-finite outputs make these non-finite.
  r.rel_err_eager = ref_sq > 0 ? std::sqrt(eager_sq / ref_sq) : NAN;
  r.rel_err_compiled = ref_sq > 0 ? std::sqrt(compiled_sq / ref_sq) : NAN;
  // Written as !(x <= tol) so that NaN fails.
  if (!(r.max_abs_diff <= r.max_abs_diff_tol)) r.failures.push_back("eager and compiled results disagree");
  if (!(r.rel_err_eager <= r.rel_err_tol)) r.failures.push_back("eager result is off the float64 reference");
  if (!(r.rel_err_compiled <= r.rel_err_tol)) r.failures.push_back("compiled result is off the float64 reference");
}

// "1. poi_gelu_1: 5 calls, 41.2 us lost of 52.0 us (20.8% of its roofline), 4.19 GB/s, 0.00 TFLOP/s".
std::vector<std::string> WorstLines(const std::vector<ProfilerRow>& worst) {
  std::vector<std::string> lines;
  for (const ProfilerRow& row : worst) {
    lines.push_back(absl::StrFormat("%zu. %s: %lld calls, %.1f us lost of %.1f us (%.1f%% of its roofline), %.1f GB/s,"
                                    " %.2f TFLOP/s",
                                    lines.size() + 1, row.name, static_cast<long long>(row.calls), row.time_lost_us(),
                                    row.kernel_time_total_us, row.roofline_percent(), row.bytes_per_s() / 1e9,
                                    row.flops_per_s() / 1e12));
  }
  return lines;
}

}  // namespace

void MemoryBoundKernels(const std::vector<ProfilerRow>& rows, const Roofline& roofline, Result& r) {
  std::vector<const ProfilerRow*> under, library_under;
  for (const ProfilerRow& row : rows) {
    if (!row.kernel || !row.has_roofline() || roofline.copy_bytes_per_s <= 0) continue;
    // A library kernel (a GEMM near the ridge, a short attention) is bound by
    // its math in practice even where its bytes outweigh its FLOPs at peak.
    const bool library = absl::StartsWith(row.name, "extern_");
    r.profile_kernels.push_back({.name = row.name, .calls = row.calls, .time_us = row.kernel_time_total_us,
                                 .bytes = row.bytes_total, .flops = row.flops_total,
                                 .roofline_percent = row.roofline_percent(), .library = library});
    const double copy_us = row.bytes_total / roofline.copy_bytes_per_s * 1e6;
    if (std::fabs(row.roofline_time_total_us - copy_us) > 1e-6 * std::max(1.0, copy_us)) continue;
    r.profile_kernels.back().memory_bound = true;
    ++(library ? r.profile_library_memory_bound : r.profile_memory_bound);
    if (row.roofline_percent() < 80) (library ? library_under : under).push_back(&row);
  }
  // Worst first, each with its percent and its bytes a call (small kernels
  // pay the launch and the tail).
  auto list = [](std::vector<const ProfilerRow*>& rows, std::vector<std::string>& out) {
    std::sort(rows.begin(), rows.end(),
              [](const ProfilerRow* a, const ProfilerRow* b) { return a->roofline_percent() < b->roofline_percent(); });
    for (const ProfilerRow* row : rows) {
      out.push_back(absl::StrFormat("%s %.1f%% (%.2f MB)", row->name, row->roofline_percent(),
                                    row->bytes_total / std::max<int64_t>(row->calls, 1) / 1e6));
    }
  };
  list(under, r.profile_memory_bound_under_80);
  list(library_under, r.profile_library_under_80);
}

void Profile(Device device, const std::function<void(int)>& call, Result& r) {
  constexpr int kCalls = 5;
  auto host_ms = [&](int i) {
    Synchronize(device);
    const auto start = std::chrono::steady_clock::now();
    call(i);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<double> plain_ms, profiled_ms;
  for (int i = 0; i < kCalls; ++i) plain_ms.push_back(host_ms(i));
  {
    Profiler prof;
    for (int i = 0; i < kCalls; ++i) profiled_ms.push_back(host_ms(i));
    Synchronize(device);
    prof.stop();
    Roofline roofline = prof.roofline(device);
    if (r.plan.copy_ceiling_gbps > 0) roofline.copy_bytes_per_s = r.plan.copy_ceiling_gbps * 1e9;
    prof.set_roofline(device, roofline);
    r.profile_table = prof.table("cuda_time_total", 40);
    r.profile_roofline = roofline.ToString();
    r.profile_worst = WorstLines(prof.worst(5));
    MemoryBoundKernels(prof.summary("cuda_time_total"), roofline, r);
  }
  r.host_ms_per_call = Timing{0, plain_ms}.median_ms();
  r.host_ms_per_call_profiled = Timing{0, profiled_ms}.median_ms();
}

namespace {

void Run(const Case& c, Device device, const TimingPlan& plan, double cache_bytes, uint64_t seed, Result& r) {
  const Workload& w = *c.workload;
  Sets sets = {MakeInputs(c, device, seed)};
  r.eager.kernels = EagerOps(w.fn, sets[0]);

  // First calls (they compile); their outputs are the ones checked, taken
  // before any timed call could leave a correct result in a reused block.
  CompileOptions options;
  options.replay = c.replay;
  CompiledWorkload compiled(w.fn, options);
  Tensor eager_out, compiled_out;
  r.eager.timing.cold_ms = TimeOnceMs(device, [&] { eager_out = Invoke(w.fn, sets[0]); });
  const backend::CompileCacheStats before = backend::CompileCache::Get().stats();
  r.compiled.timing.cold_ms = TimeOnceMs(device, [&] { compiled_out = compiled(sets[0]); });
  const backend::CompileCacheStats after = backend::CompileCache::Get().stats();
  r.cold_compiles = after.compiles - before.compiles;
  r.cold_disk_hits = after.disk_hits - before.disk_hits;
  r.cold_times = compiled.stats().times;
  CompiledWorkload second(w.fn);  // a new compiled function: its plan is in the process's cache
  r.warm_start_ms = TimeOnceMs(device, [&] { (void)second(sets[0]); });
  for (const KernelInfo& k : compiled.kernels()) r.compiled.kernels.push_back(k.name);
  r.compiled.ptx = PtxLines(compiled.kernels());
  r.compiled.kernels_per_call = static_cast<int64_t>(r.compiled.kernels.size());
  const int expected_kernels = c.fused_kernels > 0 ? c.fused_kernels : w.fused_kernels;
  if (r.compiled.kernels_per_call != expected_kernels) {
    r.failures.push_back(absl::StrCat("compiled to ", r.compiled.kernels_per_call, " kernels, expected ",
                                      expected_kernels));
  }

  r.bytes = Bytes(eager_out);
  for (const Tensor& t : sets[0]) r.bytes += Bytes(t);
  Check(w, sets[0], eager_out, compiled_out, r);
  eager_out = compiled_out = Tensor();

  r.input_sets = RotationSets(r.bytes, cache_bytes, plan.max_input_sets);
  // The other sets are copies of the first in buffers of their own: the cache
  // sees other addresses, and drawing fresh values would take longer than
  // the case (randn runs on the host).
  for (int s = 1; s < r.input_sets; ++s) {
    std::vector<Tensor> copies;
    for (const Tensor& t : sets[0]) copies.push_back(t.clone());
    sets.push_back(std::move(copies));
  }
  r.eager.kernels_per_call = GraphsRun([&] { (void)Invoke(w.fn, sets[0]); });
  const int k = r.input_sets;
  r.eager.timing.trials_ms = TimeTrialsMs(device, plan, [&](int call) { (void)Invoke(w.fn, sets[call % k]); });
  r.compiled.timing.trials_ms = TimeTrialsMs(device, plan, [&](int call) { (void)compiled(sets[call % k]); });
  if (plan.profile) Profile(device, [&](int call) { (void)compiled(sets[static_cast<size_t>(call) % sets.size()]); }, r);
  if (w.gemms != nullptr) {
    // The baseline: the same GEMMs on the same inputs, nothing around them,
    // compiled as the case is.
    CompiledWorkload gemms(w.gemms->fn, options);
    r.gemms.emplace();
    r.gemms->timing.cold_ms = TimeOnceMs(device, [&] { (void)gemms(sets[0]); });
    for (const KernelInfo& kernel : gemms.kernels()) r.gemms->kernels.push_back(kernel.name);
    r.gemms->kernels_per_call = static_cast<int64_t>(r.gemms->kernels.size());
    r.gemms->timing.trials_ms = TimeTrialsMs(device, plan, [&](int call) { (void)gemms(sets[call % k]); });
  }
}

}  // namespace

int64_t GraphsRun(const std::function<void()>& fn) {
  const frontend::RuntimeStats before = frontend::GetRuntimeStats();
  fn();
  const frontend::RuntimeStats after = frontend::GetRuntimeStats();
  return (after.plan_compiles + after.plan_cache_hits) - (before.plan_compiles + before.plan_cache_hits);
}

std::vector<std::string> PtxLines(const std::vector<KernelInfo>& kernels) {
  std::vector<std::pair<std::string, std::string>> seen;  // summary, first kernel's name
  std::vector<int> counts;
  for (const KernelInfo& k : kernels) {
    if (!k.ptx_summary) continue;
    const std::string summary = k.ptx_summary->ToString();
    auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first == summary; });
    if (it != seen.end()) {
      ++counts[it - seen.begin()];
    } else {
      seen.emplace_back(summary, k.name);
      counts.push_back(1);
    }
  }
  std::vector<std::string> lines;
  for (size_t i = 0; i < seen.size(); ++i) {
    lines.push_back(absl::StrCat(seen[i].second, counts[i] > 1 ? absl::StrCat(" (x", counts[i], ")") : "", ": ",
                                 seen[i].first));
  }
  return lines;
}

std::vector<Case> SuiteCases(bool quick) {
  using enum DType;
  auto q = [quick](Shape full, Shape small) { return quick ? small : full; };
  std::vector<Case> cases = {
      {"manual_gelu", &kManualGelu, q({8192, 8192}, {256, 256}), kFloat32, ""},
      {"manual_gelu", &kManualGelu, q({8192, 8192}, {256, 256}), kBFloat16, ""},
      {"add_mul_tanh", &kAddMulTanh, q({int64_t{1} << 26}, {int64_t{1} << 16}), kFloat32, "3 inputs"},
      {"manual_softmax", &kManualSoftmax, q({32768, 1024}, {1024, 64}), kFloat32, "short rows"},
      {"manual_softmax", &kManualSoftmax, q({8192, 8192}, {256, 256}), kFloat32, "square"},
      // Long rows: past fusion::kPersistentRowLimit (4096), the looped kernel.
      {"manual_softmax", &kManualSoftmax, q({1024, 65536}, {8, 8192}), kFloat32, "long rows"},
      {"manual_layer_norm", &kManualLayerNorm, q({16384, 4096}, {256, 512}), kFloat32, "with weight and bias"},
      {"manual_rms_norm", &kManualRmsNorm, q({16384, 4096}, {256, 512}), kFloat32, "with weight"},
      {"row_sum", &kRowSum, q({8192, 8192}, {256, 256}), kFloat32, "sum over the last dim"},
      {"col_sum", &kColSum, q({8192, 8192}, {256, 256}), kFloat32, "sum over dim 0"},
      {"tiny_gelu", &kManualGelu, {4096}, kFloat32, "call overhead", /*calls_per_trial=*/quick ? 20 : 100},
      {"tiny_gelu", &kManualGelu, {4096}, kFloat32, "call overhead, replay", quick ? 20 : 100, /*replay=*/true},
  };
  // Matmul workloads (issue 7), in TFLOP/s beside their GEMMs alone. Quick
  // sizes are odd, as the tests' are.
  const Shape gemm = q({8192, 4096, 4096}, {96, 160, 72});
  Case epilogue{"gemm_bias_gelu", &kGemmBiasGelu, gemm, kBFloat16, "bias and gelu in the GEMM's epilogue"};
  epilogue.fused_kernels = 1;
  cases.push_back(epilogue);
  Case after{"gemm_bias_gelu", &kGemmBiasGelu, gemm, kBFloat16, "epilogue fusion off: GEMM, then a kernel"};
  after.epilogue_fusion = false;
  cases.push_back(after);
  // The seed's MLP: dim 2048, 16 layers, batch 1024, float32 (no TF32).
  // Exact gelu is not cuBLASLt's: per layer the GEMM (bias in its
  // epilogue), then a kernel for the gelu.
  const Shape mlp = q({1024, 2048, 16}, {24, 136, 3});
  for (bool replay : {false, true}) {
    Case seed_mlp{"mlp", &kMlp, mlp, kFloat32, replay ? "the seed's MLP, replay" : "the seed's MLP, exact gelu"};
    seed_mlp.replay = replay;
    seed_mlp.fused_kernels = static_cast<int>(2 * mlp[2]);
    cases.push_back(seed_mlp);
  }
  // GPT-2 (issue 24): nanoGPT's forward and loss, f32 (no TF32) and bf16,
  // attention written out and by SDPA; GPT-2 small at B 8, T 1024 on a GPU.
  for (DType dtype : {kFloat32, kBFloat16}) {
    for (gpt2::Attention attention : {gpt2::Attention::kManual, gpt2::Attention::kSdpa}) {
      const Gpt2Spec spec = Gpt2Size(quick, attention);
      Case row{kGpt2Forward, nullptr, {spec.batch, spec.seq}, dtype,
               attention == gpt2::Attention::kSdpa ? "SDPA" : "manual attention"};
      row.gpt2 = spec;
      cases.push_back(row);
    }
  }
  // Attention (issue 24), in TFLOP/s: bf16, B 8, 16 heads of 64 or 8 of 128,
  // causal and not; T 2048 and 4096; then f32 at GPT-2's size. Quick: one odd size.
  for (const Workload* w : {&kAttention, &kAttentionCausal}) {
    const bool causal = w == &kAttentionCausal;
    for (Shape shape : {Shape{2048, 8, 16, 64}, Shape{4096, 8, 16, 64}, Shape{2048, 8, 8, 128}, Shape{4096, 8, 8, 128}}) {
      if (quick && shape[0] != 2048) continue;
      shape = q(shape, {67, 2, 3, shape[3]});
      cases.push_back({w->name, w, shape, kBFloat16, absl::StrCat(causal ? "causal, " : "", "head dim ", shape[3])});
    }
    // f32 (FMA; TF32 off in PyTorch) at GPT-2 small's size: T 1024, B 8, 12 heads of 64.
    cases.push_back({w->name, w, q(Shape{1024, 8, 12, 64}, {67, 2, 3, 64}), kFloat32,
                     absl::StrCat(causal ? "causal, " : "", "head dim 64, GPT-2 small's")});
  }
  // GB/s against size: every power of two on a GPU, every second one quick.
  const int last = quick ? 18 : 28, step = quick ? 2 : 1;
  for (int p = 10; p <= last; p += step) {
    cases.push_back({"gelu_sweep", &kManualGelu, {int64_t{1} << p}, kFloat32, absl::StrCat("2^", p)});
  }
  return cases;
}

bool Matches(const std::string& filter, const std::string& name) {
  if (filter.empty()) return true;
  // Sweep rows name shapes with commas: a filter holding ';' splits there.
  const char separator = absl::StrContains(filter, ';') ? ';' : ',';
  for (absl::string_view word : absl::StrSplit(filter, separator, absl::SkipEmpty())) {
    if (absl::StrContains(name, word)) return true;
  }
  return false;
}

std::string FilterKey(const Case& c) {
  return c.label.empty() ? c.name : absl::StrCat(c.name, " ", c.label, " ", DTypeName(c.dtype));
}

Result RunCase(const Case& c, Device device, const TimingPlan& plan, double cache_bytes, uint64_t seed) {
  Result r;
  r.name = c.name;
  r.workload = c.gpt2 ? kGpt2Forward : c.workload->name;
  r.label = c.label;
  r.replay = c.replay;
  r.device = device;
  r.shape = c.shape;
  r.input_shapes = c.gpt2 ? std::vector<Shape>{c.shape, c.shape} : InputShapes(*c.workload, c.shape);
  if (!c.gpt2) r.input_scales = InputScales(*c.workload, c.shape);
  if (c.gpt2) r.config_json = Gpt2Json(*c.gpt2);
  r.flops = c.gpt2 ? Gpt2Flops(*c.gpt2) : c.workload->flops != nullptr ? c.workload->flops(c.shape) : 0.0;
  r.epilogue_fusion = c.epilogue_fusion;
  r.dtype = c.dtype;
  r.numel = Numel(c.shape);
  r.plan = plan;
  r.plan.calls_per_trial = c.calls_per_trial;
  r.plan.warmup = std::max(plan.warmup, c.calls_per_trial);
  try {
    MatmulEpilogueFusionScope epilogue(c.epilogue_fusion);
    if (c.gpt2) {
      RunGpt2Forward(*c.gpt2, device, r.plan, seed, r);
    } else {
      Run(c, device, r.plan, cache_bytes, seed, r);
    }
  } catch (const std::exception& e) {
    r.failures.push_back(absl::StrCat("error: ", e.what()));
  }
  return r;
}

}  // namespace fusebox::bench
