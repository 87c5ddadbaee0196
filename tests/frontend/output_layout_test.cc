// Results of pointwise ops keep a dense input's layout (PyTorch's
// TensorIterator rule), eagerly and under compile(): strides, values against
// float64, and kernels that walk memory in order.
#include <cmath>
#include <functional>

#include "frontend/fusebox.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

using Fn = std::function<Tensor(const Tensor&, const Tensor&)>;
using Ref = std::function<double(double, double)>;

// Element (logical row-major index i) of `t`'s values, broadcast to `shape`.
double At(const std::vector<double>& values, const Shape& from, const Shape& shape, int64_t i) {
  int64_t index = 0, stride = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    const int64_t pos = i % shape[d];
    i /= shape[d];
    const int64_t fd = d - static_cast<int64_t>(shape.size() - from.size());
    if (fd < 0) continue;
    if (from[fd] != 1) index += pos * stride;
    stride *= from[fd];
  }
  if (index >= static_cast<int64_t>(values.size())) {  // `from` does not broadcast to `shape`: the test's mistake
    ADD_FAILURE() << "shape " << ShapeToString(from) << " does not broadcast to " << ShapeToString(shape);
    return NAN;
  }
  return values[index];
}

// Runs fn(a, b) eagerly and compiled: both results have `strides` and the
// values ref(a, b) elementwise, to float32 rounding.
void CheckLayout(const Fn& fn, const Ref& ref, const Tensor& a, const Tensor& b, const Strides& strides) {
  const Tensor eager = fn(a, b);
  auto compiled = compile(fn);
  const Tensor once = compiled(a, b);
  const int64_t plans = compiled.stats().plan_compiles;
  const Tensor cached = compiled(a, b);
  EXPECT_EQ(compiled.stats().plan_compiles, plans);  // the second call reused the plan
  const std::vector<double> av = a.to_double_vector(), bv = b.to_double_vector();
  for (const Tensor* got : {&eager, &once, &cached}) {
    EXPECT_EQ(got->strides(), strides) << "shape " << ShapeToString(got->shape());
    const std::vector<double> v = got->to_double_vector();
    ASSERT_EQ(static_cast<int64_t>(v.size()), got->numel());
    for (int64_t i = 0; i < got->numel(); ++i) {
      const double want = ref(At(av, a.shape(), got->shape(), i), At(bv, b.shape(), got->shape(), i));
      ASSERT_NEAR(v[i], want, 2e-5 * (1 + std::fabs(want))) << "element " << i;
    }
  }
}

const Fn kAdd = [](const Tensor& a, const Tensor& b) { return a + b; };
const Ref kAddRef = [](double a, double b) { return a + b; };
const Fn kExpA = [](const Tensor& a, const Tensor&) { return exp(a); };
const Ref kExpRef = [](double a, double) { return std::exp(a); };
const Fn kGeluA = [](const Tensor& a, const Tensor&) { return ManualGelu(a); };
const Ref kGeluRef = [](double a, double) { return GeluRef(a); };

class OutputLayoutTest : public test_util::OnEachDevice {
 protected:
  Tensor Randn(const Shape& shape) const { return randn(shape, device(), FreshSeed()); }
};

TEST_P(OutputLayoutTest, UnaryKeepsTransposedAndPermutedLayouts) {
  const Tensor xt = Randn({5, 7}).transpose(0, 1);  // [7, 5], strides (1, 7)
  CheckLayout(kExpA, kExpRef, xt, xt, {1, 7});
  const Tensor p = Randn({2, 3, 4}).permute({2, 0, 1});  // [4, 2, 3], strides (1, 12, 4)
  CheckLayout(kExpA, kExpRef, p, p, {1, 12, 4});
  const Tensor c = Randn({5, 7});
  CheckLayout(kExpA, kExpRef, c, c, {7, 1});
}

