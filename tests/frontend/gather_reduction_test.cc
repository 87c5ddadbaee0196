// Reductions that evaluate data movement inline (fusion/fuse_kernels.cc
// MoveInline): a sum over an index_select, a softmax over a cat, the pieces
// of a cross-entropy (a mean over a gather of log_softmax), on rows short,
// warp-sized, block-sized, looped and split, f32 and bf16, against float64
// references, with their kernel counts; the cases that stay stored first
// and their explain() notes; bad indices read inside a reduction. The CUDA
// twins compile through NVRTC (tests/test_main.cc); the GPU run skips
// without a device.
#include <cmath>
#include <limits>
#include <vector>

#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/frontend/data_movement_refs.h"
#include "tests/test_util.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using namespace test_move;  // NOLINT: the references
using test_util::AllClose;
using test_util::ErrorOf;
using test_util::Expected;
using test_util::RandomTensor;
using test_util::RoundTo;
using ::testing::HasSubstr;

constexpr DType kF32 = DType::kFloat32, kBF16 = DType::kBFloat16, kI32 = DType::kInt32, kI64 = DType::kInt64;

// Softmax (or log_softmax) of each row of `x` ([rows, cols] values) in float64, rounded to `dtype`.
std::vector<double> RowSoftmax(const std::vector<double>& x, int64_t rows, int64_t cols, bool log, DType dtype) {
  std::vector<double> out;
  for (int64_t r = 0; r < rows; ++r) {
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, x[r * cols + c]);
    for (int64_t c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - m);
    for (int64_t c = 0; c < cols; ++c) {
      const double v = x[r * cols + c] - m;
      out.push_back(RoundTo(dtype, log ? v - std::log(s) : std::exp(v) / s));
    }
  }
  return out;
}

// sum(index_select(x, 0, idx) * 2, -1): one kernel, the index checked in it.
// Positive values: the sum is well conditioned, so the dtype's tolerance fits.
void CheckSumOfIndexSelect(Device device, DType dtype, int64_t rows, int64_t cols) {
  const Tensor x = RandomTensor({rows + 2, cols}, dtype, test_util::Domain::kPositive);
  const Tensor idx = RandomIndex({rows}, rows + 2, kI64);
  auto f = compile([](const Tensor& a, const Tensor& i) { return sum(index_select(a, 0, i) * 2, -1); });
  const Tensor y = f(x.to(device), idx.to(device));
  const Expected picked = IndexSelectRef(x, 0, idx);
  Expected want{.shape = {rows}, .dtype = dtype};
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += picked.values[r * cols + c] * 2;
    want.values.push_back(RoundTo(dtype, s));
  }
  const std::string what = absl::StrCat("sum(index_select(x, 0, idx) * 2, -1) ", DTypeName(dtype), " ", rows, "x", cols);
  EXPECT_TRUE(AllClose(y, want, what));
  ASSERT_EQ(f.kernels().size(), 1u) << what << "\n" << f.explain();
  EXPECT_THAT(f.kernels()[0].source, HasSubstr("fb_check_index("));
}

// softmax(cat({a, b}, -1), -1): one kernel, masked loads in every pass.
void CheckSoftmaxOfCat(Device device, DType dtype, int64_t rows, int64_t cols) {
  const Tensor a = RandomTensor({rows, cols}, dtype), b = RandomTensor({rows, 3}, dtype);
  auto f = compile([](const Tensor& p, const Tensor& q) { return softmax(cat({p, q}, -1), -1); });
  const Tensor y = f(a.to(device), b.to(device));
  const Expected joined = CatRef({a, b}, 1, dtype);
  const Expected want{.shape = {rows, cols + 3}, .dtype = dtype,
                      .values = RowSoftmax(joined.values, rows, cols + 3, /*log=*/false, dtype)};
  const std::string what = absl::StrCat("softmax(cat({a, b}, -1), -1) ", DTypeName(dtype), " ", rows, "x", cols + 3);
  EXPECT_TRUE(AllClose(y, want, what));
  EXPECT_EQ(f.kernels().size(), 1u) << what << "\n" << f.explain();
}

