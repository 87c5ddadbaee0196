// The benchmark harness's pure helpers: how many input sets rotation uses,
// what --filter matches, that the suite's cases are the ones the README,
// compare_torch.py and --filter name; and the compile-latency children.
#include <fstream>
#include <set>
#include <string>

#include "bench/compile_latency.h"
#include "bench/harness.h"
#include "bench/suite.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace fusebox::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024;

TEST(RotationSets, OneSetOnceASetIsTwiceTheCache) {
  EXPECT_EQ(RotationSets(120 * kMiB, 60 * kMiB, kMaxInputSets), 1);
  EXPECT_EQ(RotationSets(512 * kMiB, 60 * kMiB, kMaxInputSets), 1);
}

TEST(RotationSets, EnoughSetsToSpanTwiceTheCache) {
  EXPECT_EQ(RotationSets(100 * kMiB, 60 * kMiB, kMaxInputSets), 2);
  EXPECT_EQ(RotationSets(40 * kMiB, 60 * kMiB, kMaxInputSets), 3);
  EXPECT_EQ(RotationSets(1 * kMiB, 60 * kMiB, kMaxInputSets), 120);
}

TEST(RotationSets, CappedAtMax) {
  EXPECT_EQ(RotationSets(8 * 1024, 60 * kMiB, kMaxInputSets), kMaxInputSets);
  EXPECT_EQ(RotationSets(8 * 1024, 60 * kMiB, 4), 4);
  EXPECT_EQ(RotationSets(0, 60 * kMiB, 4), 4);
  EXPECT_EQ(RotationSets(8 * 1024, 60 * kMiB, 0), 1);
}

TEST(GBps, BytesOverMilliseconds) { EXPECT_DOUBLE_EQ(GBps(2e9, 1000.0), 2.0); }

TEST(Matches, CommaListOfSubstrings) {
  EXPECT_TRUE(Matches("", "manual_gelu"));
  EXPECT_TRUE(Matches("gelu", "tiny_gelu"));
  EXPECT_TRUE(Matches("softmax,sum", "col_sum"));
  EXPECT_FALSE(Matches("softmax,sum", "manual_gelu"));
  EXPECT_FALSE(Matches(",", "manual_gelu"));
  // A ';' in the filter makes it the separator: sweep shapes hold commas.
  EXPECT_TRUE(Matches("sum/dim0 [16411, 1023];softmax/last", "sum/dim0 [16411, 1023] float32"));
  EXPECT_TRUE(Matches("sum/dim0 [16411, 1023];softmax/last", "softmax/last [37, 453439] bfloat16"));
  EXPECT_FALSE(Matches("sum/dim0 [16411, 1023];softmax/last", "sum/dim0 [1031, 16273] float32"));
  EXPECT_FALSE(Matches("sum/dim0 [16411, 1023];", "rms_norm/dim0 [1031, 1023] float32"));
}

TEST(SuiteCases, QuickAndFullRunTheSameCases) {
  const std::set<std::string> want = {"manual_gelu", "add_mul_tanh", "manual_softmax", "manual_layer_norm",
                                      "manual_rms_norm", "row_sum", "col_sum", "tiny_gelu", "gelu_sweep",
                                      "gemm_bias_gelu", "mlp", "gpt2_forward", "attention",
                                      "attention_causal"};
  for (bool quick : {true, false}) {
    std::set<std::string> names;
    for (const Case& c : SuiteCases(quick)) names.insert(c.name);
    EXPECT_EQ(names, want) << (quick ? "quick" : "full");
    EXPECT_FALSE(names.contains(kCompileLatency)) << "a case would share --filter's word for the latency rows";
  }
}

// One of gpt2_forward's four rows runs alone when the filter names its label
// and dtype; the name alone still runs all four, and every key starts with
// the case's name (a filter of names matches what it did).
TEST(SuiteCases, AFilterPicksOneGpt2RowByLabelAndDtype) {
  for (bool quick : {true, false}) {
    std::vector<std::string> picked;
    int gpt2_rows = 0;
    for (const Case& c : SuiteCases(quick)) {
      gpt2_rows += Matches("gpt2_forward", FilterKey(c));
      if (Matches("gpt2_forward SDPA bfloat16", FilterKey(c))) picked.push_back(FilterKey(c));
      EXPECT_TRUE(FilterKey(c).starts_with(c.name)) << FilterKey(c);
    }
    EXPECT_EQ(gpt2_rows, 4) << (quick ? "quick" : "full");
    EXPECT_EQ(picked, std::vector<std::string>{"gpt2_forward SDPA bfloat16"}) << (quick ? "quick" : "full");
  }
}

