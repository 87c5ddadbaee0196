// The small ops model code needs (issue 24): Tensor::t(), arange(start, end,
// step), clamp, masked_fill, tril / triu and synchronize(), eager and
// compiled, against references computed here in float64, on the CPU and
// (skipping without a device) on CUDA.
#include <cmath>
#include <string>
#include <vector>

#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using test_util::AllClose;
using test_util::ErrorOf;
using test_util::Expected;
using test_util::RandomTensor;
using test_util::RoundTo;
using ::testing::HasSubstr;

constexpr DType kF32 = DType::kFloat32, kBF16 = DType::kBFloat16, kI32 = DType::kInt32, kI64 = DType::kInt64,
                kBool = DType::kBool;

// `f(x)` element by element over x's values, rounded to `dtype`.
template <typename F>
Expected Map(const Tensor& x, DType dtype, F f) {
  Expected e{.shape = x.shape(), .dtype = dtype};
  const std::vector<double> v = x.to_double_vector();
  for (size_t i = 0; i < v.size(); ++i) e.values.push_back(RoundTo(dtype, f(v[i], static_cast<int64_t>(i))));
  return e;
}

// The triangle reference: element (.., i, j) kept where j - i <= d (lower) or >= d (upper).
Expected TriangleRef(const Tensor& x, int64_t d, bool lower) {
  const int64_t rows = x.shape()[x.dim() - 2], cols = x.shape()[x.dim() - 1];
  return Map(x, x.dtype(), [&](double v, int64_t flat) {
    const int64_t j = flat % cols, i = (flat / cols) % rows;
    const bool keep = lower ? j - i <= d : j - i >= d;
    return keep ? v : 0.0;
  });
}

class ModelOpsTest : public test_util::OnEachDevice {};

TEST_P(ModelOpsTest, TransposeOfAMatrixIsAViewAndSmallerRanksComeBack) {
  const Tensor w = RandomTensor({5, 3}, kF32, test_util::Domain::kAny, device());
  const Tensor wt = w.t();
  EXPECT_EQ(wt.shape(), (Shape{3, 5}));
  EXPECT_EQ(wt.strides(), (Strides{1, 3}));
  const std::vector<double> a = w.to_double_vector(), b = wt.to_double_vector();
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(a[i * 3 + j], b[j * 5 + i]);
  }
  // The README's spelling: x @ w.t(), compiled, against float64.
  const Tensor x = RandomTensor({4, 3}, kF32, test_util::Domain::kAny, device());
  const Tensor y = compile([](const Tensor& p, const Tensor& q) { return matmul(p, q.t()); })(x, w);
  Expected want{.shape = {4, 5}, .dtype = kF32};
  const std::vector<double> xv = x.to_double_vector();
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 5; ++j) {
      double s = 0;
      for (int k = 0; k < 3; ++k) s += xv[i * 3 + k] * a[j * 3 + k];
      want.values.push_back(s);
    }
  }
  EXPECT_TRUE(AllClose(y, want, "x @ w.t()"));
  const Tensor v = RandomTensor({7}, kF32, test_util::Domain::kAny, device());
  EXPECT_EQ(v.t().shape(), (Shape{7}));
  EXPECT_EQ(full({}, 2.0, device()).t().shape(), (Shape{}));
  EXPECT_THAT(ErrorOf([&] { (void)RandomTensor({2, 3, 4}, kF32).t(); }), HasSubstr("t: expects a tensor with <= 2 dims"));
}

TEST_P(ModelOpsTest, ArangeWithStartEndAndStep) {
  struct Case {
    int64_t start, end, step;
    std::vector<double> want;
  };
  const std::vector<Case> cases = {
      {2, 7, 1, {2, 3, 4, 5, 6}}, {0, 10, 3, {0, 3, 6, 9}}, {5, -4, -3, {5, 2, -1}},
      {-3, 3, 2, {-3, -1, 1}},    {4, 4, 1, {}},            {10, 0, -4, {10, 6, 2}},
  };
  for (const Case& c : cases) {
    for (DType dtype : {kI64, kI32, kF32}) {
      const Tensor t = arange(c.start, c.end, c.step, device(), dtype);
      SCOPED_TRACE(testing::Message() << c.start << ", " << c.end << ", " << c.step << " " << DTypeName(dtype));
      EXPECT_EQ(t.dtype(), dtype);
      EXPECT_EQ(t.device(), device());
      EXPECT_EQ(t.to_double_vector(), c.want);
    }
  }
  EXPECT_EQ(arange(0, 5).dtype(), kI64);  // two ints: start and end, int64 as PyTorch
  EXPECT_EQ(arange(0, 5).numel(), 5);
  EXPECT_THAT(ErrorOf([&] { (void)arange(0, 5, 0, device()); }), HasSubstr("step must be nonzero"));
  EXPECT_THAT(ErrorOf([&] { (void)arange(5, 0, 1, device()); }), HasSubstr("inconsistent with step sign"));
}

