// CompileOptions::replay: after two traced calls with the same arguments
// captured the same graph, later calls run the plan without tracing, on
// their own inputs; anything else is traced as before.
#include <tuple>

#include "frontend/fusebox.h"
#include "gtest/gtest.h"
#include "profiler/profiler.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using testing_workloads::ExpectClose;
using testing_workloads::FreshSeed;
using testing_workloads::GeluRef;
using testing_workloads::ManualGelu;

std::vector<double> GeluOf(const Tensor& x) {
  std::vector<double> out = x.to_double_vector();
  for (double& v : out) v = GeluRef(v);
  return out;
}

// Calls `f` on fresh inputs of `shape` and checks each result against float64.
template <typename F>
void ExpectGeluCalls(F& f, const Shape& shape, int calls, Device device = Device::cpu()) {
  for (int i = 0; i < calls; ++i) {
    const Tensor x = randn(shape, device, FreshSeed());
    ExpectClose(f(x).to_vector(), GeluOf(x), 1e-5);
  }
}

TEST(ReplayTest, ThirdCallReplaysOnItsOwnInputs) {
  auto f = compile(ManualGelu, {.replay = true});
  ExpectGeluCalls(f, {37, 5}, 2);
  EXPECT_EQ(f.stats().replays, 0);
  EXPECT_EQ(f.stats().graphs, 2);
  ExpectGeluCalls(f, {37, 5}, 3);
  EXPECT_EQ(f.stats().replays, 3);
  EXPECT_EQ(f.stats().calls, 5);
  EXPECT_EQ(f.stats().graphs, 2);  // replayed calls capture nothing
  EXPECT_EQ(f.kernels().size(), 1u);
  EXPECT_NE(f.explain().find("replay: 3 call(s) replayed, 1 recorded"), std::string::npos) << f.explain();
}

TEST(ReplayTest, OffByDefault) {
  auto f = compile(ManualGelu);
  ExpectGeluCalls(f, {64}, 4);
  EXPECT_EQ(f.stats().replays, 0);
  EXPECT_EQ(f.stats().graphs, 4);
}

TEST(ReplayTest, OtherShapesAndStridesAreTracedThenRecordedToo) {
  auto f = compile(ManualGelu, {.dynamic = false, .replay = true});
  ExpectGeluCalls(f, {8, 16}, 3);
  ASSERT_EQ(f.stats().replays, 1);
  ExpectGeluCalls(f, {16, 8}, 2);  // another shape: traced twice
  EXPECT_EQ(f.stats().replays, 1);
  ExpectGeluCalls(f, {16, 8}, 1);
  EXPECT_EQ(f.stats().replays, 2);
  // A transposed argument has other strides: traced, and correct.
  const Tensor x = randn({16, 8}, Device::cpu(), FreshSeed());
  const Tensor xt = x.transpose(0, 1);
  ExpectClose(f(xt).to_vector(), GeluOf(xt), 1e-5);
  EXPECT_EQ(f.stats().replays, 2);
  ExpectGeluCalls(f, {8, 16}, 1);  // the first shape still replays
  EXPECT_EQ(f.stats().replays, 3);
}

// Shapes in turn (A, B, C, A, B, C, ...; as threads or a train/eval loop
// interleave calls): each traced call waits for a later one like it, so the
// second round confirms all three and the third replays.
TEST(ReplayTest, ShapesInTurnAreConfirmedByTheirNextCall) {
  auto f = compile(ManualGelu, {.dynamic = false, .replay = true});
  const std::vector<Shape> shapes = {{8, 16}, {16, 8}, {3, 5}};
  for (int round = 0; round < 3; ++round) {
    for (const Shape& shape : shapes) ExpectGeluCalls(f, shape, 1);
    EXPECT_EQ(f.stats().replays, round < 2 ? 0 : 3) << "round " << round;
  }
  EXPECT_EQ(f.stats().calls, 9);
}

TEST(ReplayTest, NumberArgumentsAreGuardedByValue) {
  auto f = compile([](const Tensor& x, double scale) { return x * scale + 1.0; }, {.replay = true});
  const Tensor x = randn({100}, Device::cpu(), FreshSeed());
  const std::vector<double> xs = x.to_double_vector();
  auto expect = [&](double scale) {
    std::vector<double> want;
    for (double v : xs) want.push_back(v * scale + 1.0);
    ExpectClose(f(x, scale).to_vector(), want, 1e-6);
  };
  for (int i = 0; i < 3; ++i) expect(2.0);
  EXPECT_EQ(f.stats().replays, 1);
  expect(3.0);  // another value: traced, not the plan with 2.0 baked in
  EXPECT_EQ(f.stats().replays, 1);
  expect(2.0);
  EXPECT_EQ(f.stats().replays, 2);
}

TEST(ReplayTest, GlobalTensorsAreReadAtRunTime) {
  Tensor weight = randn({32}, Device::cpu(), FreshSeed());
  auto f = compile([&weight](const Tensor& x) { return x * weight; }, {.replay = true});
  const Tensor x = randn({32}, Device::cpu(), FreshSeed());
  for (int i = 0; i < 3; ++i) (void)f(x);
  ASSERT_EQ(f.stats().replays, 1);
  weight.copy_(randn({32}, Device::cpu(), FreshSeed()));  // in place: the same tensor, new values
  const std::vector<double> xs = x.to_double_vector(), ws = weight.to_double_vector();
  std::vector<double> want;
  for (size_t i = 0; i < xs.size(); ++i) want.push_back(xs[i] * ws[i]);
  ExpectClose(f(x).to_vector(), want, 1e-6);
  EXPECT_EQ(f.stats().replays, 2);
}

