// Regression tests for issue 22's defects: inputs that gave wrong results,
// crashed the process or corrupted memory. Each test is named after what it
// guards; each failed (wrong value, crash or missing error) before its fix.
#include <cmath>
#include <cstdint>
#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace fusebox {
namespace {

using ::testing::HasSubstr;
using test_util::RandomTensor;

// got == want elementwise within an allclose tolerance for `dtype`.
void ExpectValues(const Tensor& got, const std::vector<double>& want, DType dtype, const std::string& what) {
  const double tol = dtype == DType::kBFloat16 ? 1e-2 : dtype == DType::kFloat16 ? 2e-3 : 1e-5;
  const std::vector<double> values = got.to_double_vector();
  ASSERT_EQ(values.size(), want.size()) << what;
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_EQ(values[i], want[i]) << what << " at " << i;
    } else {
      EXPECT_NEAR(values[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " at " << i;
    }
  }
}

std::vector<double> Minus(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_double_vector(), y = b.to_double_vector(), out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] - y[i];
  return out;
}

// Runs `f` and expects a fusebox::Error whose message has every fragment.
template <typename F>
void ExpectError(F f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "no fusebox::Error (expected one mentioning " << fragments.front() << ")";
  } catch (const Error& e) {
    for (const std::string& part : fragments) EXPECT_THAT(e.what(), HasSubstr(part));
  }
}

// ------------------------------------------------------------- replay (3)

auto Difference() {
  return compile([](const Tensor& a, const Tensor& b) { return a - b; }, CompileOptions{.replay = true});
}

TEST(ReplayAliasGuard, ArgumentsPassedTwiceDoNotReplayForDistinctOnes) {
  auto f = Difference();
  const Tensor x = RandomTensor({4, 8}, DType::kFloat32), y = RandomTensor({4, 8}, DType::kFloat32);
  for (int i = 0; i < 3; ++i) ExpectValues(f(x, x), Minus(x, x), DType::kFloat32, "f(x, x)");
  EXPECT_GE(f.stats().replays, 1);  // aliased calls still replay among themselves
  ExpectValues(f(x, y), Minus(x, y), DType::kFloat32, "f(x, y) after f(x, x) replayed");
  ExpectValues(f(y, x), Minus(y, x), DType::kFloat32, "f(y, x)");
}

TEST(ReplayAliasGuard, TwoViewsOfOneBufferThenIndependentTensors) {
  auto f = Difference();
  const Tensor buf = RandomTensor({32}, DType::kFloat32);
  const Tensor a = buf.narrow(0, 0, 16), b = buf.narrow(0, 16, 16);
  for (int i = 0; i < 3; ++i) ExpectValues(f(a, b), Minus(a, b), DType::kFloat32, "views of one buffer");
  EXPECT_GE(f.stats().replays, 1);
  // Replayed through argument 0's storage at offset 16, these read past p.
  const Tensor p = RandomTensor({16}, DType::kFloat32), q = RandomTensor({16}, DType::kFloat32);
  ExpectValues(f(p, q), Minus(p, q), DType::kFloat32, "independent tensors");
  // The same buffer at another offset is another call too.
  const Tensor c = buf.narrow(0, 8, 16);
  ExpectValues(f(a, c), Minus(a, c), DType::kFloat32, "views 8 apart");
}

TEST(ReplayGlobals, InPlaceChangesAreSeenAndResetSeesARebinding) {
  Tensor w = RandomTensor({8}, DType::kFloat32);
  auto f = compile([&w](const Tensor& x) { return x * w; }, CompileOptions{.replay = true});
  const Tensor x = RandomTensor({8}, DType::kFloat32);
  auto product = [&] {
    std::vector<double> a = x.to_double_vector(), b = w.to_double_vector();
    for (size_t i = 0; i < a.size(); ++i) a[i] *= b[i];
    return a;
  };
  for (int i = 0; i < 3; ++i) f(x);
  ASSERT_GE(f.stats().replays, 1);
  w.copy_(RandomTensor({8}, DType::kFloat32));
  ExpectValues(f(x), product(), DType::kFloat32, "after w.copy_()");
  w = full({8}, 3.0);  // a rebinding: the next call traces (replay_params_test), and reset_replays() forgets
  f.reset_replays();
  ExpectValues(f(x), product(), DType::kFloat32, "after w = full(...) and reset_replays()");
  EXPECT_THAT(f.explain(), HasSubstr("replay"));
}