// mean(-gather(log_softmax(x, -1), 1, target), 0): the log_softmax's rows,
// then the mean with the gather inline (three kernels before).
void CheckCrossEntropy(Device device, DType dtype, int64_t rows, int64_t classes) {
  const Tensor x = RandomTensor({rows, classes}, dtype);
  const Tensor target = RandomIndex({rows, 1}, classes, kI64);
  auto f = compile([](const Tensor& logits, const Tensor& t) { return mean(neg(gather(log_softmax(logits, -1), 1, t)), 0); });
  const Tensor y = f(x.to(device), target.to(device));
  const std::vector<double> logp = RowSoftmax(x.to_double_vector(), rows, classes, /*log=*/true, dtype);
  const std::vector<double> t = target.to_double_vector();
  double s = 0;
  for (int64_t r = 0; r < rows; ++r) s -= logp[r * classes + static_cast<int64_t>(t[r])];
  const Expected want{.shape = {1}, .dtype = dtype, .values = {RoundTo(dtype, s / rows)}};
  const std::string what = absl::StrCat("cross-entropy ", DTypeName(dtype), " ", rows, "x", classes);
  EXPECT_TRUE(AllClose(y, want, what));
  EXPECT_EQ(f.kernels().size(), 2u) << what << "\n" << f.explain();
}

void CheckAll(Device device) {
  for (DType dtype : {kF32, kBF16}) {
    // Rows of a thread, a few lanes, a warp, a block, looped; few long rows split.
    for (int64_t cols : {5, 33, 1500, 20011}) {
      CheckSumOfIndexSelect(device, dtype, 7, cols);
      CheckSoftmaxOfCat(device, dtype, 6, cols);
    }
    CheckSumOfIndexSelect(device, dtype, 3, 70001);
    CheckCrossEntropy(device, dtype, 37, 11);
    CheckCrossEntropy(device, dtype, 5, 2049);
  }
}

TEST(GatherReductionTest, ReductionsEvaluateIndirectAndMaskedLoadsInline) { CheckAll(Device::cpu()); }

TEST(GatherReductionTest, EmbeddingsAndInt32IndicesInsideRowsAndRowStores) {
  // A row store reading a gather: sum(w, -1) joined by the embedding's row mean.
  const Tensor w = RandomTensor({10, 33}, kF32);
  const Tensor idx = RandomIndex({7}, 10, kI32);
  auto f = compile([](const Tensor& i, const Tensor& w) {
    const Tensor e = embedding(i, w);
    return e - mean(e, -1, /*keepdim=*/true);
  });
  const Expected rows = IndexSelectRef(w, 0, idx);
  Expected want{.shape = {7, 33}, .dtype = kF32};
  for (int64_t r = 0; r < 7; ++r) {
    double m = 0;
    for (int64_t c = 0; c < 33; ++c) m += rows.values[r * 33 + c] / 33;
    for (int64_t c = 0; c < 33; ++c) want.values.push_back(RoundTo(kF32, rows.values[r * 33 + c] - m));
  }
  EXPECT_TRUE(AllClose(f(idx, w), want, "embedding(i, w) - mean(embedding(i, w), -1, true)"));
  EXPECT_EQ(f.kernels().size(), 1u) << f.explain();
}