TEST_P(OutputLayoutTest, BinaryFollowsTheFirstOperandThatOrdersTheDims) {
  const Tensor xt = Randn({5, 7}).transpose(0, 1), yt = Randn({5, 7}).transpose(0, 1), c = Randn({7, 5});
  CheckLayout(kAdd, kAddRef, xt, c, {1, 7});   // transposed + contiguous
  CheckLayout(kAdd, kAddRef, c, xt, {5, 1});   // contiguous + transposed
  CheckLayout(kAdd, kAddRef, xt, yt, {1, 7});  // both transposed
  CheckLayout(kAdd, kAddRef, Randn({5}), xt, {1, 7});     // broadcast row + transposed
  CheckLayout(kAdd, kAddRef, Randn({7, 1}), xt, {1, 7});  // broadcast column + transposed
  CheckLayout(kAdd, kAddRef, Randn({7, 1}), c, {5, 1});
}

TEST_P(OutputLayoutTest, GeluChainOnATransposedViewIsACopyOfItsLayout) {
  const Tensor x = Randn({33, 65}), p = Randn({3, 5, 9}).permute({1, 2, 0});
  CheckLayout(kGeluA, kGeluRef, x.transpose(0, 1), x.transpose(0, 1), {1, 65});
  CheckLayout(kGeluA, kGeluRef, p, p, {9, 1, 45});
  // The transposed case compiles to the contiguous case's kernel: it walks
  // x and the result in memory order (x.transpose(0, 1) permuted back is x).
  auto on_t = compile([](const Tensor& a) { return ManualGelu(a); });
  auto on_x = compile([](const Tensor& a) { return ManualGelu(a); });
  on_t(x.transpose(0, 1));
  on_x(x);
  ASSERT_EQ(on_t.kernels().size(), 1u);
  ASSERT_EQ(on_x.kernels().size(), 1u);
  EXPECT_EQ(on_t.kernels()[0].source, on_x.kernels()[0].source);
}

TEST_P(OutputLayoutTest, SlicedEmptyAndSizeOneDims) {
  const Tensor x = Randn({5, 7});
  const Tensor s = x.slice(1, 0, 3), st = x.transpose(0, 1).slice(1, 0, 3);
  CheckLayout(kExpA, kExpRef, s, s, {3, 1});    // x[:, :3]: contiguous
  CheckLayout(kExpA, kExpRef, st, st, {1, 7});  // x.transpose(0, 1)[:, :3]: dense, transposed
  const Tensor e = Randn({3, 0}).transpose(0, 1);                             // [0, 3]: empty is contiguous
  CheckLayout(kExpA, kExpRef, e, e, {3, 1});
  const Tensor u = Randn({4, 3}).unsqueeze(1).transpose(0, 2);    // [3, 1, 4], strides (1, 3, 3)
  CheckLayout(kExpA, kExpRef, u, u, {1, 3, 3});
  CheckLayout(kAdd, kAddRef, u, Randn({4}), {1, 3, 3});
}

TEST_P(OutputLayoutTest, CopiesPreserveOrMakeContiguous) {
  const Tensor xt = Randn({5, 7}).transpose(0, 1);
  EXPECT_EQ(xt.clone().strides(), Strides({1, 7}));
  EXPECT_EQ(xt.to(DType::kFloat16).strides(), Strides({1, 7}));
  EXPECT_EQ(xt.contiguous().strides(), Strides({5, 1}));
  EXPECT_EQ(xt.clone(MemoryFormat::kContiguous).strides(), Strides({5, 1}));
  EXPECT_EQ(xt.slice(0, 0, 3).clone().strides(), Strides({1, 3}));  // infer_dense_strides
  const std::vector<float> want = xt.to_vector();
  EXPECT_EQ(xt.clone().to_vector(), want);
  EXPECT_EQ(xt.contiguous().to_vector(), want);
  // An in-place op writes through the transposed result's strides.
  const Tensor y = exp(xt);
  y.add_(1.0);
  EXPECT_EQ(y.strides(), Strides({1, 7}));
  const std::vector<float> yv = y.to_vector();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(yv[i], std::exp(want[i]) + 1, 1e-5 * (2 + std::exp(want[i])));
  // A reshape of a transposed result copies to row-major first.
  EXPECT_EQ(exp(xt).reshape({35}).to_vector(), exp(xt.contiguous()).reshape({35}).to_vector());
}

