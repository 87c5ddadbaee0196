// fusebox::Profiler on the CPU: which graph runs and kernels it records, when
// it records nothing, the summary table and its sorting, the Chrome trace.
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/profiler/profiler_test_util.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace fusebox::profiler_testing;   // NOLINT: shared test helpers
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

constexpr char kGelu[] = "poi_fused_add_mul_pow_tanh_0";

TEST(ProfilerTest, CompiledGeluIsOneKernelLaunchPerCall) {
  const Tensor x = randn({37, 5}, Device::cpu(), FreshSeed());
  auto gelu = compile(ManualGelu);
  constexpr size_t kCalls = 3;
  Profiler prof;
  for (size_t i = 0; i < kCalls; ++i) gelu(x);
  const std::vector<ProfilerEvent> events = prof.events();

  const std::vector<ProfilerEvent> kernels = Named(events, kGelu);
  const std::vector<ProfilerEvent> runs = Named(events, absl::StrCat("compiled graph: ", kGelu));
  ASSERT_EQ(kernels.size(), kCalls);
  ASSERT_EQ(runs.size(), kCalls);
  EXPECT_EQ(events.size(), 2 * kCalls) << "nothing but the graph runs and their kernels";
  int compiles = 0;
  for (const ProfilerEvent& run : runs) {
    EXPECT_EQ(run.kind, ProfilerEvent::Kind::kHostOp);
    EXPECT_EQ(run.device, "cpu");
    EXPECT_THAT(run.input_shapes, ElementsAre(Shape{37, 5}));
    EXPECT_EQ(run.launches, 1);
    EXPECT_EQ(run.parent, -1);
    compiles += run.compiles;
  }
  EXPECT_EQ(compiles, gelu.stats().kernel_compiles) << "the first run compiles; the profile says so";
  for (const ProfilerEvent& k : kernels) {
    EXPECT_EQ(k.kind, ProfilerEvent::Kind::kKernel);
    EXPECT_EQ(k.device, "cpu");
    EXPECT_THAT(k.input_shapes, ElementsAre(Shape{37, 5}));
    EXPECT_EQ(k.launches, 1);
    EXPECT_GE(k.cpu_time_us, 0);
    EXPECT_EQ(k.cuda_start_us, -1) << "a CPU kernel has no device time";
    EXPECT_EQ(k.cuda_time_us, 0);
    // Launched inside its graph run, on the same thread.
    const ProfilerEvent* run = FindId(events, k.parent);
    ASSERT_NE(run, nullptr);
    EXPECT_EQ(run->name, absl::StrCat("compiled graph: ", kGelu));
    EXPECT_EQ(run->thread, k.thread);
    EXPECT_GE(k.cpu_start_us, run->cpu_start_us);
    EXPECT_LE(k.cpu_start_us + k.cpu_time_us, run->cpu_start_us + run->cpu_time_us);
  }
}

// A matmul's GEMM is a kernel of the graph run like any other: recorded
// under its extern name with its operands' shapes, inside the run.
TEST(ProfilerTest, ExternGemmIsRecordedAsAKernel) {
  const Tensor x = randn({6, 8}, Device::cpu(), FreshSeed()), w = randn({5, 8}, Device::cpu(), FreshSeed());
  // exp: not an epilogue the GEMM could take, so a kernel follows it.
  auto fn = compile([](const Tensor& a, const Tensor& b) { return exp(linear(a, b)); });
  Profiler prof;
  fn(x, w);
  const std::vector<ProfilerEvent> events = prof.events();
  const std::vector<ProfilerEvent> gemms = Named(events, "extern_openblas_gemm_0");
  ASSERT_EQ(gemms.size(), 1u);
  EXPECT_EQ(gemms[0].kind, ProfilerEvent::Kind::kKernel);
  EXPECT_THAT(gemms[0].input_shapes, ElementsAre(Shape{6, 8}, Shape{8, 5}));
  EXPECT_EQ(gemms[0].launches, 1);
  const ProfilerEvent* run = FindId(events, gemms[0].parent);
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(run->name, "compiled graph: extern_openblas_gemm_0, poi_exp_1");
  EXPECT_EQ(Named(events, "poi_exp_1").size(), 1u);
}

TEST(ProfilerTest, EagerOpsAreRecordedWithTheirKernels) {
  const Tensor x = randn({4, 8}, Device::cpu(), FreshSeed());
  const Tensor y = randn({8}, Device::cpu(), FreshSeed());
  Profiler prof;
  Tensor z = exp(x * y);
  Tensor s = sum(z, -1);
  const std::vector<ProfilerEvent> events = prof.events();
  std::vector<std::string> names;
  for (const ProfilerEvent& e : events) names.push_back(e.name);
  // Kernels finish before the run that launched them.
  EXPECT_THAT(names, ElementsAre("poi_mul_0", "eager: mul", "poi_exp_0", "eager: exp", "per_sum_0", "eager: sum"));
  // Eager ops broadcast before the graph sees them: y arrives as a [4, 8] view.
  EXPECT_THAT(events[0].input_shapes, ElementsAre(Shape{4, 8}, Shape{4, 8}));
  EXPECT_THAT(events[1].input_shapes, ElementsAre(Shape{4, 8}, Shape{4, 8}));
  EXPECT_EQ(events[0].parent, events[1].id);
  EXPECT_THAT(events[4].input_shapes, ElementsAre(Shape{4, 8}));
  EXPECT_EQ(events[4].parent, events[5].id);
}