TEST(GatherReductionTest, MovesThatCannotBeInlineAreStoredFirstAndSaySo) {
  // The index_select reads its own reduction group's rows (x - max) at
  // positions the data gives.
  const Tensor x = RandomTensor({4, 9}, kF32);
  std::vector<double> perm_values = {8, 0, 7, 1, 6, 2, 5, 3, 4};
  const Tensor perm = Tensor::from_vector(perm_values, {9}, kI64, Device::cpu());
  auto f = compile([](const Tensor& a, const Tensor& p) { return sum(index_select(a - max(a, -1, true), 1, p), -1); });
  const std::vector<double> xv = x.to_double_vector();
  Expected want{.shape = {4}, .dtype = kF32};
  for (int64_t r = 0; r < 4; ++r) {
    double m = -1e300, s = 0;
    for (int64_t c = 0; c < 9; ++c) m = std::max(m, xv[r * 9 + c]);
    for (int64_t c = 0; c < 9; ++c) s += static_cast<float>(xv[r * 9 + c] - m);
    want.values.push_back(s);
  }
  EXPECT_TRUE(AllClose(f(x, perm), want, "sum(index_select(x - max(x), 1, perm), -1)"));
  EXPECT_EQ(f.kernels().size(), 3u);
  EXPECT_THAT(f.explain(), HasSubstr("reads values of that reduction's rows at positions the data gives"));

  // A column sum: column kernels load a pass's elements first.
  const Tensor idx = RandomIndex({5}, 9, kI64);
  auto g = compile([](const Tensor& a, const Tensor& i) { return sum(index_select(a, 1, i), 0); });
  const Expected picked = IndexSelectRef(x, 1, idx);
  Expected columns{.shape = {5}, .dtype = kF32};
  for (int64_t c = 0; c < 5; ++c) {
    double s = 0;
    for (int64_t r = 0; r < 4; ++r) s += picked.values[r * 5 + c];
    columns.values.push_back(RoundTo(kF32, s));
  }
  EXPECT_TRUE(AllClose(g(x, idx), columns, "sum(index_select(x, 1, idx), 0)"));
  EXPECT_EQ(g.kernels().size(), 2u);
  EXPECT_THAT(g.explain(), HasSubstr("over dims that are not the innermost"));
}

TEST(GatherReductionTest, BadIndicesReadInsideAReductionAreReported) {
  const Tensor x = RandomTensor({9, 40}, kF32);
  auto f = compile([](const Tensor& a, const Tensor& i) { return sum(index_select(a, 0, i) * 2, -1); });
  const Tensor bad = Tensor::from_vector(std::vector<double>{0, 9, 3}, {3}, kI64, Device::cpu());
  EXPECT_THAT(ErrorOf([&] { f(x, bad).to_vector(); }), HasSubstr("index_select: index 9 is out of range for dim 0 of size 9"));
  auto ce = compile([](const Tensor& logits, const Tensor& t) { return mean(neg(gather(log_softmax(logits, -1), 1, t)), 0); });
  const Tensor target = Tensor::from_vector(std::vector<double>{3, 40, 1}, {3, 1}, kI64, Device::cpu());
  EXPECT_THAT(ErrorOf([&] { ce(x.narrow(0, 0, 3), target).item(); }), HasSubstr("gather: index 40 is out of range for dim 1 of size 40"));
  // The next call works.
  const Tensor good = RandomIndex({3}, 9, kI64);
  const Expected picked = IndexSelectRef(x, 0, good);
  Expected want{.shape = {3}, .dtype = kF32};
  for (int64_t r = 0; r < 3; ++r) {
    double s = 0;
    for (int64_t c = 0; c < 40; ++c) s += picked.values[r * 40 + c] * 2;
    want.values.push_back(RoundTo(kF32, s));
  }
  EXPECT_TRUE(AllClose(f(x, good), want, "after a bad index"));
}

TEST(GatherReductionGpuTest, InlineMovesAndBadIndicesOnCuda) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda();
  CheckAll(gpu);
  const Tensor x = RandomTensor({9, 4099}, kF32).to(gpu);
  auto f = compile([](const Tensor& a, const Tensor& i) { return softmax(index_select(a, 0, i), -1); });
  const Tensor bad = Tensor::from_vector(std::vector<double>{0, -1, 3}, {3}, kI64, gpu);
  Tensor y;
  EXPECT_NO_THROW(y = f(x, bad));  // reported at the read
  EXPECT_THAT(ErrorOf([&] { y.to_vector(); }), HasSubstr("index_select: index -1 is out of range for dim 0 of size 9"));
  EXPECT_EQ(f.kernels().size(), 1u);
}

}  // namespace
}  // namespace fusebox
