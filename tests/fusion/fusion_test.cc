// Fusion through the public API: what compile() turns into kernels, and that
// the fused numbers match a float64 reference.
#include <cmath>
#include <random>
#include <tuple>

#include "frontend/fusebox.h"
#include "frontend/runtime.h"
#include "fusion/eliminate_dead_nodes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

TEST(FusionTest, ManualGeluIsOneKernelWithInductorName) {
  Tensor x = randn({33, 257}, Device::cpu(), FreshSeed());
  auto compiled = compile(ManualGelu);
  Tensor y = compiled(x);
  EXPECT_THAT(Names(compiled.kernels()), ElementsAre("poi_fused_add_mul_pow_tanh_0"));
  std::vector<double> ref;
  for (double v : x.to_double_vector()) ref.push_back(GeluRef(v));
  ExpectClose(y.to_vector(), ref, 1e-6);
  // Eager gives the same numbers, one kernel per op.
  ExpectClose(ManualGelu(x).to_vector(), ref, 1e-6);
}

TEST(FusionTest, ManualGeluOnTransposedAndSlicedInputs) {
  Tensor base = randn({64, 48}, Device::cpu(), FreshSeed());
  auto compiled = compile(ManualGelu);
  for (const Tensor& x : {base.transpose(0, 1), base.narrow(1, 5, 30), base.slice(0, 3, 60).transpose(0, 1)}) {
    Tensor y = compiled(x);
    ASSERT_EQ(y.shape(), x.shape());
    std::vector<double> ref;
    for (double v : x.to_double_vector()) ref.push_back(GeluRef(v));
    ExpectClose(y.to_vector(), ref, 1e-6);
    EXPECT_EQ(compiled.kernels().size(), 1u);
  }
}

TEST(FusionTest, ChainWithBroadcastIsOneKernel) {
  const uint64_t seed = FreshSeed();
  Tensor a = randn({7, 1}, Device::cpu(), seed), b = randn({1, 5}, Device::cpu(), seed + 1);
  Tensor c = randn({5}, Device::cpu(), seed + 2);
  auto compiled = compile([](const Tensor& a, const Tensor& b, const Tensor& c) { return exp(a * b + c) - 1.0; });
  Tensor y = compiled(a, b, c);
  EXPECT_THAT(Names(compiled.kernels()), ElementsAre("poi_fused_add_exp_mul_sub_0"));
  ASSERT_EQ(y.shape(), (Shape{7, 5}));
  auto av = a.to_double_vector(), bv = b.to_double_vector(), cv = c.to_double_vector();
  std::vector<double> ref;
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 5; ++j) ref.push_back(std::exp(av[i] * bv[j] + cv[j]) - 1.0);
  ExpectClose(y.to_vector(), ref, 1e-6);
}

TEST(FusionTest, ValueUsedTwiceIsComputedOnce) {
  Tensor x = randn({100}, Device::cpu(), FreshSeed());
  auto compiled = compile([](const Tensor& x) {
    Tensor y = exp(x);
    return y * y + y;
  });
  Tensor z = compiled(x);
  ASSERT_EQ(compiled.kernels().size(), 1u);
  const std::string src = compiled.kernels()[0].source;
  // One load of x and one exp in the kernel body: the shared value stays in a register.
  const std::string body = src.substr(src.find("extern \"C\""));
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t p = body.find(what); p != std::string::npos; p = body.find(what, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("expf("), 1u) << body;
  EXPECT_EQ(count("in0["), 1u) << body;
  std::vector<double> ref;
  for (double v : x.to_double_vector()) ref.push_back(std::exp(v) * std::exp(v) + std::exp(v));
  ExpectClose(z.to_vector(), ref, 1e-5);
}

TEST(FusionTest, TwoOutputsShareOneKernel) {
  Tensor x = randn({16, 16}, Device::cpu(), FreshSeed());
  auto compiled = compile([](const Tensor& x) { return std::make_tuple(tanh(x), x * 2.0); });
  auto [t, d] = compiled(x);
  ASSERT_EQ(compiled.kernels().size(), 1u);
  EXPECT_EQ(compiled.kernels()[0].name, "poi_fused_mul_tanh_0");
  std::vector<double> rt, rd;
  for (double v : x.to_double_vector()) rt.push_back(std::tanh(v)), rd.push_back(2 * v);
  ExpectClose(t.to_vector(), rt, 1e-6);
  ExpectClose(d.to_vector(), rd, 1e-6);
}

TEST(FusionTest, OutputsOfDifferentShapesGetOneKernelEach) {
  Tensor x = randn({8, 4}, Device::cpu(), FreshSeed());
  auto compiled = compile([](const Tensor& x) {
    Tensor row = exp(x.narrow(0, 0, 1));  // [1, 4]
    return std::make_tuple(row, x + row);  // [1, 4] and [8, 4]
  });
  auto [row, sum] = compiled(x);
  EXPECT_EQ(compiled.kernels().size(), 2u);
  auto xv = x.to_double_vector();
  std::vector<double> rs;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) rs.push_back(xv[i * 4 + j] + std::exp(xv[j]));
  ExpectClose(sum.to_vector(), rs, 1e-6);
}