TEST(ProfilerTest, RecordsNothingBeforeItStartsOrAfterItStops) {
  const Tensor x = randn({16}, Device::cpu(), FreshSeed());
  exp(x);  // before any profiler
  {
    Profiler first;
    EXPECT_TRUE(first.recording());
    EXPECT_TRUE(first.events().empty());
    exp(x);
    EXPECT_EQ(first.events().size(), 2u);
  }
  exp(x);  // between the two
  Profiler second;
  EXPECT_TRUE(second.events().empty());
  second.stop();
  second.stop();  // idempotent
  EXPECT_FALSE(second.recording());
  exp(x);
  auto gelu = compile(ManualGelu);
  gelu(x);
  EXPECT_TRUE(second.events().empty());
}

TEST(ProfilerTest, OnlyOneProfilerRecordsAtATime) {
  Profiler first;
  try {
    Profiler second;
    FAIL() << "a second profiler started while one records";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("already recording"));
  }
  first.stop();
  Profiler third;  // fine once the first has stopped
  exp(randn({4}, Device::cpu(), FreshSeed()));
  EXPECT_EQ(third.events().size(), 2u);
  EXPECT_TRUE(first.events().empty());
}

TEST(ProfilerTest, RecordsEveryThread) {
  const Tensor x = randn({64}, Device::cpu(), FreshSeed());
  exp(x);  // compiled before the threads start
  Profiler prof;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&x] {
      for (int i = 0; i < 10; ++i) exp(x);
    });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<ProfilerEvent> events = prof.events();
  const std::vector<ProfilerEvent> kernels = Named(events, "poi_exp_0");
  EXPECT_EQ(kernels.size(), 40u);
  EXPECT_EQ(Named(events, "eager: exp").size(), 40u);
  std::set<int> thread_ids;
  for (const ProfilerEvent& k : kernels) {
    const ProfilerEvent* run = FindId(events, k.parent);
    ASSERT_NE(run, nullptr);
    EXPECT_EQ(run->thread, k.thread) << "a kernel belongs to the run on its own thread";
    thread_ids.insert(k.thread);
  }
  EXPECT_EQ(thread_ids.size(), 4u);
}

// Work with distinct names and call counts, so every sort key orders it.
void MixedWork() {
  const Tensor big = randn({512, 512}, Device::cpu(), FreshSeed());
  const Tensor small = randn({8}, Device::cpu(), FreshSeed());
  auto gelu = compile(ManualGelu);
  for (int i = 0; i < 4; ++i) exp(small);
  for (int i = 0; i < 2; ++i) gelu(big);
  tanh(big);
}

TEST(ProfilerTest, SummaryAddsUpEventsAndSortsByEachKey) {
  Profiler prof;
  MixedWork();
  const std::vector<ProfilerEvent> events = prof.events();
  const std::vector<ProfilerRow> by_cpu = prof.summary("cpu_time_total");
  ASSERT_EQ(by_cpu.size(), 6u);  // eager: exp, poi_exp_0, compiled graph: ..., gelu kernel, eager: tanh, poi_tanh_0
  for (const ProfilerRow& row : by_cpu) {
    const std::vector<ProfilerEvent> same = Named(events, row.name);
    EXPECT_EQ(row.calls, static_cast<int64_t>(same.size())) << row.name;
    double cpu = 0;
    for (const ProfilerEvent& e : same) cpu += e.cpu_time_us;
    EXPECT_DOUBLE_EQ(row.cpu_time_total_us, cpu) << row.name;
    EXPECT_DOUBLE_EQ(row.cpu_time_avg_us(), cpu / row.calls);
    EXPECT_EQ(row.cuda_time_total_us, 0);
  }
  EXPECT_EQ(Named(events, "poi_exp_0").size(), 4u);
  for (size_t i = 1; i < by_cpu.size(); ++i) {
    EXPECT_GE(by_cpu[i - 1].cpu_time_total_us, by_cpu[i].cpu_time_total_us) << "row " << i;
  }
  const std::vector<ProfilerRow> by_count = prof.summary("count");
  for (size_t i = 1; i < by_count.size(); ++i) EXPECT_GE(by_count[i - 1].calls, by_count[i].calls);
  const std::vector<ProfilerRow> by_avg = prof.summary("cpu_time");
  for (size_t i = 1; i < by_avg.size(); ++i) EXPECT_GE(by_avg[i - 1].cpu_time_avg_us(), by_avg[i].cpu_time_avg_us());
  const std::vector<ProfilerRow> by_name = prof.summary("name");
  for (size_t i = 1; i < by_name.size(); ++i) EXPECT_LT(by_name[i - 1].name, by_name[i].name);
  // Graph runs take all the profiled host time; their kernels take part of it.
  double percent = 0;
  for (const ProfilerRow& row : by_cpu) {
    if (row.name.starts_with("eager: ") || row.name.starts_with("compiled graph: ")) percent += row.cpu_percent;
  }
  EXPECT_NEAR(percent, 100.0, 1e-6);
}

