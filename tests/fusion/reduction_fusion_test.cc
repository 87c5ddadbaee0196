// What compile() makes of reductions: the seed's manual_softmax, log_softmax,
// a hand-written layer_norm and rms_norm, column softmax and sum(x * x) each
// become ONE kernel with a deterministic name, with numbers matching float64;
// reductions over different rows get separate kernels, and explain() says why.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "frontend/fusebox.h"
#include "fusion/plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

TEST(ReductionFusionTest, ManualSoftmaxIsOneKernel) {
  // Rows up to kPersistentRowLimit elements stay on chip (per_); longer ones
  // are looped (red_). Rows of one element reduce nothing: the max and the
  // sum are the element itself (a copy), so the kernel is pointwise.
  for (int64_t cols : {int64_t{1}, int64_t{33}, int64_t{1025}, fusion::kPersistentRowLimit + 1}) {
    Tensor x = randn({5, cols}, Device::cpu(), FreshSeed());
    auto compiled = compile(ManualSoftmax);
    Tensor y = compiled(x);
    EXPECT_THAT(Names(compiled.kernels()),
                ElementsAre(cols == 1                                ? "poi_fused_copy_div_exp_sub_0"
                            : cols <= fusion::kPersistentRowLimit ? "per_fused_div_exp_max_sub_sum_0"
                                                                     : "red_fused_div_exp_max_sub_sum_0"));
    ExpectClose(y.to_vector(), SoftmaxRef(x.to_double_vector(), 5, cols), 1e-6);
  }
  // Eager: max, sub, exp, sum, div = 5 kernels, same numbers.
  Tensor x = randn({4, 9}, Device::cpu(), FreshSeed());
  ExpectClose(ManualSoftmax(x).to_vector(), SoftmaxRef(x.to_double_vector(), 4, 9), 1e-6);
}

// Columns are not contiguous runs: one thread walks each column (red_).
TEST(ReductionFusionTest, ColumnSoftmaxIsOneKernel) {
  Tensor x = randn({37, 6}, Device::cpu(), FreshSeed());
  auto compiled = compile([](const Tensor& x) { return softmax(x, 0); });
  Tensor y = compiled(x);
  EXPECT_THAT(Names(compiled.kernels()), ElementsAre("red_fused_div_exp_max_sub_sum_0"));
  // Column softmax of x = row softmax of x^T, transposed back.
  std::vector<double> xt = x.transpose(0, 1).to_double_vector();
  std::vector<double> ref_t = SoftmaxRef(xt, 6, 37), ref(ref_t.size());
  for (int r = 0; r < 37; ++r)
    for (int c = 0; c < 6; ++c) ref[r * 6 + c] = ref_t[c * 37 + r];
  ExpectClose(y.to_vector(), ref, 1e-6);
}

TEST(ReductionFusionTest, LogSoftmaxIsOneKernel) {
  Tensor x = randn({3, 100}, Device::cpu(), FreshSeed());
  auto compiled = compile([](const Tensor& x) { return log_softmax(x, -1); });
  Tensor y = compiled(x);
  EXPECT_THAT(Names(compiled.kernels()), ElementsAre("per_fused_exp_log_max_sub_sum_0"));
  std::vector<double> ref = SoftmaxRef(x.to_double_vector(), 3, 100);
  for (double& v : ref) v = std::log(v);
  ExpectClose(y.to_vector(), ref, 1e-5);
}