// ------------------------------------------------------ size overflow (4)

TEST(SizeOverflow, CreationChecksElementAndByteCounts) {
  ExpectError([] { zeros({int64_t{1} << 62}); }, {"zeros", "overflows"});
  ExpectError([] { randn({int64_t{1} << 31, int64_t{1} << 31}); }, {"randn", "overflows"});
  ExpectError([] { zeros({int64_t{1} << 22, int64_t{1} << 21, int64_t{1} << 21}); }, {"zeros", "overflows"});
  ExpectError([] { Tensor::empty({(int64_t{1} << 62) + 1}, DType::kFloat32, Device::cpu()); }, {"empty"});
  // An empty tensor whose other dims' extent overflows: contiguous strides would wrap.
  ExpectError([] { zeros({0, int64_t{1} << 40, int64_t{1} << 40}); }, {"zeros", "overflows"});
  ExpectError([] { full({-3}, 1.0); }, {"full", "invalid shape"});
}

TEST(SizeOverflow, ViewsRejectWrappingSizes) {
  const Tensor x = RandomTensor({2, 3}, DType::kFloat32);
  ExpectError([&] { x.narrow(1, 1, std::numeric_limits<int64_t>::max()); }, {"narrow", "out of range"});
  ExpectError([&] { x.narrow(1, std::numeric_limits<int64_t>::max(), 1); }, {"narrow"});
  // (2^62 + 4) * 4 wraps to 16 in int64 arithmetic.
  const Tensor y = RandomTensor({16}, DType::kFloat32);
  ExpectError([&] { y.reshape({(int64_t{1} << 62) + 4, 4}); }, {"reshape"});
  ExpectError([&] { zeros({0}).reshape({int64_t{1} << 62, 4}); }, {"reshape", "overflows"});
  ExpectError([&] { y.view({-1, int64_t{1} << 62, 8}); }, {"overflows"});
  const Tensor row = RandomTensor({1, 3}, DType::kFloat32);
  ExpectError([&] { row.expand({-5, 3}); }, {"expand", "-5"});
  ExpectError([&] { row.expand({int64_t{1} << 62, int64_t{1} << 62, 3}); }, {"expand", "overflows"});
}

TEST(SizeOverflow, BroadcastAndMatmulResultsAreChecked) {
  const Tensor tall = zeros({1, 1}).expand({int64_t{1} << 40, 1});
  const Tensor wide = zeros({1, 1}).expand({1, int64_t{1} << 40});
  ExpectError([&] { tall + wide; }, {"add", "overflows"});
  const Tensor a = zeros({1, 1}).expand({int64_t{1} << 40, 1}), b = zeros({1, 1}).expand({1, int64_t{1} << 40});
  ExpectError([&] { matmul(a, b); }, {"matmul", "overflows"});
}

// ------------------------------------------------------------- 0-d tensors (5)

TEST(ZeroDimTensor, DimensionQueriesAndViewsBehaveAsPyTorch) {
  const Tensor s = RandomTensor({}, DType::kFloat32);
  const double v = s.item();
  ExpectError([&] { s.size(0); }, {"size", "0-d"});
  ExpectError([&] { s.narrow(0, 0, 1); }, {"narrow", "0-d"});
  for (const Tensor& same : {s.squeeze(0), s.squeeze(-1), s.transpose(0, 0), s.transpose(-1, 0)}) {
    EXPECT_EQ(same.dim(), 0);
    EXPECT_EQ(same.item(), v);
  }
  for (const Tensor& one : {s.reshape({1}), s.view({1}), s.flatten(), s.unsqueeze(0)}) {
    ASSERT_EQ(one.shape(), Shape({1}));
    EXPECT_EQ(one.item(), v);
  }
  EXPECT_EQ(s.view({1, 1, 1}).shape(), Shape({1, 1, 1}));
  EXPECT_EQ(s.reshape({1}).reshape({}).dim(), 0);
  EXPECT_EQ(s.reshape({-1}).shape(), Shape({1}));
}

