// The profiler's roofline on the CPU: each kernel's minimal bytes and FLOPs
// (in its KernelInfo and every profiled launch), the table's roofline
// columns, worst() under a roofline a caller sets, and no ceiling by default.
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/profiler/profiler_test_util.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::HasSubstr;
using namespace fusebox::profiler_testing;   // NOLINT: shared test helpers
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

// The one kernel `name` of a profile, checked to carry `bytes` and `flops`
// in every launch and in its KernelInfo.
void ExpectCost(const Profiler& prof, const std::vector<KernelInfo>& kernels, const std::string& name,
                int64_t bytes, int64_t flops) {
  const std::vector<ProfilerEvent> launches = Named(prof.events(), name);
  ASSERT_FALSE(launches.empty()) << name << " was not recorded";
  for (const ProfilerEvent& e : launches) {
    EXPECT_EQ(e.bytes, bytes) << name;
    EXPECT_EQ(e.flops, flops) << name;
  }
  int found = 0;
  for (const KernelInfo& k : kernels) {
    if (k.name != name) continue;
    ++found;
    EXPECT_EQ(k.bytes, bytes) << name;
    EXPECT_EQ(k.flops, flops) << name;
  }
  EXPECT_EQ(found, 1) << name;
}

TEST(RooflineTest, PointwiseKernelReadsEachInputOnceAndWritesOnce) {
  constexpr int64_t kN = 1001;
  const Tensor x = randn({kN}, Device::cpu(), FreshSeed()), y = randn({kN}, Device::cpu(), FreshSeed());
  auto f = compile([](const Tensor& a, const Tensor& b) { return a * b + a; });
  Profiler prof;
  const Tensor out = f(x, y);
  std::vector<double> want;
  const std::vector<double> xs = x.to_double_vector(), ys = y.to_double_vector();
  for (int64_t i = 0; i < kN; ++i) want.push_back(xs[i] * ys[i] + xs[i]);
  ExpectClose(out.to_vector(), want, 1e-6);
  // Two f32 reads and one f32 write per element (a is read once, though used twice).
  ExpectCost(prof, f.kernels(), "poi_fused_add_mul_0", 3 * 4 * kN, kN);
  EXPECT_EQ(Named(prof.events(), "poi_fused_add_mul_0")[0].math, MathPeak::kFloat32);
}

TEST(RooflineTest, BroadcastOperandIsReadOnceAndRowSumWritesARow) {
  constexpr int64_t kRows = 37, kCols = 29;
  const Tensor x = randn({kRows, kCols}, Device::cpu(), FreshSeed());
  const Tensor bias = randn({kCols}, Device::cpu(), FreshSeed());
  auto f = compile([](const Tensor& a, const Tensor& b) { return sum(a + b, -1); });
  Profiler prof;
  const Tensor out = f(x, bias);
  const std::vector<double> xs = x.to_double_vector(), bs = bias.to_double_vector();
  std::vector<double> want(kRows, 0.0);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kCols; ++c) want[r] += xs[r * kCols + c] + bs[c];
  }
  ExpectClose(out.to_vector(), want, 1e-5);
  ASSERT_EQ(f.kernels().size(), 1u);
  // x once, the bias once (not once per row), one f32 per row out.
  ExpectCost(prof, f.kernels(), f.kernels()[0].name, 4 * (kRows * kCols + kCols + kRows), kRows * kCols);
}