TEST(ReductionFusionTest, HandWrittenLayerNormIsOneKernel) {
  const uint64_t seed = FreshSeed();
  Tensor x = randn({6, 257}, Device::cpu(), seed), w = randn({257}, Device::cpu(), seed + 1);
  Tensor b = randn({257}, Device::cpu(), seed + 2);
  auto compiled = compile([](const Tensor& x, const Tensor& w, const Tensor& b) {
    Tensor mu = sum(x, -1, true) / 257.0;
    Tensor centered = x - mu;
    Tensor var = sum(centered * centered, -1, true) / 257.0;
    return centered * rsqrt(var + 1e-5) * w + b;
  });
  Tensor y = compiled(x, w, b);
  EXPECT_THAT(Names(compiled.kernels()), ElementsAre("per_fused_add_div_mul_rsqrt_sub_sum_0"));
  auto xv = x.to_double_vector(), wv = w.to_double_vector(), bv = b.to_double_vector();
  std::vector<double> ref;
  for (int r = 0; r < 6; ++r) {
    double m = 0, v = 0;
    for (int c = 0; c < 257; ++c) m += xv[r * 257 + c] / 257;
    for (int c = 0; c < 257; ++c) v += (xv[r * 257 + c] - m) * (xv[r * 257 + c] - m) / 257;
    for (int c = 0; c < 257; ++c) ref.push_back((xv[r * 257 + c] - m) / std::sqrt(v + 1e-5) * wv[c] + bv[c]);
  }
  ExpectClose(y.to_vector(), ref, 1e-5);
  // The library's layer_norm is the same decomposition: one kernel too.
  auto library = compile([](const Tensor& x, const Tensor& w, const Tensor& b) { return layer_norm(x, {257}, w, b); });
  ExpectClose(library(x, w, b).to_vector(), ref, 1e-5);
  EXPECT_EQ(library.kernels().size(), 1u);
}

TEST(ReductionFusionTest, HandWrittenRmsNormIsOneKernel) {
  const uint64_t seed = FreshSeed();
  Tensor x = randn({4, 300}, Device::cpu(), seed), w = randn({300}, Device::cpu(), seed + 1);
  auto compiled = compile([](const Tensor& x, const Tensor& w) { return x * rsqrt(mean(x * x, -1, true) + 1e-6) * w; });
  Tensor y = compiled(x, w);
  EXPECT_THAT(Names(compiled.kernels()), ElementsAre("per_fused_add_div_mul_rsqrt_sum_0"));
  auto xv = x.to_double_vector(), wv = w.to_double_vector();
  std::vector<double> ref;
  for (int r = 0; r < 4; ++r) {
    double ms = 0;
    for (int c = 0; c < 300; ++c) ms += xv[r * 300 + c] * xv[r * 300 + c] / 300;
    for (int c = 0; c < 300; ++c) ref.push_back(xv[r * 300 + c] / std::sqrt(ms + 1e-6) * wv[c]);
  }
  ExpectClose(y.to_vector(), ref, 1e-5);
}

TEST(ReductionFusionTest, SumOfSquaresReadsXOnceInOneKernel) {
  Tensor x = randn({1000}, Device::cpu(), FreshSeed());
  auto compiled = compile([](const Tensor& x) { return sum(x * x); });
  Tensor s = compiled(x);
  EXPECT_THAT(Names(compiled.kernels()), ElementsAre("per_fused_mul_sum_0"));
  EXPECT_EQ(s.dim(), 0);
  double ref = 0;
  for (double v : x.to_double_vector()) ref += v * v;
  EXPECT_NEAR(s.item(), ref, 1e-4 * ref);
}

TEST(ReductionFusionTest, ReductionsOverDifferentRowsAreSeparateKernelsAndExplained) {
  // Positive entries keep the row sums (divisors) well away from zero.
  Tensor x = rand({8, 16}, Device::cpu(), FreshSeed()) + 0.5;
  auto compiled = compile([](const Tensor& x) {
    Tensor rows = sum(x, 1, true);   // [8, 1]
    return sum(x / rows, 0);         // a column sum of a value that needs every row sum
  });
  Tensor y = compiled(x);
  ASSERT_EQ(compiled.kernels().size(), 2u);
  EXPECT_THAT(compiled.explain(), HasSubstr("separate kernel"));
  auto xv = x.to_double_vector();
  std::vector<double> row(8, 0), ref(16, 0);
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 16; ++c) row[r] += xv[r * 16 + c];
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 16; ++c) ref[c] += xv[r * 16 + c] / row[r];
  ExpectClose(y.to_vector(), ref, 1e-5);
}

}  // namespace
}  // namespace fusebox