TEST(ZeroDimTensor, ReshapeOfAFullReductionCompiles) {
  auto f = compile([](const Tensor& x) { return sum(x).reshape({1, 1}); });
  const Tensor x = RandomTensor({5, 7}, DType::kFloat32);
  double want = 0;
  for (double e : x.to_double_vector()) want += e;
  const Tensor got = f(x);
  ASSERT_EQ(got.shape(), Shape({1, 1}));
  ExpectValues(got, {want}, DType::kFloat32, "sum(x).reshape({1, 1})");
}

// ----------------------------------------------------- zero-size dims (6)

TEST(ZeroSizeDims, PointwiseOnEmptyTensorsEagerAndCompiled) {
  EXPECT_EQ((zeros({2, 0, 3}) * zeros({3})).shape(), Shape({2, 0, 3}));
  EXPECT_EQ(exp(zeros({2, 0, 3}).transpose(0, 2)).shape(), Shape({3, 0, 2}));
  auto relu_fn = compile([](const Tensor& x) { return relu(x); });
  EXPECT_EQ(relu_fn(zeros({4, 0})).shape(), Shape({4, 0}));
  EXPECT_EQ(relu_fn(zeros({5, 0})).shape(), Shape({5, 0}));
  auto add = compile([](const Tensor& a, const Tensor& b) { return a + b; }, CompileOptions{.dynamic = true});
  EXPECT_EQ(add(zeros({4, 0}), zeros({4, 0})).shape(), Shape({4, 0}));
  EXPECT_EQ(add(zeros({1, 0}), zeros({1, 0})).shape(), Shape({1, 0}));
  // Reductions over non-empty dims of an empty tensor, and over an empty dim.
  EXPECT_EQ(sum(zeros({0, 3}), 1).shape(), Shape({0}));
  ExpectValues(sum(zeros({0, 3}), 0), {0, 0, 0}, DType::kFloat32, "sum over an empty dim");
  ExpectValues(prod(zeros({3, 0}), 1), {1, 1, 1}, DType::kFloat32, "prod over an empty dim");
}

TEST(ZeroSizeDims, NormalizationsOverAnEmptyDimReturnEmptyOrMinusInfinity) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    const Tensor x = zeros({3, 0}, Device::cpu(), dtype);
    EXPECT_EQ(softmax(x, 1).shape(), Shape({3, 0}));
    EXPECT_EQ(softmax(x, 1).dtype(), dtype);
    EXPECT_EQ(log_softmax(x, -1).shape(), Shape({3, 0}));
    const Tensor lse = logsumexp(x, {1});
    ASSERT_EQ(lse.shape(), Shape({3}));
    EXPECT_EQ(lse.dtype(), dtype);
    ExpectValues(lse, {-INFINITY, -INFINITY, -INFINITY}, dtype, "logsumexp over an empty dim");
    EXPECT_EQ(logsumexp(x, {1}, /*keepdim=*/true).shape(), Shape({3, 1}));
    auto f = compile([](const Tensor& t) { return softmax(t, 1) + 1.0; });
    EXPECT_EQ(f(x).shape(), Shape({3, 0}));
  }
}

