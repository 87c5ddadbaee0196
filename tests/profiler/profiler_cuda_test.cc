// fusebox::Profiler on a GPU: device times from CUDA events, launch counts
// (split reductions launch two kernels), the device track of the Chrome trace
// sorting by CUDA time, and the driver's roofline. Skips without a device.
#include <string>
#include <vector>

#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/profiler/profiler_test_util.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::ElementsAre;
using namespace fusebox::profiler_testing;   // NOLINT: shared test helpers
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

constexpr char kGelu[] = "poi_fused_add_mul_pow_tanh_0";

TEST(ProfilerCudaTest, CompiledGeluKernelsHaveDeviceTime) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = randn({1024, 1024}, Device::cuda(), FreshSeed());
  auto gelu = compile(ManualGelu);
  gelu(x);  // compile outside the profile
  constexpr size_t kCalls = 5;
  Profiler prof;
  for (size_t i = 0; i < kCalls; ++i) gelu(x);
  const std::vector<ProfilerEvent> events = prof.events();
  const std::vector<ProfilerEvent> kernels = Named(events, kGelu);
  ASSERT_EQ(kernels.size(), kCalls);
  ASSERT_EQ(events.size(), 2 * kCalls);
  for (const ProfilerEvent& k : kernels) {
    EXPECT_EQ(k.device, "cuda:0");
    EXPECT_THAT(k.input_shapes, ElementsAre(Shape{1024, 1024}));
    EXPECT_EQ(k.launches, 1);
    EXPECT_GT(k.cuda_time_us, 0);
    EXPECT_LT(k.cuda_time_us, 1e5) << "a 4 MB pointwise kernel takes microseconds";
    EXPECT_GE(k.cuda_start_us, 0);
    // The device runs a kernel after its launch began (the clocks are
    // anchored to each other to within a few microseconds).
    EXPECT_GE(k.cuda_start_us, k.cpu_start_us - 50);
    const ProfilerEvent* run = FindId(events, k.parent);
    ASSERT_NE(run, nullptr);
    EXPECT_EQ(run->name, absl::StrCat("compiled graph: ", kGelu));
    EXPECT_DOUBLE_EQ(run->cuda_time_us, k.cuda_time_us);
    EXPECT_EQ(run->compiles, 0);
  }
  // Consecutive launches on one stream do not overlap on the device.
  for (size_t i = 1; i < kernels.size(); ++i) {
    EXPECT_GE(kernels[i].cuda_start_us + 1, kernels[i - 1].cuda_start_us + kernels[i - 1].cuda_time_us);
  }
}

TEST(ProfilerCudaTest, EagerOpsAndSplitReductionLaunches) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = randn({4, 1 << 17}, Device::cuda(), FreshSeed());
  exp(x);
  sum(x, -1);  // compile outside the profile
  Profiler prof;
  exp(x);
  sum(x, -1);  // 4 long rows: a partial kernel over ~1000 blocks, then one combining them
  const std::vector<ProfilerEvent> events = prof.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].name, "poi_exp_0");
  EXPECT_EQ(events[0].launches, 1);
  EXPECT_EQ(events[1].name, "eager: exp");
  EXPECT_EQ(events[2].kind, ProfilerEvent::Kind::kKernel);
  EXPECT_EQ(events[2].launches, 2) << events[2].name;
  EXPECT_EQ(events[3].name, "eager: sum");
  EXPECT_EQ(events[3].launches, 2);
  for (const ProfilerEvent& e : events) {
    EXPECT_GT(e.cuda_time_us, 0) << e.name;
    EXPECT_EQ(e.device, "cuda:0");
  }
}

TEST(ProfilerCudaTest, ChromeTraceHasADeviceTrackJoinedToTheLaunches) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = randn({1024, 1024}, Device::cuda(), FreshSeed());
  auto gelu = compile(ManualGelu);
  Profiler prof;
  gelu(x);
  gelu(x);
  const nlohmann::json trace = ExportAndParse(prof);
  int device_kernels = 0, launches = 0, runs = 0;
  for (const nlohmann::json& e : Phase(trace, "X")) {
    EXPECT_GE(e.at("ts").get<double>(), 0) << e.dump();
    EXPECT_GE(e.at("dur").get<double>(), 0) << e.dump();
    if (e.at("cat") == "kernel") {
      ++device_kernels;
      EXPECT_EQ(e.at("name"), kGelu);
      EXPECT_EQ(e.at("pid"), 100);
      EXPECT_EQ(e.at("tid"), 1);
      EXPECT_GT(e.at("dur").get<double>(), 0);
      EXPECT_EQ(e.at("args").at("input_shapes"), nlohmann::json::parse("[[1024, 1024]]"));
    } else {
      EXPECT_EQ(e.at("pid"), 1) << e.dump();
      launches += e.at("cat") == "cuda_launch";
      runs += e.at("cat") == "graph_run";
    }
  }
  EXPECT_EQ(device_kernels, 2);
  EXPECT_EQ(launches, 2);
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(Phase(trace, "s").size(), 2u);
  EXPECT_EQ(Phase(trace, "f").size(), 2u);
  bool device_track = false;
  for (const nlohmann::json& m : Phase(trace, "M")) {
    if (m.at("pid") == 100 && m.at("name") == "thread_name") {
      device_track = m.at("args").at("name") == "cuda:0 default stream";
    }
  }
  EXPECT_TRUE(device_track);
}