TEST(SuiteCases, FullSweepIsEveryPowerOfTwoUpTo2To28) {
  int sweep = 0;
  for (const Case& c : SuiteCases(/*quick=*/false)) {
    if (c.name != "gelu_sweep") continue;
    EXPECT_EQ(c.shape, Shape{int64_t{1} << (10 + sweep)});
    ++sweep;
  }
  EXPECT_EQ(sweep, 19);
}

}  // namespace
}  // namespace fusebox::bench

// The compile-latency children (compile_latency.h): their JSON line, the
// checks on a pair of them, and a real pair of fusebox_bench processes.
namespace fusebox::bench {
namespace {

ChildReport SampleChild(const std::string& mode) {
  ChildReport r{.mode = mode, .device = "cpu", .cuda_twin = true, .first_nvrtc_ms = 120.5, .trivial_nvrtc_ms = 15.25};
  r.graphs.push_back({.workload = "manual_gelu", .shape = {256, 256}, .kernels = 1, .compiles = mode == "cold" ? 2 : 0,
                      .disk_hits = mode == "cold" ? 0 : 2, .first_call_ms = 30.5, .compiler_ms = 28, .nvrtc_ms = 20,
                      .compiler_wall_ms = 21, .nvrtc_programs = mode == "cold" ? 1 : 0});
  r.nvrtc_programs = mode == "cold" ? 3 : 0;
  r.compiles = mode == "cold" ? 2 : 0;
  return r;
}

// --profile's memory-bound kernels: those whose roofline time is their
// bytes' at the copy ceiling (not a GEMM's FLOPs, not a graph run), and those
// under 80% of it, worst first, each with its percent and bytes a call;
// library kernels (extern_) counted apart.
TEST(Profile, CountsMemoryBoundKernelsAndListsThoseUnder80Percent) {
  const Roofline roofline{.copy_bytes_per_s = 1e12, .f32_flops_per_s = 1e13};
  auto row = [](const char* name, double bytes, double roofline_us, double took_us) {
    return ProfilerRow{.name = name, .calls = 1, .kernel = true, .bytes_total = bytes,
                       .kernel_time_total_us = took_us, .roofline_time_total_us = roofline_us};
  };
  std::vector<ProfilerRow> rows = {
      row("slow_norm", 1e9, 1000, 2000),   // bytes-bound, 50%
      row("fast_exp", 1e9, 1000, 1100),    // bytes-bound, 90.9%
      row("slower_ce", 2e9, 2000, 5000),   // bytes-bound, 40%
      row("gemm", 1e9, 3000, 4000),        // its FLOPs bound it (3000 us > 1000 us of bytes)
      row("extern_flash_attention_3", 1e9, 1000, 5000),  // bytes-bound at peak FLOPs, but a library kernel
      row("extern_cublaslt_gemm_4", 1e9, 1000, 1100),
  };
  ProfilerRow graph_run = row("compiled graph: slow_norm", 1e9, 1000, 9000);
  graph_run.kernel = false;
  rows.push_back(graph_run);
  Result r;
  MemoryBoundKernels(rows, roofline, r);
  EXPECT_EQ(r.profile_memory_bound, 3);
  EXPECT_EQ(r.profile_memory_bound_under_80,
            (std::vector<std::string>{"slower_ce 40.0% (2000.00 MB)", "slow_norm 50.0% (1000.00 MB)"}));
  EXPECT_EQ(r.profile_library_memory_bound, 2);
  ASSERT_EQ(r.profile_kernels.size(), 6u);  // every kernel row, not the graph run
  EXPECT_EQ(r.profile_kernels[0].name, "slow_norm");
  EXPECT_TRUE(r.profile_kernels[0].memory_bound);
  EXPECT_DOUBLE_EQ(r.profile_kernels[0].roofline_percent, 50.0);
  EXPECT_FALSE(r.profile_kernels[3].memory_bound);  // the gemm
  EXPECT_TRUE(r.profile_kernels[4].library);
  EXPECT_EQ(r.profile_library_under_80, (std::vector<std::string>{"extern_flash_attention_3 20.0% (1000.00 MB)"}));
}

// --json carries --profile's kernels, every one (the printed table stops at
// 40 rows), as JSON a parser reads back.
TEST(Profile, TheJsonCarriesEveryProfiledKernel) {
  Result r;
  r.name = "gpt2_forward";
  r.profile_kernels = {{.name = "per_fused_\"quoted\"_0", .calls = 5, .time_us = 41.5, .bytes = 2.5e7, .flops = 0,
                        .roofline_percent = 71.25, .memory_bound = true},
                       {.name = "extern_cublaslt_gemm_1", .calls = 5, .time_us = 300, .bytes = 6e7, .flops = 3e10,
                        .roofline_percent = 48.5, .library = true}};
  Report report;
  report.results.push_back(r);
  const std::string path = ::testing::TempDir() + "/profile_kernels.json";
  WriteJson(report, path);
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  const nlohmann::json& kernels = j["results"][0]["profile_kernels"];
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0]["name"], "per_fused_\"quoted\"_0");
  EXPECT_EQ(kernels[0]["calls"], 5);
  EXPECT_DOUBLE_EQ(kernels[0]["roofline_percent"].get<double>(), 71.25);
  EXPECT_TRUE(kernels[0]["memory_bound"].get<bool>());
  EXPECT_FALSE(kernels[0]["library"].get<bool>());
  EXPECT_TRUE(kernels[1]["library"].get<bool>());
  EXPECT_DOUBLE_EQ(kernels[1]["flops"].get<double>(), 3e10);
  // Without --profile there is no such key.
  report.results[0].profile_kernels.clear();
  WriteJson(report, path);
  std::ifstream again(path);
  EXPECT_FALSE(nlohmann::json::parse(again)["results"][0].contains("profile_kernels"));
}