TEST(SizeOneReduction, FusedWithAConsumerOfAnotherTensor) {
  auto f = compile([](const Tensor& a, const Tensor& b) { return sum(a, 0) + b; });
  const Tensor a = RandomTensor({1, 33}, DType::kFloat32), b = RandomTensor({33}, DType::kFloat32);
  std::vector<double> want = a.to_double_vector(), bv = b.to_double_vector();
  for (size_t i = 0; i < want.size(); ++i) want[i] += bv[i];
  ExpectValues(f(a, b), want, DType::kFloat32, "sum(a, 0) + b");
  auto g = compile([](const Tensor& x, const Tensor& s) { return sum(x) + s; });
  const Tensor x = RandomTensor({1}, DType::kFloat32), s = RandomTensor({}, DType::kFloat32);
  ExpectValues(g(x, s), {x.item() + s.item()}, DType::kFloat32, "sum(x) + s");
}

// A 0-d tensor does not widen a tensor with dims of its own kind.
TEST(TypePromotion, ZeroDimTensorsWidenOnlyAcrossKinds) {
  struct Case {
    DType dims, zero_dim, result;
  };
  for (const Case& c : std::vector<Case>{{DType::kBFloat16, DType::kFloat32, DType::kBFloat16},
                                         {DType::kFloat16, DType::kFloat32, DType::kFloat16},
                                         {DType::kInt32, DType::kInt64, DType::kInt32},
                                         {DType::kInt32, DType::kFloat32, DType::kFloat32},
                                         {DType::kBool, DType::kInt64, DType::kInt64},
                                         {DType::kFloat32, DType::kFloat16, DType::kFloat32}}) {
    const Tensor a = RandomTensor({4}, c.dims, test_util::Domain::kCoarse);
    const Tensor b = RandomTensor({}, c.zero_dim, test_util::Domain::kCoarse);
    const std::string what = absl::StrCat(DTypeName(c.dims), "[4] * ", DTypeName(c.zero_dim), "[]");
    if (c.dims != DType::kBool) {
      const Tensor got = a * b;
      EXPECT_EQ(got.dtype(), c.result) << what;
      std::vector<double> want = a.to_double_vector();
      for (double& e : want) e *= b.item();
      ExpectValues(got, want, c.result, what);
      EXPECT_EQ((b * a).dtype(), c.result) << "reversed " << what;
    } else {
      EXPECT_EQ((a + b).dtype(), c.result) << what;
    }
  }
  EXPECT_EQ((RandomTensor({}, DType::kFloat32) * RandomTensor({}, DType::kFloat16)).dtype(), DType::kFloat32);
  const Tensor h = RandomTensor({6}, DType::kFloat16);
  EXPECT_EQ((h - max(h.to(DType::kFloat32))).dtype(), DType::kFloat16);
  const Tensor c = gt(RandomTensor({6}, DType::kFloat32), 0.0);
  EXPECT_EQ(where(c, RandomTensor({6}, DType::kBFloat16), RandomTensor({}, DType::kFloat32)).dtype(),
            DType::kBFloat16);
  auto f = compile([](const Tensor& x, const Tensor& y) { return x * y; });
  EXPECT_EQ(f(RandomTensor({4}, DType::kBFloat16), RandomTensor({}, DType::kFloat32)).dtype(), DType::kBFloat16);
}

// ------------------------------------------- found by the fuzzer on the H200

TEST(MatmulBatchBroadcast, AZeroBatchStaysZero) {
  EXPECT_EQ(matmul(zeros({0, 0, 0}), zeros({1, 0, 0})).shape(), Shape({0, 0, 0}));
  EXPECT_EQ(matmul(RandomTensor({0, 2, 3}, DType::kFloat32), RandomTensor({1, 3, 4}, DType::kFloat32)).shape(),
            Shape({0, 2, 4}));
  EXPECT_EQ(matmul(RandomTensor({1, 2, 3}, DType::kFloat32), RandomTensor({0, 3, 4}, DType::kFloat32)).shape(),
            Shape({0, 2, 4}));
  ExpectError([] { matmul(zeros({2, 2, 3}), zeros({3, 3, 4})); }, {"matmul", "batch"});
}

