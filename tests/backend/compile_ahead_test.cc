// Compiling a plan's kernels ahead, in parallel (backend/compile_ahead.h): the
// same sources and results as lowering and printing one kernel at a time; a
// plan whose kernels are all on disk runs no compiler, NVRTC included; the
// GPU's first compile of a plan of several kernels.
#include <cmath>
#include <random>
#include <set>
#include <string>

#include "backend/compile_ahead.h"
#include "backend/compile_cache.h"
#include "backend/cpu/cpp_printer.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/nvrtc.h"
#include "backend/executable.h"
#include "backend/kernel_entry.h"
#include "backend/lower.h"
#include "frontend/capture.h"
#include "frontend/fusebox.h"
#include "fusion/pipeline.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"

namespace fusebox::backend {
namespace {

// A graph of several kernels (unfused: one per op) whose sources no other
// test produces (the scale is random), so its first compile misses the cache.
fusion::Plan SeveralKernels(Device device, double scale, Tensor* x) {
  *x = randn({33, 7}, device, testing_workloads::FreshSeed());
  frontend::CaptureSession session(/*eager=*/false);
  Tensor y = exp(*x * scale) + tanh(*x) * scale;
  return fusion::BuildPlan(session.Snapshot({sum(y, -1)}), {}, {.fuse = false});
}

double RandomScale() {
  std::mt19937 gen(std::random_device{}());
  return std::uniform_real_distribution<double>(2, 3)(gen);
}

std::vector<float> RunOnce(const Executable& exe, const Tensor& x) {
  absl::StatusOr<std::vector<Tensor>> out = exe.Run({x});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? out->at(0).to_vector() : std::vector<float>{};
}

TEST(CompileAheadTest, SameSourcesAsOneKernelAtATime) {
  Tensor x;
  const fusion::Plan plan = SeveralKernels(Device::cpu(), RandomScale(), &x);
  ASSERT_GE(plan.kernels.size(), 4u);
  const std::vector<PreparedKernel> prepared = CompileAhead(plan, 90, /*cuda_twins=*/true, backend::CurrentTuning());
  ASSERT_EQ(prepared.size(), plan.kernels.size());
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const Kernel ir = LowerKernel(plan, plan.kernels[k], backend::CurrentTuning());
    EXPECT_EQ(prepared[k].ir.name, plan.kernels[k].name);
    EXPECT_EQ(prepared[k].source, cpu::PrintCpp(ir)) << plan.kernels[k].name;
    EXPECT_EQ(prepared[k].cuda_source, PrintCuda(ir, backend::CurrentTuning())) << plan.kernels[k].name;
  }
}

TEST(CompileAheadTest, ParallelCompileThenWarmStartRunsNoCompiler) {
  Tensor x;
  const fusion::Plan plan = SeveralKernels(Device::cpu(), RandomScale(), &x);
  const size_t kernels = plan.kernels.size();
  CompileCache& cache = CompileCache::Get();

  // Cold: the kernels that multiply by the new scale (two, equal but for
  // their names and inputs: one source under kKernelEntry), with its CUDA
  // twin (tests cross-compile), are compiled; the others may be cached.
  const CompileCacheStats s0 = cache.stats();
  absl::StatusOr<std::shared_ptr<const Executable>> cold = Executable::Compile(plan);
  ASSERT_TRUE(cold.ok()) << cold.status();
  const CompileCacheStats s1 = cache.stats();
  EXPECT_GE((*cold)->compiled_kernels(), 2);
  EXPECT_EQ((*cold)->compiled_kernels(), s1.compiles - s0.compiles);
  EXPECT_GT(s1.busy_ms, s0.busy_ms);
  EXPECT_GE(s1.compile_ms - s0.compile_ms, s1.busy_ms - s0.busy_ms - 1e-6);  // summed over threads >= wall

  // Warm: the same plan with the memory cache forgotten: all from disk.
  cache.ClearMemory();
  const int64_t nvrtc_before = cuda::GetNvrtcCounters().programs;
  absl::StatusOr<std::shared_ptr<const Executable>> warm = Executable::Compile(plan);
  ASSERT_TRUE(warm.ok()) << warm.status();
  EXPECT_EQ((*warm)->compiled_kernels(), 0);
  EXPECT_EQ(cache.stats().compiles, s1.compiles);
  // One disk hit per distinct source (and its CUDA twin), fewer than kernels.
  std::set<std::string> distinct;
  for (const KernelInfo& k : (*cold)->kernels()) distinct.insert(UnderEntryName(k.source, k.name, kKernelEntry));
  EXPECT_LT(distinct.size(), kernels);
  EXPECT_EQ(cache.stats().disk_hits - s1.disk_hits, static_cast<int64_t>(2 * distinct.size()));
  EXPECT_EQ(cuda::GetNvrtcCounters().programs, nvrtc_before);

  ASSERT_EQ((*warm)->kernels().size(), kernels);
  for (size_t k = 0; k < kernels; ++k) EXPECT_EQ((*warm)->kernels()[k].source, (*cold)->kernels()[k].source);
  EXPECT_EQ(RunOnce(**warm, x), RunOnce(**cold, x));
}

// FUSEBOX_UNIQUE_KERNEL_NAMES: each kernel compiles and loads under its own
// name (what nsys and ncu then show), its CUDA twin's PTX entry too; the
// default shares one entry name, so kernels equal but for names share a source.
TEST(CompileAheadTest, UniqueKernelNamesCompileEachKernelUnderItsOwnName) {
  Tensor x;
  const fusion::Plan plan = SeveralKernels(Device::cpu(), RandomScale(), &x);
  const std::vector<PreparedKernel> shared = CompileAhead(plan, 90, /*cuda_twins=*/true, backend::CurrentTuning());
  absl::StatusOr<std::shared_ptr<const Executable>> shared_exe = Executable::Compile(plan);
  ASSERT_TRUE(shared_exe.ok()) << shared_exe.status();
  std::set<std::string> shared_sources;
  for (const PreparedKernel& k : shared) {
    EXPECT_EQ(k.entry_name, kKernelEntry);
    shared_sources.insert(k.entry_source);
  }
  EXPECT_LT(shared_sources.size(), shared.size());

  ScopedUniqueKernelNames unique(true);
  const std::vector<PreparedKernel> own = CompileAhead(plan, 90, /*cuda_twins=*/true, backend::CurrentTuning());
  ASSERT_EQ(own.size(), plan.kernels.size());
  std::set<std::string> own_sources;
  for (size_t k = 0; k < own.size(); ++k) {
    const std::string& name = plan.kernels[k].name;
    EXPECT_EQ(own[k].entry_name, name);
    EXPECT_EQ(own[k].entry_source, own[k].source) << name;
    EXPECT_EQ(own[k].cuda_entry_source.find(kKernelEntry), std::string::npos) << name;
    own_sources.insert(own[k].entry_source);
    absl::StatusOr<std::shared_ptr<const CompiledBinary>> twin =
        CompileCudaSource(own[k].cuda_entry_source, own[k].entry_name, 90, backend::CurrentTuning());
    ASSERT_TRUE(twin.ok()) << twin.status();
    EXPECT_NE((*twin)->ptx.find(".entry " + name + "("), std::string::npos) << name;
  }
  EXPECT_EQ(own_sources.size(), own.size());
  absl::StatusOr<std::shared_ptr<const Executable>> own_exe = Executable::Compile(plan);
  ASSERT_TRUE(own_exe.ok()) << own_exe.status();
  EXPECT_EQ(RunOnce(**own_exe, x), RunOnce(**shared_exe, x));
}

// Attention's flash kernel (a CPU plan's CUDA twin here) is compiled with
// the plan's other kernels, so loading the plan finds it in memory.
TEST(CompileAheadTest, TheFlashKernelCompilesAheadToo) {
  frontend::CaptureSession session(/*eager=*/false);
  const Tensor q = randn({2, 9, 128}, Device::cpu(), testing_workloads::FreshSeed());
  const Tensor bias = randn({9, 9}, Device::cpu(), testing_workloads::FreshSeed());
  const Tensor y = scaled_dot_product_attention(q, q * 0.5, q, bias);
  const fusion::Plan plan = fusion::BuildPlan(session.Snapshot({y}), {}, {});
  CompileCache& cache = CompileCache::Get();
  cache.ClearMemory();
  (void)CompileAhead(plan, 90, /*cuda_twins=*/true, backend::CurrentTuning());
  const CompileCacheStats before = cache.stats();
  const cuda::FlashConfig config =
      cuda::ChooseFlashConfig(128, DType::kFloat32, AttentionMask::kFloat, 90, backend::CurrentTuning());
  ASSERT_TRUE(CompileCudaSource(cuda::FlashAttentionSource(config), config.KernelName(), 90, TuningSnapshot(),
                                config.wgmma).ok());
  EXPECT_EQ(cache.stats().memory_hits, before.memory_hits + 1);
  EXPECT_EQ(cache.stats().compiles, before.compiles);
  EXPECT_EQ(cache.stats().disk_hits, before.disk_hits);
}

TEST(CompileAheadTest, GpuPlanOfSeveralKernels) {
  SKIP_WITHOUT_CUDA();
  Tensor x;
  const double scale = RandomScale();
  const fusion::Plan plan = SeveralKernels(Device::cuda(0), scale, &x);
  const int64_t nvrtc_before = cuda::GetNvrtcCounters().programs;
  absl::StatusOr<std::shared_ptr<const Executable>> exe = Executable::Compile(plan);
  ASSERT_TRUE(exe.ok()) << exe.status();
  // The kernels with the new scale (one source: kernel_entry.h) at least; the others may be cached.
  const int64_t programs = cuda::GetNvrtcCounters().programs - nvrtc_before;
  EXPECT_GE(programs, 1);
  EXPECT_LE(programs, static_cast<int64_t>(plan.kernels.size()));
  const std::vector<float> got = RunOnce(**exe, x);
  std::vector<float> want;
  const std::vector<float> xs = x.to_vector();
  for (int r = 0; r < 33; ++r) {
    double s = 0;
    for (int c = 0; c < 7; ++c) {
      const double v = xs[r * 7 + c];
      s += std::exp(v * scale) + std::tanh(v) * scale;
    }
    want.push_back(static_cast<float>(s));
  }
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << i;
}

}  // namespace
}  // namespace fusebox::backend