TEST_P(ModelOpsTest, ClampPromotesAsAnAddAndKeepsNaN) {
  for (DType dtype : {kF32, kBF16, kI32}) {
    const Tensor x = RandomTensor({33, 17}, dtype, test_util::Domain::kAny, device());
    SCOPED_TRACE(DTypeName(dtype));
    const Expected want = Map(x, dtype, [](double v, int64_t) { return std::min(std::max(v, -1.0), 2.0); });
    EXPECT_TRUE(AllClose(clamp(x, -1, 2), want, "clamp eager"));
    auto f = compile([](const Tensor& t) { return clamp(neg(neg(t)), -1, 2); });
    EXPECT_TRUE(AllClose(f(x), want, "clamp compiled"));
    EXPECT_EQ(f.kernels().size(), 1u);
  }
  // An int tensor with a float bound promotes to float, as x + 0.5 does.
  const Tensor i = RandomTensor({9}, kI32, test_util::Domain::kAny, device());
  EXPECT_EQ(clamp(i, 0.5, 3).dtype(), kF32);
  // Whole bounds past int32's range promote as a float bound does, clamping exactly.
  const Tensor wide = clamp(i, -1e10, 1e10);
  EXPECT_EQ(wide.dtype(), kF32);
  EXPECT_EQ(wide.to_double_vector(), i.to_double_vector());
  // NaN stays NaN; min > max gives max.
  const Tensor s = Tensor::from_vector(std::vector<double>{NAN, -5, 0.25, 7}, {4}, kF32, device());
  const std::vector<double> got = clamp(s, -1, 2).to_double_vector();
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_EQ(std::vector<double>(got.begin() + 1, got.end()), (std::vector<double>{-1, 0.25, 2}));
  EXPECT_EQ(clamp(s.narrow(0, 1, 3), 3, 1).to_double_vector(), (std::vector<double>{1, 1, 1}));
}

TEST_P(ModelOpsTest, MaskedFillBroadcastsTheMaskAndKeepsTheDType) {
  for (DType dtype : {kF32, kBF16, kI64, kBool}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor x = RandomTensor({2, 5, 7}, dtype, test_util::Domain::kAny, device());
    const Tensor mask = RandomTensor({5, 1}, kBool, test_util::Domain::kAny, device()).expand({5, 7});
    const std::vector<double> m = mask.contiguous().to_double_vector();
    const double value = dtype == kBool ? 1 : -3;
    const Expected want =
        Map(x, dtype, [&](double v, int64_t flat) { return m[flat % 35] != 0 ? value : v; });
    EXPECT_TRUE(AllClose(masked_fill(x, mask, value), want, "masked_fill eager"));
    auto f = compile([&](const Tensor& t, const Tensor& k) { return masked_fill(t, k, value); });
    EXPECT_TRUE(AllClose(f(x, mask), want, "masked_fill compiled"));
  }
  // The attention idiom: -inf above the diagonal, then softmax: one value per
  // row survives in row 0.
  const Tensor scores = RandomTensor({4, 4}, kF32, test_util::Domain::kAny, device());
  const Tensor causal = triu(ones({4, 4}, device(), kBool), 1);
  const Tensor p = compile([&](const Tensor& s) { return softmax(masked_fill(s, causal, -INFINITY), -1); })(scores);
  const std::vector<double> pv = p.to_double_vector();
  EXPECT_NEAR(pv[0], 1.0, 1e-6);
  for (int j = 1; j < 4; ++j) EXPECT_EQ(pv[j], 0.0);
  const Tensor x = RandomTensor({3, 4}, kF32, test_util::Domain::kAny, device());
  EXPECT_THAT(ErrorOf([&] { (void)masked_fill(x, x * 0, 1.0); }), HasSubstr("only supports boolean masks"));
  // An integer x takes no value it cannot hold (PyTorch's overflow error).
  const Tensor n = RandomTensor({3, 4}, kI32, test_util::Domain::kAny, device());
  const Tensor all = ones({3, 4}, device(), kBool);
  EXPECT_THAT(ErrorOf([&] { (void)masked_fill(n, all, -INFINITY); }), HasSubstr("cannot be converted to int32"));
  EXPECT_THAT(ErrorOf([&] { (void)masked_fill(n, all, 1e10); }), HasSubstr("without overflow"));
  EXPECT_THAT(ErrorOf([&] { (void)masked_fill(x, ones({2, 3, 4}, device(), kBool), 1.0); }),
              HasSubstr("does not broadcast to x's shape"));
}

