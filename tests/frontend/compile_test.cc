// compile() bookkeeping: stats(), fullgraph, graph breaks by reading or
// printing a value, and their reasons and source lines in explain().
#include <cmath>
#include <random>
#include <sstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "backend/source_hooks.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::HasSubstr;
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

constexpr int kScaleByFirstBreakLine = __LINE__ + 3;  // the to_vector() below
Tensor ScaleByFirst(const Tensor& x) {
  Tensor y = exp(x);
  const double first = y.to_vector()[0];  // needs a concrete value: a graph break
  return y * (first > 0 ? 2.0 : 0.5);  // a scalar constant is part of the graph: keep it fixed
}

TEST(CompileTest, StatsCountCallsGraphsBreaksAndCompiles) {
  auto compiled = compile(ScaleByFirst);
  Tensor x = randn({64}, Device::cpu(), FreshSeed());
  compiled(x);
  const CompileStats first = compiled.stats();
  EXPECT_EQ(first.calls, 1);
  EXPECT_EQ(first.graphs, 2);
  EXPECT_EQ(first.graph_breaks, 1);
  EXPECT_EQ(first.plan_compiles + first.cache_hits, 2);
  compiled(randn({64}, Device::cpu(), FreshSeed()));
  const CompileStats second = compiled.stats();
  EXPECT_EQ(second.calls, 2);
  EXPECT_EQ(second.graph_breaks, 2);
  EXPECT_EQ(second.plan_compiles, first.plan_compiles);  // same signature: plans from the cache
  EXPECT_EQ(second.cache_hits, first.cache_hits + 2);
  EXPECT_EQ(second.kernel_compiles, first.kernel_compiles);
}

TEST(CompileTest, FullgraphTurnsABreakIntoAnErrorWithReasonAndLine) {
  auto compiled = compile(ScaleByFirst, CompileOptions{.fullgraph = true});
  Tensor x = randn({8}, Device::cpu(), FreshSeed());
  try {
    compiled(x);
    FAIL() << "expected a fusebox::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(absl::StrCat("graph break with fullgraph=true: to_vector() called at compile_test.cc:",
                                                 kScaleByFirstBreakLine)));
  }
  // Without a break, fullgraph compiles as usual.
  auto whole = compile([](const Tensor& x) { return exp(x) * 2.0; }, CompileOptions{.fullgraph = true});
  Tensor y = whole(x);
  const auto xv = x.to_double_vector(), yv = y.to_double_vector();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_NEAR(yv[i], 2 * std::exp(xv[i]), 1e-5 * (1 + yv[i]));
}

TEST(CompileTest, PrintingATensorBreaksTheGraphAndPrintsItsValues) {
  std::ostringstream printed;
  auto compiled = compile([&](const Tensor& x) {
    Tensor y = x * 2.0;
    printed << y;
    return y + 1.0;
  });
  Tensor x = Tensor::from_vector({1.5f, -2.0f, 3.0f}, {3});
  Tensor z = compiled(x);
  EXPECT_EQ(printed.str(), "tensor([3, -4, 6], shape=[3], dtype=float32, device=cpu)");
  EXPECT_THAT(compiled.explain(), HasSubstr("a tensor was printed (operator<<)"));
  EXPECT_EQ(compiled.stats().graph_breaks, 1);
  EXPECT_EQ(z.to_vector(), (std::vector<float>{4.0f, -3.0f, 7.0f}));
}

}  // namespace
}  // namespace fusebox