TEST(RooflineTest, GemmFlopsAndBytesCountABiasAndCOnce) {
  constexpr int64_t kM = 6, kK = 8, kN = 5, kBatch = 3;
  const Tensor x = randn({kM, kK}, Device::cpu(), FreshSeed()), w = randn({kN, kK}, Device::cpu(), FreshSeed());
  const Tensor b = randn({kN}, Device::cpu(), FreshSeed());
  // exp is no epilogue: the GEMM (bias in its epilogue) and a kernel after it.
  auto fn = compile([](const Tensor& a, const Tensor& wt, const Tensor& bias) { return exp(linear(a, wt, bias)); });
  Profiler prof;
  const Tensor out = fn(x, w, b);
  EXPECT_EQ(out.shape(), (Shape{kM, kN}));
  ExpectCost(prof, fn.kernels(), "extern_openblas_gemm_0", 4 * (kM * kK + kN * kK + kN + kM * kN), 2 * kM * kN * kK);
  EXPECT_EQ(Named(prof.events(), "extern_openblas_gemm_0")[0].math, MathPeak::kFloat32);
  prof.stop();  // one profiler records at a time

  // A batched product whose right side broadcasts over the batch reads it once.
  const Tensor a3 = randn({kBatch, kM, kK}, Device::cpu(), FreshSeed());
  const Tensor rhs = randn({kK, kN}, Device::cpu(), FreshSeed()).to(DType::kBFloat16);
  auto mm = compile([](const Tensor& p, const Tensor& q) { return exp(matmul(p, q)); });
  Profiler prof16;
  (void)mm(a3.to(DType::kBFloat16), rhs);
  ASSERT_FALSE(Named(prof16.events(), "extern_openblas_gemm_0").empty()) << mm.explain();
  const ProfilerEvent gemm = Named(prof16.events(), "extern_openblas_gemm_0")[0];
  EXPECT_EQ(gemm.flops, 2 * kBatch * kM * kN * kK);
  EXPECT_EQ(gemm.bytes, 2 * (kBatch * kM * kK + kK * kN + kBatch * kM * kN));
  EXPECT_EQ(gemm.math, MathPeak::kTensor16);
}

TEST(RooflineTest, GatherReadsOnlyTheRowsItLooksUp) {
  constexpr int64_t kVocab = 500, kDim = 16, kLookups = 7;
  const Tensor table = randn({kVocab, kDim}, Device::cpu(), FreshSeed());
  const Tensor idx = Tensor::from_vector(std::vector<int64_t>{3, 499, 0, 3, 17, 250, 42}, {kLookups});
  auto f = compile([](const Tensor& i, const Tensor& t) { return embedding(i, t) * 2.0; });
  Profiler prof;
  const Tensor out = f(idx, table);
  const std::vector<double> ts = table.to_double_vector();
  const std::vector<int64_t> rows = {3, 499, 0, 3, 17, 250, 42};
  std::vector<double> want;
  for (int64_t r : rows) {
    for (int64_t c = 0; c < kDim; ++c) want.push_back(2.0 * ts[r * kDim + c]);
  }
  ExpectClose(out.to_vector(), want, 1e-6);
  ASSERT_EQ(f.kernels().size(), 1u);
  // The looked-up rows (not the whole table), each index once, the output once.
  ExpectCost(prof, f.kernels(), f.kernels()[0].name, 4 * kLookups * kDim + 8 * kLookups + 4 * kLookups * kDim,
             kLookups * kDim);
}

TEST(RooflineTest, DynamicPlanCountsEachRunsSizes) {
  auto f = compile([](const Tensor& a) { return exp(a); }, {.dynamic = true});
  Profiler prof;
  for (int64_t n : {100, 300}) (void)f(randn({n}, Device::cpu(), FreshSeed()));
  const std::vector<ProfilerEvent> runs = Named(prof.events(), "poi_exp_0");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(f.stats().plan_compiles, 1) << "one dynamic plan serves both sizes";
  EXPECT_EQ(runs[0].bytes, 8 * 100);
  EXPECT_EQ(runs[1].bytes, 8 * 300);
  EXPECT_EQ(runs[1].flops, 300);
}

// Two pointwise kernels of different sizes and a graph run each, twice.
void TwoKernels() {
  auto small = compile([](const Tensor& a) { return exp(a); });
  auto big = compile([](const Tensor& a) { return tanh(a) * a; });
  const Tensor s = randn({1000}, Device::cpu(), FreshSeed()), b = randn({200000}, Device::cpu(), FreshSeed());
  for (int i = 0; i < 2; ++i) {
    (void)small(s);
    (void)big(b);
  }
}