TEST(FusionTest, ViewsOfIntermediatesFuse) {
  const uint64_t seed = FreshSeed();
  Tensor x = randn({6, 10}, Device::cpu(), seed), y = randn({10, 6}, Device::cpu(), seed + 1);
  auto compiled = compile([](const Tensor& x, const Tensor& y) {
    Tensor e = exp(x).transpose(0, 1);          // a view of a value never stored
    Tensor r = (e * y).reshape({5, 12});         // reshape of a contiguous result
    Tensor t = (x + 1.0).transpose(0, 1).reshape({60});  // reshape that needs a copy
    return std::make_tuple(r, t);
  });
  auto [r, t] = compiled(x, y);
  auto xv = x.to_double_vector(), yv = y.to_double_vector();
  std::vector<double> rr, rt;
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 6; ++j) rr.push_back(std::exp(xv[j * 10 + i]) * yv[i * 6 + j]), rt.push_back(xv[j * 10 + i] + 1);
  ExpectClose(r.to_vector(), rr, 1e-6);
  ExpectClose(t.to_vector(), rt, 1e-6);
  EXPECT_EQ(r.shape(), (Shape{5, 12}));
}

TEST(FusionTest, SecondCallWithSameSignatureCompilesNothing) {
  auto compiled = compile(ManualGelu);
  Tensor x = randn({40, 40}, Device::cpu(), FreshSeed());
  compiled(x);
  const auto before = frontend::GetRuntimeStats();
  Tensor y = compiled(randn({40, 40}, Device::cpu(), FreshSeed()));
  const auto after = frontend::GetRuntimeStats();
  EXPECT_EQ(after.plan_compiles, before.plan_compiles);
  EXPECT_EQ(after.plan_cache_hits, before.plan_cache_hits + 1);
  // A new shape is a new plan.
  compiled(randn({41, 40}, Device::cpu(), FreshSeed()));
  EXPECT_EQ(frontend::GetRuntimeStats().plan_compiles, after.plan_compiles + 1);
  EXPECT_THAT(compiled.explain(), HasSubstr("poi_fused_add_mul_pow_tanh_0"));
}

TEST(FusionTest, Bf16GeluComputesInF32AndStoresBf16) {
  Tensor x = randn({1000}, Device::cpu(), FreshSeed()).to(DType::kBFloat16);
  auto compiled = compile(ManualGelu);
  Tensor y = compiled(x);
  EXPECT_EQ(y.dtype(), DType::kBFloat16);
  EXPECT_THAT(Names(compiled.kernels()), ElementsAre("poi_fused_add_mul_pow_tanh_0"));
  std::vector<double> ref;
  for (double v : x.to_double_vector()) ref.push_back(GeluRef(v));
  ExpectClose(y.to_vector(), ref, 1e-2);
}

TEST(FusionTest, ReadingAValueInsideCompileBreaksTheGraph) {
  Tensor x = randn({32}, Device::cpu(), FreshSeed());
  auto compiled = compile([](const Tensor& x) {
    Tensor y = exp(x);
    const double first = y.to_vector()[0];  // needs a concrete value: graph break
    return y * first;
  });
  Tensor z = compiled(x);
  const std::string explain = compiled.explain();
  EXPECT_THAT(explain, HasSubstr("2 graph(s), 1 graph break(s)"));
  EXPECT_THAT(explain, HasSubstr("to_vector() called at fusion_test.cc:"));
  auto xv = x.to_double_vector();
  std::vector<double> ref;
  for (double v : xv) ref.push_back(std::exp(v) * static_cast<float>(std::exp(xv[0])));
  ExpectClose(z.to_vector(), ref, 1e-6);
}

// In-place writes are graphs whose output is stored into an input: the target
// is read by no node, yet dead-node elimination keeps it, it is part of the
// plan key, and the kernel stores through its strides.
TEST(FusionTest, StoreTargetIsKeptAndStoredThroughItsStrides) {
  graph::GraphBuilder b(Device::cpu());
  graph::Node target{.op = graph::Op::kInput, .dtype = DType::kFloat32, .shape = {3, 2}};
  target.input_index = 0;
  target.strides = {1, 3};  // a transposed [2, 3] tensor
  graph::Node src = target;
  src.input_index = 1;
  src.strides = {2, 1};
  const graph::NodeId t = b.Add(target), s = b.Add(src);
  graph::Node neg{.op = graph::Op::kNeg, .dtype = DType::kFloat32, .shape = {3, 2}};
  neg.inputs = {s};
  const graph::NodeId out = b.Add(neg);
  b.Add(graph::Node{.op = graph::Op::kExp, .dtype = DType::kFloat32, .shape = {3, 2}, .inputs = {s}});  // dead
  const graph::Graph g = b.Build({out}, {t});
  EXPECT_EQ(g.StoreTarget(out), t);
  EXPECT_THAT(g.ToString(), HasSubstr("return %2 into %0"));
  EXPECT_FALSE(g == b.Build({out}));
  const graph::Graph live = fusion::EliminateDeadNodes(g);
  EXPECT_EQ(live.size(), 3);
  EXPECT_THAT(live.ToString(), HasSubstr("return %2 into %0"));

  const Tensor base = Tensor::from_vector({0, 0, 0, 0, 0, 0}, {2, 3});
  const Tensor values = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2});
  const frontend::RunResult run = frontend::RunGraph(g, {base.transpose(0, 1), values});
  EXPECT_EQ(run.outputs[0].impl().storage, base.impl().storage);
  EXPECT_THAT(base.to_vector(), ElementsAre(-1, -3, -5, -2, -4, -6));
}

}  // namespace
}  // namespace fusebox