TEST_P(ModelOpsTest, TrilAndTriuOverTheLastTwoDims) {
  for (const Shape& shape : std::vector<Shape>{{5, 5}, {3, 7}, {7, 3}, {2, 3, 4, 5}, {1, 1}, {0, 4}}) {
    for (int64_t d : {0, 1, -3, 9}) {
      SCOPED_TRACE(testing::Message() << ShapeToString(shape) << " diagonal " << d);
      const Tensor x = RandomTensor(shape, kF32, test_util::Domain::kAny, device());
      EXPECT_TRUE(AllClose(tril(x, d), TriangleRef(x, d, true), "tril eager"));
      EXPECT_TRUE(AllClose(triu(x, d), TriangleRef(x, d, false), "triu eager"));
      auto f = compile([d](const Tensor& t) { return tril(t, d) + triu(t, d + 1); });
      Expected sum = TriangleRef(x, d, true);
      const Expected upper = TriangleRef(x, d + 1, false);
      for (size_t i = 0; i < sum.values.size(); ++i) sum.values[i] += upper.values[i];
      EXPECT_TRUE(AllClose(f(x), sum, "tril + triu compiled"));
      EXPECT_EQ(f.kernels().size(), 1u) << f.explain();
    }
  }
  // Integer and bool inputs keep their dtype; a transposed view reads through.
  const Tensor i = RandomTensor({6, 4}, kI64, test_util::Domain::kAny, device());
  EXPECT_TRUE(AllClose(tril(i), TriangleRef(i, 0, true), "tril int64"));
  const Tensor b = ones({4, 4}, device(), kBool);
  EXPECT_TRUE(AllClose(triu(b, 1), TriangleRef(b, 1, false), "triu bool"));
  const Tensor tv = RandomTensor({5, 6}, kBF16, test_util::Domain::kAny, device()).t();
  EXPECT_TRUE(AllClose(tril(tv, -1), TriangleRef(tv.contiguous(), -1, true), "tril of a transposed bf16 view"));
  EXPECT_THAT(ErrorOf([&] { (void)tril(RandomTensor({4}, kF32)); }), HasSubstr("at least 2 dimensions"));
}

TEST_P(ModelOpsTest, SynchronizeWaitsForQueuedWork) {
  const Tensor x = RandomTensor({1 << 16}, kF32, test_util::Domain::kAny, device());
  const Tensor y = exp(x) * 2.0;
  synchronize(device());
  synchronize();  // the default device
  const std::vector<double> xv = x.to_double_vector(), yv = y.to_double_vector();
  for (size_t k = 0; k < xv.size(); k += 997) EXPECT_NEAR(yv[k], 2 * std::exp(xv[k]), 1e-5 * 2 * std::exp(xv[k]));
}

// The norm modules: their parameters' initial values, then forward with
// random parameters (assigned to the public members) against float64.
TEST_P(ModelOpsTest, LayerNormAndRMSNormModules) {
  const int64_t dim = 37;
  nn::LayerNorm ln(dim, 1e-5, device());
  EXPECT_EQ(ln.weight.to_double_vector(), std::vector<double>(dim, 1.0));
  EXPECT_EQ(ln.bias.to_double_vector(), std::vector<double>(dim, 0.0));
  EXPECT_FALSE(nn::LayerNorm(dim, 1e-5, device(), kF32, /*bias=*/false).bias.defined());
  nn::RMSNorm rms(dim, 1e-6, device(), kBF16);
  EXPECT_EQ(rms.weight.dtype(), kBF16);
  for (DType dtype : {kF32, kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor x = RandomTensor({2, 3, dim}, dtype, test_util::Domain::kAny, device());
    ln.weight = RandomTensor({dim}, dtype, test_util::Domain::kAny, device());
    ln.bias = RandomTensor({dim}, dtype, test_util::Domain::kAny, device());
    rms.weight = ln.weight;
    const std::vector<double> xv = x.to_double_vector(), w = ln.weight.to_double_vector(),
                              b = ln.bias.to_double_vector();
    Expected want_ln{.shape = x.shape(), .dtype = dtype}, want_rms{.shape = x.shape(), .dtype = dtype};
    for (int64_t r = 0; r < 6; ++r) {
      double mean = 0, sq = 0, var = 0;
      for (int64_t j = 0; j < dim; ++j) mean += xv[r * dim + j] / dim, sq += xv[r * dim + j] * xv[r * dim + j] / dim;
      for (int64_t j = 0; j < dim; ++j) var += (xv[r * dim + j] - mean) * (xv[r * dim + j] - mean) / dim;
      for (int64_t j = 0; j < dim; ++j) {
        const double v = xv[r * dim + j];
        want_ln.values.push_back(RoundTo(dtype, (v - mean) / std::sqrt(var + 1e-5) * w[j] + b[j]));
        want_rms.values.push_back(RoundTo(dtype, v / std::sqrt(sq + 1e-6) * w[j]));
      }
    }
    EXPECT_TRUE(AllClose(ln(x), want_ln, "nn::LayerNorm eager"));
    EXPECT_TRUE(AllClose(rms(x), want_rms, "nn::RMSNorm eager"));
    auto f = compile([&](const Tensor& t) { return ln(t); });
    EXPECT_TRUE(AllClose(f(x), want_ln, "nn::LayerNorm compiled"));
    auto g = compile([&](const Tensor& t) { return rms(t); });
    EXPECT_TRUE(AllClose(g(x), want_rms, "nn::RMSNorm compiled"));
  }
  EXPECT_THAT(ErrorOf([&] { nn::LayerNorm(0); }), HasSubstr("dim must be positive"));
}

INSTANTIATE_TEST_SUITE_P(Devices, ModelOpsTest, ::testing::Values(false, true), test_util::OnEachDevice::Name);

}  // namespace
}  // namespace fusebox