TEST(ReplayTest, ViewsOfArgumentsTuplesAndPassThroughOutputs) {
  // Reads a view of its argument; returns a view of a computed value, the
  // computed value and the argument itself.
  auto f = compile(
      [](const Tensor& x) {
        Tensor y = exp(x.transpose(0, 1)) + 1.0;
        return std::make_tuple(y, y.transpose(0, 1), x);
      },
      {.replay = true});
  for (int i = 0; i < 4; ++i) {
    const Tensor x = randn({6, 10}, Device::cpu(), FreshSeed());
    auto [y, yt, same] = f(x);
    const std::vector<double> xs = x.to_double_vector();
    std::vector<double> want_y, want_yt;
    for (int c = 0; c < 10; ++c) {
      for (int r = 0; r < 6; ++r) want_y.push_back(std::exp(xs[r * 10 + c]) + 1.0);
    }
    for (double v : xs) want_yt.push_back(std::exp(v) + 1.0);
    ASSERT_EQ(y.shape(), (Shape{10, 6}));
    ASSERT_EQ(yt.shape(), (Shape{6, 10}));
    ExpectClose(y.to_vector(), want_y, 1e-6);
    ExpectClose(yt.to_vector(), want_yt, 1e-6);
    EXPECT_EQ(same.data_ptr(), x.data_ptr());
  }
  EXPECT_EQ(f.stats().replays, 2);
}

TEST(ReplayTest, VectorResults) {
  auto f = compile([](const Tensor& a, const Tensor& b) { return std::vector<Tensor>{a + b, a * b}; },
                   {.replay = true});
  for (int i = 0; i < 3; ++i) {
    const Tensor a = randn({50}, Device::cpu(), FreshSeed()), b = randn({50}, Device::cpu(), FreshSeed());
    const std::vector<Tensor> out = f(a, b);
    const std::vector<double> as = a.to_double_vector(), bs = b.to_double_vector();
    std::vector<double> sum, prod;
    for (size_t k = 0; k < as.size(); ++k) {
      sum.push_back(as[k] + bs[k]);
      prod.push_back(as[k] * bs[k]);
    }
    ASSERT_EQ(out.size(), 2u);
    ExpectClose(out[0].to_vector(), sum, 1e-6);
    ExpectClose(out[1].to_vector(), prod, 1e-6);
  }
  EXPECT_EQ(f.stats().replays, 1);
}

TEST(ReplayTest, GraphBreaksAreNeverReplayed) {
  auto f = compile(
      [](const Tensor& x) {
        if (sum(x).item() > 0) return ManualGelu(x);
        return exp(x);
      },
      {.replay = true});
  const Tensor x = randn({40}, Device::cpu(), FreshSeed());
  for (int i = 0; i < 4; ++i) (void)f(x);
  EXPECT_EQ(f.stats().replays, 0);
  EXPECT_EQ(f.stats().graph_breaks, 4);
  EXPECT_NE(f.explain().find("cannot be replayed: the call captured 2 graph(s) with 1 graph break(s)"),
            std::string::npos)
      << f.explain();
}

TEST(ReplayTest, TypesItCannotGuardAreTracedAndExplained) {
  // A string argument: no guard can tell whether the function would differ.
  auto f = compile([](const Tensor& x, const std::string& op) { return op == "exp" ? exp(x) : x + 1.0; },
                   {.replay = true});
  const Tensor x = randn({20}, Device::cpu(), FreshSeed());
  for (int i = 0; i < 3; ++i) (void)f(x, std::string("exp"));
  const std::vector<double> xs = x.to_double_vector();
  std::vector<double> want;
  for (double v : xs) want.push_back(v + 1.0);
  ExpectClose(f(x, std::string("add")).to_vector(), want, 1e-6);
  EXPECT_EQ(f.stats().replays, 0);
  EXPECT_NE(f.explain().find("never replayed: its arguments are not all tensors or numbers"), std::string::npos)
      << f.explain();
}

TEST(ReplayTest, ReplayedCallsAreProfiledAsGraphRuns) {
  auto f = compile(ManualGelu, {.replay = true});
  const Tensor x = randn({128}, Device::cpu(), FreshSeed());
  (void)f(x);
  (void)f(x);
  Profiler prof;
  (void)f(x);
  ASSERT_EQ(f.stats().replays, 1);
  int graph_runs = 0, kernels = 0;
  for (const ProfilerEvent& e : prof.events()) {
    graph_runs += e.kind == ProfilerEvent::Kind::kHostOp && e.name == "compiled graph: poi_fused_add_mul_pow_tanh_0";
    kernels += e.kind == ProfilerEvent::Kind::kKernel && e.name == "poi_fused_add_mul_pow_tanh_0";
  }
  EXPECT_EQ(graph_runs, 1);
  EXPECT_EQ(kernels, 1);
}

TEST(ReplayTest, InsideAnotherCompiledFunctionItsOpsJoinThatGraph) {
  auto inner = compile(ManualGelu, {.replay = true});
  auto outer = compile([&inner](const Tensor& x) { return inner(x) * 2.0; });
  for (int i = 0; i < 4; ++i) {
    const Tensor x = randn({300}, Device::cpu(), FreshSeed());
    std::vector<double> want = GeluOf(x);
    for (double& v : want) v *= 2.0;
    ExpectClose(outer(x).to_vector(), want, 1e-5);
    EXPECT_EQ(outer.kernels().size(), 1u);  // gelu and the scaling fused
  }
  EXPECT_EQ(inner.stats().replays, 0);
}

TEST(ReplayTest, ReplaysOnTheGpu) {
  SKIP_WITHOUT_CUDA();
  auto f = compile(ManualGelu, {.replay = true});
  ExpectGeluCalls(f, {1000, 33}, 5, Device::cuda(0));
  EXPECT_EQ(f.stats().replays, 3);
}

}  // namespace
}  // namespace fusebox