TEST(ProfilerCudaTest, TableSortsByCudaTime) {
  SKIP_WITHOUT_CUDA();
  const Tensor big = randn({2048, 2048}, Device::cuda(), FreshSeed());
  const Tensor small = randn({64}, Device::cuda(), FreshSeed());
  Profiler prof;
  for (int i = 0; i < 3; ++i) exp(big);
  for (int i = 0; i < 3; ++i) tanh(small);
  const std::vector<ProfilerRow> rows = prof.summary("cuda_time_total");
  ASSERT_EQ(rows.size(), 4u);
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_GE(rows[i - 1].cuda_time_total_us, rows[i].cuda_time_total_us);
  double kernel_percent = 0;
  for (const ProfilerRow& row : rows) {
    EXPECT_GT(row.cuda_time_total_us, 0) << row.name;
    if (!row.name.starts_with("eager: ")) kernel_percent += row.cuda_percent;
  }
  EXPECT_NEAR(kernel_percent, 100.0, 1e-6);
  const std::string table = prof.table("cuda_time_total", 1);
  EXPECT_THAT(table, ::testing::HasSubstr("\n" + rows[0].name + " "));
  EXPECT_THAT(table, ::testing::Not(::testing::HasSubstr("\n" + rows[1].name + " ")));
}

// The driver's roofline: a plausible DRAM bandwidth and tensor-core peak;
// a large gelu runs at a share of it (a kernel cannot beat its roofline by
// much: the theoretical bandwidth is above any copy), and a GEMM's FLOPs
// are held to the tensor cores.
TEST(ProfilerCudaTest, KernelsAreHeldToTheDriversRoofline) {
  SKIP_WITHOUT_CUDA();
  const Roofline roofline = DeviceRoofline(Device::cuda());
  ASSERT_TRUE(roofline.known());
  EXPECT_GT(roofline.copy_bytes_per_s, 1e11);
  EXPECT_LT(roofline.copy_bytes_per_s, 2e13);
  EXPECT_GE(roofline.tensor16_flops_per_s, 0);
  const Tensor x = randn({4096, 4096}, Device::cuda(), FreshSeed());
  const Tensor a = randn({512, 1024}, Device::cuda(), FreshSeed()).to(DType::kBFloat16);
  const Tensor w = randn({768, 1024}, Device::cuda(), FreshSeed()).to(DType::kBFloat16);
  auto gelu = compile(ManualGelu);
  auto lin = compile([](const Tensor& p, const Tensor& q) { return exp(linear(p, q)); });
  gelu(x);  // compile outside the profile
  lin(a, w);
  Profiler prof;
  for (int i = 0; i < 3; ++i) {
    gelu(x);
    lin(a, w);
  }
  EXPECT_EQ(prof.roofline(Device::cuda()).copy_bytes_per_s, roofline.copy_bytes_per_s);
  const std::vector<ProfilerEvent> events = prof.events();
  for (const ProfilerEvent& k : Named(events, kGelu)) EXPECT_EQ(k.bytes, 2 * 4 * 4096 * 4096);
  const std::vector<ProfilerEvent> gemms = Named(events, "extern_cublaslt_gemm_0");
  ASSERT_EQ(gemms.size(), 3u);
  EXPECT_EQ(gemms[0].flops, 2LL * 512 * 768 * 1024);
  EXPECT_EQ(gemms[0].math, MathPeak::kTensor16);
  const std::vector<ProfilerRow> worst = prof.worst(10);
  ASSERT_EQ(worst.size(), 3u) << "the gelu, the GEMM and the exp after it";
  for (size_t i = 0; i < worst.size(); ++i) {
    const ProfilerRow& row = worst[i];
    EXPECT_GT(row.roofline_percent(), 0) << row.name;
    EXPECT_LT(row.roofline_percent(), 110) << row.name;
    if (i > 0) EXPECT_GE(worst[i - 1].time_lost_us(), row.time_lost_us());
    if (row.name == kGelu) EXPECT_GT(row.roofline_percent(), 20) << "a large gelu runs near the copy ceiling";
  }
  EXPECT_THAT(prof.table(), ::testing::HasSubstr("Roofline cuda:0: copy "));
}

}  // namespace
}  // namespace fusebox