namespace fusebox {
namespace {

Tensor GeluOrSoftmax(const Tensor& x) {
  if (sum(x).item() > 0) return gelu(x);
  return softmax(x, -1);
}

TEST(CompileTest, BranchOnAValueTwoGraphsEachBranchCachedSeparately) {
  auto compiled = compile(GeluOrSoftmax);
  Tensor positive = rand({4, 8}, Device::cpu(), FreshSeed()) + 0.1;
  Tensor negative = -positive;
  for (int round = 0; round < 2; ++round) {
    for (const Tensor& x : {positive, negative}) {
      Tensor y = compiled(x);
      const std::vector<double> want = (sum(x).item() > 0 ? gelu(x) : softmax(x, -1)).to_double_vector();
      const std::vector<double> got = y.to_double_vector();
      for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << i;
      EXPECT_THAT(compiled.explain(), HasSubstr("2 graph(s), 1 graph break(s)"));
      EXPECT_THAT(compiled.explain(), HasSubstr("item() called at compile_test.cc:"));
    }
  }
  const CompileStats stats = compiled.stats();
  EXPECT_EQ(stats.calls, 4);
  EXPECT_EQ(stats.graph_breaks, 4);
  // sum, gelu and softmax graphs compiled once each; the second round hits the cache.
  EXPECT_EQ(stats.plan_compiles, 3);
  EXPECT_EQ(stats.cache_hits, 5);
  // Converting to bool is a break too.
  auto as_bool = compile([](const Tensor& x) { return gt(sum(x), 0.0) ? exp(x) : -x; });
  Tensor y = as_bool(positive);
  EXPECT_THAT(as_bool.explain(), HasSubstr("converted to bool"));
  EXPECT_NEAR(y.to_vector()[0], std::exp(positive.to_vector()[0]), 1e-5);
}

TEST(CompileTest, ABreakWithNothingCapturedAfterItStillCounts) {
  // item() ends the only graph; the function's end then has nothing to run.
  auto compiled = compile([](const Tensor& x) { return exp(x).item(); });
  const Tensor x = randn({1}, Device::cpu(), FreshSeed());
  EXPECT_NEAR(compiled(x), std::exp(x.item()), 1e-5 * std::exp(x.item()));
  EXPECT_EQ(compiled.stats().graphs, 1);
  EXPECT_EQ(compiled.stats().graph_breaks, 1);
  EXPECT_THAT(compiled.explain(), HasSubstr("1 graph(s), 1 graph break(s)"));
}

TEST(CompileTest, ShapeChangeRecompilesOnceAndSaysWhy) {
  auto compiled = compile([](const Tensor& x) { return tanh(x) * 3.0; });
  compiled(randn({16, 32}, Device::cpu(), FreshSeed()));
  compiled(randn({16, 32}, Device::cpu(), FreshSeed()));
  EXPECT_EQ(compiled.stats().plan_compiles, 1);
  compiled(randn({24, 32}, Device::cpu(), FreshSeed()));
  EXPECT_EQ(compiled.stats().plan_compiles, 2);
  EXPECT_THAT(compiled.explain(),
              HasSubstr("recompiled: graph 0: input 0: float32[16, 32] strides [32, 1] on cpu -> float32[24, 32] "
                        "strides [32, 1] on cpu"));
  compiled(randn({16, 32}, Device::cpu(), FreshSeed()).to(DType::kBFloat16));
  EXPECT_THAT(compiled.explain(), HasSubstr("-> bfloat16[16, 32]"));
}

// stats().times says where compile time went: each part of a plan compile is
// timed, and a call served from the plan cache adds nothing.
TEST(CompileTest, CompileTimesAddUpPerPlanCompile) {
  // A scale no other test compiles, so the kernel is new to this process.
  const double scale = 1.0 + static_cast<double>(FreshSeed() % 100000) / 1e6;
  auto compiled = compile([scale](const Tensor& x) { return softmax(x * scale, -1) + 1.0; });
  const Tensor x = randn({8, 40}, Device::cpu(), FreshSeed());
  compiled(x);
  const CompileTimes first = compiled.stats().times;
  EXPECT_GT(first.plan_ms, 0);
  EXPECT_GT(first.codegen_ms, 0);
  EXPECT_GE(first.compile_ms, 0);
  EXPECT_GT(first.load_ms, 0);
  EXPECT_NEAR(first.total_ms(), first.plan_ms + first.codegen_ms + first.compile_ms + first.load_ms, 1e-9);
  compiled(x);  // the plan cache: nothing compiled
  EXPECT_EQ(compiled.stats().times.total_ms(), first.total_ms());
  compiled(randn({8, 48}, Device::cpu(), FreshSeed()));  // a new size: a second plan compile
  EXPECT_GT(compiled.stats().times.plan_ms, first.plan_ms);
  EXPECT_GT(compiled.stats().times.load_ms, first.load_ms);
}

TEST(CompileTest, StrideChangeRecompilesAndResultsFollowTheLayout) {
  auto compiled = compile([](const Tensor& x) { return x * 2.0 + 1.0; }, CompileOptions{.dynamic = false});
  Tensor a = randn({12, 20}, Device::cpu(), FreshSeed());
  Tensor b = randn({20, 12}, Device::cpu(), FreshSeed()).transpose(0, 1);  // same shape, other strides
  for (const Tensor& x : {a, b}) {
    std::vector<double> want;
    for (double v : x.to_double_vector()) want.push_back(v * 2 + 1);
    ExpectClose(compiled(x).to_vector(), want, 1e-6);
  }
  EXPECT_EQ(compiled.stats().plan_compiles, 2);
  EXPECT_THAT(compiled.explain(),
              HasSubstr("input 0: float32[12, 20] strides [20, 1] on cpu -> float32[12, 20] strides [1, 12] on cpu"));
}

TEST(CompileTest, ACallRepeatingTheLastCallsGraphRunsItsPlanWithNoLookup) {
  auto compiled = compile(ManualGelu);
  for (int call = 0; call < 3; ++call) {
    Tensor x = randn({37, 11}, Device::cpu(), FreshSeed());
    std::vector<double> want;
    for (double v : x.to_double_vector()) want.push_back(GeluRef(v));
    ExpectClose(compiled(x).to_vector(), want, 1e-5);
    EXPECT_EQ(compiled.stats().repeated_graphs, call);  // every call after the first
  }
  EXPECT_EQ(compiled.stats().cache_hits, 2);
}

// The capture follows the last call's graph; a call whose graph differs (a
// constant, an extra op, other strides) is caught wherever it differs, and
// computes its own graph.
TEST(CompileTest, ACallWhoseGraphDiffersFromTheLastIsTracedAndComputedAfresh) {
  double scale = 2.0;
  bool extra = false;
  auto compiled = compile([&](const Tensor& x) {
    Tensor y = x * scale + 1.0;
    return extra ? tanh(y) : y;
  }, CompileOptions{.dynamic = false});
  Tensor a = randn({9, 14}, Device::cpu(), FreshSeed());
  Tensor b = randn({14, 9}, Device::cpu(), FreshSeed()).transpose(0, 1);
  struct Step {
    double scale;
    bool extra;
    const Tensor* x;
    bool repeats;
  };
  const Step steps[] = {{2.0, false, &a, false}, {2.0, false, &a, true}, {3.0, false, &a, false},
                        {3.0, false, &a, true},  {3.0, true, &a, false}, {3.0, true, &a, true},
                        {3.0, false, &a, false}, {3.0, false, &b, false}, {3.0, false, &b, true},
                        {2.0, false, &a, false}};
  int64_t repeated = 0;
  for (const Step& step : steps) {
    scale = step.scale;
    extra = step.extra;
    std::vector<double> want;
    for (double v : step.x->to_double_vector()) want.push_back(extra ? std::tanh(v * scale + 1) : v * scale + 1);
    ExpectClose(compiled(*step.x).to_vector(), want, 1e-5);
    repeated += step.repeats;
    EXPECT_EQ(compiled.stats().repeated_graphs, repeated) << "scale " << step.scale << ", extra " << step.extra;
  }
  // Four different graphs (scale 2, scale 3, tanh, transposed input); the
  // rest from the cache, found by lookup or by repeating the last call.
  EXPECT_EQ(compiled.stats().plan_compiles, 4);
  EXPECT_EQ(compiled.stats().cache_hits, 6);
}

TEST(CompileTest, EachGraphOfACallWithABreakFollowsItsOwnLastGraph) {
  auto compiled = compile(ScaleByFirst);
  for (int call = 0; call < 3; ++call) {
    Tensor x = randn({29}, Device::cpu(), FreshSeed());
    std::vector<double> want;
    for (double v : x.to_double_vector()) want.push_back(std::exp(v) * 2.0);
    ExpectClose(compiled(x).to_vector(), want, 1e-5);
    EXPECT_EQ(compiled.stats().repeated_graphs, 2 * call);
  }
}

TEST(CompileTest, AGraphThatFailsToCompileLeavesItsTensorsSayingWhyAndTheFunctionUsable) {
  // Every kernel of this graph (one no other test builds) fails to compile.
  backend::SetSourceRewriteForTesting(
      [](const std::string& name, const std::string& source) { return name == "poi_fused_exp_mul_0" ? "not C++" : source; });
  absl::Cleanup restore = [] { backend::SetSourceRewriteForTesting(nullptr); };
  Tensor kept;
  auto compiled = compile([&](const Tensor& x) {
    kept = exp(x) * 7.25;
    return kept.to_vector();  // the break compiles and runs the graph
  });
  Tensor x = randn({5, 11}, Device::cpu(), FreshSeed());
  EXPECT_THROW(compiled(x), Error);
  try {
    kept.to_vector();
    FAIL() << "expected a fusebox::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("the graph computing this tensor failed"));
  }
  // Nothing was cached for the failed graph: with the compiler back, it works.
  std::move(restore).Invoke();
  const std::vector<float> got = compiled(x);
  std::vector<double> want;
  for (double v : x.to_double_vector()) want.push_back(std::exp(v) * 7.25);
  ExpectClose(got, want, 1e-5);
}

}  // namespace
}  // namespace fusebox