namespace fusebox {
namespace {

TEST(ReductionFusionTest, ArgmaxAndMaxShareOneKernelFirstIndexWinsNanIsMax) {
  // Ties (repeated values) and NaN: PyTorch returns the first maximum, and a NaN counts as the maximum.
  Tensor x = Tensor::from_vector({1, 5, 5, 2, -1, -3, -3, 0, NAN, 1, NAN, 9}, {3, 4});
  auto compiled = compile([](const Tensor& x) { return std::make_tuple(argmax(x, 1), max(x, 1), argmin(x, 1)); });
  auto [imax, vmax, imin] = compiled(x);
  EXPECT_THAT(Names(compiled.kernels()), ElementsAre("per_fused_argmax_argmin_max_0"));
  EXPECT_EQ(imax.dtype(), DType::kInt64);
  EXPECT_THAT(imax.to_vector(), ElementsAre(1, 3, 0));
  EXPECT_THAT(imin.to_vector(), ElementsAre(0, 1, 0));
  EXPECT_EQ(vmax.to_vector()[0], 5);
  EXPECT_TRUE(std::isnan(vmax.to_vector()[2]));
  // Columns, and the flat index without a dim, eager.
  EXPECT_THAT(argmax(x, 0).to_vector(), ElementsAre(2, 0, 2, 2));
  EXPECT_EQ(argmax(x.narrow(0, 0, 2)).item(), 1);
  // Random rows against a scan, across the per-row strategies.
  for (int64_t cols : {7, 300, 5000, 9000}) {
    Tensor r = randn({6, cols}, Device::cpu(), FreshSeed());
    auto rv = r.to_double_vector();
    auto got = compile([](const Tensor& r) { return argmax(r, -1); })(r).to_vector();
    for (int row = 0; row < 6; ++row) {
      int64_t best = 0;
      for (int64_t c = 1; c < cols; ++c) best = rv[row * cols + c] > rv[row * cols + best] ? c : best;
      EXPECT_EQ(got[row], best) << "row " << row << " of " << cols;
    }
  }
}

// A gather read by reductions over the innermost dims (fused into them) and
// by a reduction over dim 0 (which needs it stored first: fuse_kernels.cc
// StoreMoves): the gather's kernel runs before every kernel that loads it
// (order_kernels.h; the fuzzer found it stored after them).
TEST(ReductionFusionTest, AGatherStoredForALaterReductionRunsBeforeItsReaders) {
  Tensor x = randn({2, 8, 33}, Device::cpu(), FreshSeed());
  Tensor w = randn({8, 1}, Device::cpu(), FreshSeed()), b = randn({8, 1}, Device::cpu(), FreshSeed());
  auto fn = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    Tensor rows_max = gather(x, 2, argmax(x, 2, /*keepdim=*/true));  // [2, 8, 1]
    return sum(layer_norm(rows_max, {8, 1}, w, b, 1e-3), std::vector<int64_t>{0}, /*keepdim=*/true);
  };
  auto compiled = compile(fn);
  const std::vector<float> got = compiled(x, w, b).to_vector();
  const std::vector<double> xs = x.to_double_vector(), ws = w.to_double_vector(), bs = b.to_double_vector();
  std::vector<double> want(8, 0.0);
  for (int a = 0; a < 2; ++a) {
    std::vector<double> m(8);
    double mean = 0, var = 0;
    for (int r = 0; r < 8; ++r) {
      m[r] = -INFINITY;
      for (int k = 0; k < 33; ++k) m[r] = std::max(m[r], xs[(a * 8 + r) * 33 + k]);
      mean += m[r] / 8;
    }
    for (int r = 0; r < 8; ++r) var += (m[r] - mean) * (m[r] - mean) / 8;
    for (int r = 0; r < 8; ++r) want[r] += (m[r] - mean) / std::sqrt(var + 1e-3) * ws[r] + bs[r];
  }
  ExpectClose(got, want, 1e-4);
  // The argmax's kernel, then the gather's, then the reductions reading it.
  const std::vector<std::string> names = Names(compiled.kernels());
  ASSERT_GE(names.size(), 3u);
  EXPECT_THAT(names[0], HasSubstr("argmax"));
  EXPECT_THAT(names[1], HasSubstr("gather"));
}

}  // namespace
}  // namespace fusebox