// A broadcast operand (stride 0 over its rows) is copied before the GEMM:
// cuBLASLt rejected [33, 1] with strides [0, 1].
TEST(MatmulBroadcastOperand, IsCopiedFirst) {
  for (const Device& device : {Device::cpu(), Device::default_device()}) {
    const Tensor v = RandomTensor({1}, DType::kFloat32, test_util::Domain::kAny, device);
    const Tensor w = RandomTensor({1, 5}, DType::kFloat32, test_util::Domain::kAny, device);
    for (bool compiled : {false, true}) {
      auto mm = [](const Tensor& a, const Tensor& b) { return matmul(a.expand({33, 1}), b); };
      const Tensor got = compiled ? compile(mm)(v, w) : mm(v, w);
      ASSERT_EQ(got.shape(), Shape({33, 5})) << device.str();
      std::vector<double> want;
      const double s = v.item();
      for (int r = 0; r < 33; ++r) {
        for (double e : w.to_double_vector()) want.push_back(s * e);
      }
      ExpectValues(got, want, DType::kFloat32, absl::StrCat("matmul of an expanded column on ", device.str()));
    }
  }
}

TEST(ZeroDimTensor, SliceIsAnError) {
  ExpectError([] { RandomTensor({}, DType::kFloat32).slice(0, 0, 1); }, {"slice", "0-d"});
}

// mean and var of 16-bit floats compute in float32 and round once, as
// PyTorch. Values alternating between two neighbours of the 16-bit grid have
// their mean halfway between them: rounded to the grid, x - mean doubles.
TEST(SixteenBitStatistics, MeanAndVarRoundOnce) {
  std::mt19937 rng(std::random_device{}());
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    const double ulp = dtype == DType::kFloat16 ? 0x1p-7 : 0x1p-4;  // the spacing in [8, 16)
    const double base = 8 + ulp * std::uniform_int_distribution<int>(0, 8 / ulp - 2)(rng);
    std::vector<double> v(256);
    for (size_t i = 0; i < v.size(); ++i) v[i] = base + (i % 2) * ulp;
    std::shuffle(v.begin(), v.end(), rng);
    const Tensor x = Tensor::from_vector(v, {256}, dtype);
    double mean = 0, ss = 0;
    for (double e : v) mean += e;
    mean /= static_cast<double>(v.size());
    for (double e : v) ss += (e - mean) * (e - mean);
    const double var_want = ss / static_cast<double>(v.size() - 1);
    for (bool compiled : {false, true}) {
      auto stats = [](const Tensor& t) { return std::vector<Tensor>{fusebox::mean(t), var(t, {0}, 1, false)}; };
      const std::vector<Tensor> got = compiled ? compile(stats)(x) : stats(x);
      const std::string what = absl::StrCat(DTypeName(dtype), compiled ? " compiled" : " eager", " around ", base);
      EXPECT_NEAR(got[0].item(), mean, ulp) << what;  // one rounding of the exact mean
      EXPECT_NEAR(got[1].item(), var_want, 0.01 * var_want) << what;
    }
  }
}

// ------------------------------------------------------- where's condition (8)

TEST(WhereCondition, MustBeBool) {
  const Tensor a = RandomTensor({4}, DType::kFloat32), b = RandomTensor({4}, DType::kFloat32);
  ExpectError([&] { where(a, a, b); }, {"where", "bool", "float32"});
  ExpectError([&] { where(RandomTensor({4}, DType::kInt32), a, 0.0); }, {"where", "bool", "int32"});
  const Tensor picked = where(gt(a, 0.0), a, b);
  std::vector<double> x = a.to_double_vector(), y = b.to_double_vector(), want(4);
  for (size_t i = 0; i < 4; ++i) want[i] = x[i] > 0 ? x[i] : y[i];
  ExpectValues(picked, want, DType::kFloat32, "where(a > 0, a, b)");
}

}  // namespace
}  // namespace fusebox