TEST(CompileLatency, ChildJsonRoundTripsAfterLogLines) {
  const ChildReport r = SampleChild("cold");
  const std::string json = ChildReportJson(r);
  EXPECT_EQ(json.find('\n'), std::string::npos);
  absl::StatusOr<ChildReport> back = ParseChildReport("[warn] a log line\n" + json + "\ntrailing text\n");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->mode, "cold");
  EXPECT_DOUBLE_EQ(back->first_nvrtc_ms, 120.5);
  ASSERT_EQ(back->graphs.size(), 1u);
  EXPECT_EQ(back->graphs[0].workload, "manual_gelu");
  EXPECT_EQ(back->graphs[0].shape, (std::vector<int64_t>{256, 256}));
  EXPECT_DOUBLE_EQ(back->graphs[0].compiler_wall_ms, 21);
  EXPECT_EQ(back->graphs[0].nvrtc_programs, 1);
  EXPECT_EQ(ChildReportJson(*back), json);
}

TEST(CompileLatency, ParseErrorsSayWhat) {
  EXPECT_FALSE(ParseChildReport("").ok());
  EXPECT_FALSE(ParseChildReport("no json here\n").ok());
  absl::StatusOr<ChildReport> missing = ParseChildReport("{\"mode\": \"cold\"}\n");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("lacks a field"), std::string::npos) << missing.status();
}

TEST(CompileLatency, ChecksFlagAWarmStartThatCompiles) {
  EXPECT_TRUE(CheckLatency(SampleChild("cold"), SampleChild("warm")).empty());
  ChildReport warm = SampleChild("warm");
  warm.graphs[0].compiles = 1;
  warm.nvrtc_programs = 1;
  EXPECT_EQ(CheckLatency(SampleChild("cold"), warm).size(), 2u);
  ChildReport cold = SampleChild("cold");
  cold.graphs[0].compiles = 0;
  EXPECT_EQ(CheckLatency(cold, SampleChild("warm")).size(), 1u);
  cold.error = "boom";
  ASSERT_EQ(CheckLatency(cold, SampleChild("warm")).size(), 1u);
  EXPECT_EQ(CheckLatency(cold, SampleChild("warm"))[0], "cold child: boom");
}

TEST(CompileLatency, GraphsAreGeluSoftmaxLayerNormInFloat32) {
  for (bool quick : {true, false}) {
    std::vector<std::string> names;
    for (const LatencyGraph& g : LatencyGraphs(quick)) names.push_back(g.workload);
    EXPECT_EQ(names, (std::vector<std::string>{"manual_gelu", "manual_softmax", "manual_layer_norm"}));
  }
}

// Two real fusebox_bench processes on the CPU: the cold one compiles (with
// host C++ and NVRTC for the CUDA twins), the warm one runs no compiler.
TEST(CompileLatency, FreshProcessesColdThenWarm) {
  const CompileLatency c = MeasureCompileLatency(FUSEBOX_BENCH_BINARY, Device::cpu(), /*quick=*/true,
                                                 /*cuda_twin=*/true);
  for (const std::string& f : c.failures) ADD_FAILURE() << f;
  ASSERT_EQ(c.cold.graphs.size(), 3u);
  ASSERT_EQ(c.warm.graphs.size(), 3u);
  EXPECT_GT(c.cold.first_nvrtc_ms, 0);
  EXPECT_EQ(c.warm.nvrtc_programs, 0);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(c.cold.graphs[i].compiles, 2) << c.cold.graphs[i].workload;  // the kernel and its CUDA twin
    EXPECT_GT(c.cold.graphs[i].nvrtc_ms, 0);
    EXPECT_EQ(c.warm.graphs[i].compiles, 0);
    EXPECT_EQ(c.warm.graphs[i].disk_hits, 2);
    EXPECT_GT(c.warm.graphs[i].first_call_ms, 0);
  }
}

}  // namespace
}  // namespace fusebox::bench
