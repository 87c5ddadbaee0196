// compile() bookkeeping: stats(), fullgraph, graph breaks by reading or
// printing a value, and their reasons and source lines in explain().
#include <cmath>
#include <random>
#include <sstream>

#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fusebox {
namespace {

using ::testing::HasSubstr;

uint64_t FreshSeed() { return std::random_device{}(); }

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
    EXPECT_THAT(e.what(), HasSubstr("graph break with fullgraph=true: to_vector() called at compile_test.cc:20"));
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