TEST(ProfilerTest, TableHasTorchColumnsRowsInSortOrderAndRowLimit) {
  Profiler prof;
  MixedWork();
  const std::vector<ProfilerRow> rows = prof.summary("cpu_time_total");
  const std::string table = prof.table("cpu_time_total");
  for (const char* header : {"Name", "# of Calls", "CPU total", "CPU time avg", "CPU total %", "CUDA total",
                             "CUDA time avg", "CUDA total %", "Launches"}) {
    EXPECT_THAT(table, HasSubstr(header));
  }
  EXPECT_THAT(table, HasSubstr("CPU time total: "));
  EXPECT_THAT(table, HasSubstr("CUDA time total: 0.000us"));
  // Row names appear in the summary's order, one row each.
  size_t at = table.find("# of Calls");
  for (const ProfilerRow& row : rows) {
    const size_t found = table.find("\n" + row.name + " ", at);
    ASSERT_NE(found, std::string::npos) << row.name << " missing or out of order in\n" << table;
    at = found + 1;
  }
  const std::string limited = prof.table("cpu_time_total", 2);
  EXPECT_THAT(limited, HasSubstr("\n" + rows[0].name + " "));
  EXPECT_THAT(limited, HasSubstr("\n" + rows[1].name + " "));
  for (size_t i = 2; i < rows.size(); ++i) EXPECT_THAT(limited, ::testing::Not(HasSubstr("\n" + rows[i].name + " ")));
  EXPECT_THAT(prof.table("cpu_time_total", 0), ::testing::Not(HasSubstr("\n" + rows[0].name + " ")));
}

TEST(ProfilerTest, UnknownSortKeyListsTheValidOnes) {
  Profiler prof;
  for (auto call : {+[](const Profiler& p) { p.table("self_cpu_time"); },
                    +[](const Profiler& p) { p.summary("self_cpu_time"); }}) {
    try {
      call(prof);
      FAIL() << "no error for an unknown sort key";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("unknown sort_by 'self_cpu_time'"));
      EXPECT_THAT(e.what(), HasSubstr("cuda_time_total, cpu_time_total, cuda_time, cpu_time, count, name"));
    }
  }
}

TEST(ProfilerTest, ChromeTraceHasHostRunsAndCpuKernelsOnTheHostTrack) {
  const Tensor x = randn({37, 5}, Device::cpu(), FreshSeed());
  auto gelu = compile(ManualGelu);
  Profiler prof;
  gelu(x);
  gelu(x);
  exp(x);
  const nlohmann::json trace = ExportAndParse(prof);
  ASSERT_TRUE(trace.contains("traceEvents"));
  const std::vector<nlohmann::json> complete = Phase(trace, "X");
  ASSERT_EQ(complete.size(), 6u);
  int kernels = 0, runs = 0;
  for (const nlohmann::json& e : complete) {
    EXPECT_EQ(e.at("pid"), 1) << e.dump();
    EXPECT_GE(e.at("ts").get<double>(), 0) << e.dump();
    EXPECT_GE(e.at("dur").get<double>(), 0) << e.dump();
    EXPECT_EQ(e.at("args").at("device"), "cpu");
    EXPECT_EQ(e.at("args").at("input_shapes"), nlohmann::json::parse("[[37, 5]]")) << e.dump();
    if (e.at("cat") == "cpu_kernel") ++kernels;
    if (e.at("cat") == "graph_run") ++runs;
    if (e.at("name") == kGelu) {
      EXPECT_EQ(e.at("cat"), "cpu_kernel");
    }
  }
  EXPECT_EQ(kernels, 3);
  EXPECT_EQ(runs, 3);
  // The host track is named, and there is no device track.
  std::vector<std::string> names;
  for (const nlohmann::json& m : Phase(trace, "M")) {
    EXPECT_EQ(m.at("pid"), 1);
    names.push_back(m.at("args").at("name"));
  }
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("fusebox host", ::testing::StartsWith("host thread ")));
  EXPECT_TRUE(Phase(trace, "s").empty());
}

TEST(ProfilerTest, ChromeTraceToAnUnwritablePathNamesIt) {
  Profiler prof;
  const std::string path = "/nonexistent-fusebox-dir/trace.json";
  try {
    prof.export_chrome_trace(path);
    FAIL() << "no error writing to " << path;
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
  }
}

}  // namespace
}  // namespace fusebox