// Reductions and PyTorch's composite ops with contiguous kernels (softmax,
// layer_norm) give contiguous results on transposed inputs; a compiled graph
// mixing both layouts gives eager's strides and values.
TEST_P(OutputLayoutTest, ReductionsAndCompositesOnTransposedResults) {
  const Tensor x = Randn({9, 6});
  const auto fn = [](const Tensor& a) {
    const Tensor y = exp(a.transpose(0, 1));  // [6, 9], transposed
    return std::make_tuple(y * 2.0, sum(y, 1), softmax(y, -1), y.transpose(0, 1) + 1.0);
  };
  const auto eager = fn(x);
  auto compiled = compile(fn);
  const auto got = compiled(x);
  EXPECT_EQ(std::get<0>(got).strides(), Strides({1, 6}));
  EXPECT_EQ(std::get<1>(got).strides(), Strides({1}));
  EXPECT_EQ(std::get<2>(got).strides(), Strides({9, 1}));
  EXPECT_EQ(std::get<3>(got).strides(), Strides({6, 1}));  // y.transpose(0, 1) is row-major again
  const std::vector<double> xv = x.to_double_vector();
  std::vector<double> y(54), rows(6, 0), exp_rows(6, 0);
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t j = 0; j < 9; ++j) {
      rows[i] += (y[i * 9 + j] = std::exp(xv[j * 6 + i]));
      exp_rows[i] += std::exp(y[i * 9 + j]);
    }
  }
  const std::vector<float> doubled = std::get<0>(got).to_vector(), summed = std::get<1>(got).to_vector(),
                           soft = std::get<2>(got).to_vector();
  for (int64_t k = 0; k < 54; ++k) {
    EXPECT_NEAR(doubled[k], 2 * y[k], 1e-5 * (1 + 2 * y[k]));
    EXPECT_NEAR(soft[k], std::exp(y[k]) / exp_rows[k / 9], 1e-5);
  }
  for (int64_t i = 0; i < 6; ++i) EXPECT_NEAR(summed[i], rows[i], 1e-4 * rows[i]);
  EXPECT_EQ(std::get<0>(eager).strides(), std::get<0>(got).strides());
  EXPECT_EQ(std::get<2>(eager).strides(), std::get<2>(got).strides());
  EXPECT_EQ(std::get<3>(eager).to_vector(), std::get<3>(got).to_vector());
}

// The layout lives in the result's view, not in the graph: a square input
// transposed runs the contiguous input's plan and still gets its own strides.
TEST_P(OutputLayoutTest, SameGraphForBothLayoutsOfASquare) {
  auto compiled = compile([](const Tensor& a) { return exp(a) * 3.0; });
  const Tensor c = Randn({6, 6}), t = Randn({6, 6}).transpose(0, 1);
  EXPECT_EQ(compiled(c).strides(), Strides({6, 1}));
  const Tensor r = compiled(t);
  EXPECT_EQ(r.strides(), Strides({1, 6}));
  EXPECT_EQ(compiled.stats().repeated_graphs, 1);  // the first call's graph and plan
  const std::vector<double> tv = t.to_double_vector();
  const std::vector<float> rv = r.to_vector();
  for (size_t i = 0; i < tv.size(); ++i) EXPECT_NEAR(rv[i], 3 * std::exp(tv[i]), 1e-5 * (1 + 3 * std::exp(tv[i])));
}

// Replayed calls rebuild the result's view, and run-time sizes keep it too.
TEST_P(OutputLayoutTest, ReplayAndDynamicShapesKeepTheLayout) {
  for (const CompileOptions& options : {CompileOptions{.replay = true}, CompileOptions{.dynamic = true}}) {
    auto compiled = compile([](const Tensor& a) { return ManualGelu(a); }, options);
    for (int64_t rows : {17, 17, 17, 29}) {
      const Tensor x = Randn({rows, 13}).transpose(0, 1);
      const Tensor y = compiled(x);
      EXPECT_EQ(y.strides(), Strides({1, 13}));
      const std::vector<double> xv = x.to_double_vector();
      const std::vector<float> yv = y.to_vector();
      for (size_t i = 0; i < xv.size(); ++i) ASSERT_NEAR(yv[i], GeluRef(xv[i]), 1e-5 * (1 + std::fabs(xv[i])));
    }
    if (options.replay) EXPECT_GT(compiled.stats().replays, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, OutputLayoutTest, ::testing::Values(false, true), test_util::OnEachDevice::Name);

}  // namespace
}  // namespace fusebox