TEST(RooflineTest, CpuHasNoCeilingByDefault) {
  Profiler prof;
  TwoKernels();
  EXPECT_FALSE(prof.roofline(Device::cpu()).known());
  EXPECT_TRUE(prof.worst().empty()) << "no roofline, no time lost against it";
  const std::string table = prof.table();
  for (const char* header : {"GB/s", "FLOP/s", "% Roofline"}) EXPECT_THAT(table, HasSubstr(header));
  EXPECT_THAT(table, HasSubstr("Roofline cpu: none"));
  for (const ProfilerRow& row : prof.summary()) {
    EXPECT_EQ(row.kernel, row.name.starts_with("poi_")) << row.name;
    EXPECT_FALSE(row.has_roofline()) << row.name;
    EXPECT_EQ(row.roofline_percent(), -1) << row.name;
    if (!row.kernel) continue;
    // Achieved rates: the minimal bytes and FLOPs over the kernels' CPU time.
    EXPECT_GT(row.bytes_total, 0);
    EXPECT_DOUBLE_EQ(row.kernel_time_total_us, row.cpu_time_total_us) << "a CPU kernel's time is its execution";
    EXPECT_NEAR(row.bytes_per_s(), row.bytes_total / (row.kernel_time_total_us * 1e-6), 1e-6 * row.bytes_per_s());
  }
}

TEST(RooflineTest, WorstSortsKernelsByTimeLostAgainstASetRoofline) {
  Profiler prof;
  TwoKernels();
  // 1 GB/s: slow enough that the roofline time is a real share of a kernel's.
  const Roofline slow{.copy_bytes_per_s = 1e9, .f32_flops_per_s = 1e12};
  prof.set_roofline(Device::cpu(), slow);
  EXPECT_EQ(prof.roofline(Device::cpu()).copy_bytes_per_s, 1e9);
  const std::vector<ProfilerRow> worst = prof.worst(5);
  ASSERT_EQ(worst.size(), 2u) << "the two kernels; graph runs are not kernels";
  EXPECT_GE(worst[0].time_lost_us(), worst[1].time_lost_us());
  for (const ProfilerRow& row : worst) {
    EXPECT_TRUE(row.kernel);
    EXPECT_EQ(row.calls, 2);
    // max(bytes / copy, flops / peak) per call, summed: bytes bound here.
    const double roofline_us = 1e6 * row.bytes_total / 1e9;
    EXPECT_NEAR(row.roofline_time_total_us, roofline_us, 1e-9 * roofline_us);
    EXPECT_NEAR(row.time_lost_us(), row.kernel_time_total_us - roofline_us, 1e-6);
    EXPECT_NEAR(row.roofline_percent(), 100.0 * roofline_us / row.kernel_time_total_us, 1e-6);
  }
  EXPECT_EQ(prof.worst(1).size(), 1u);
  EXPECT_EQ(prof.worst(1)[0].name, worst[0].name);
  const std::string table = prof.table();
  EXPECT_THAT(table, HasSubstr("Roofline cpu: copy 1 GB/s, f32 1.0 TFLOP/s"));
  EXPECT_THAT(table, HasSubstr(absl::StrFormat("%.1f%%", worst[0].roofline_percent())));

  // FLOPs bound where the math is the slower: a peak of 1 FLOP/us.
  prof.set_roofline(Device::cpu(), {.copy_bytes_per_s = 1e15, .f32_flops_per_s = 1e6});
  for (const ProfilerRow& row : prof.worst()) {
    EXPECT_NEAR(row.roofline_time_total_us, row.flops_total, 1e-9 * row.flops_total) << row.name;
  }
}

}  // namespace
}  // namespace fusebox
