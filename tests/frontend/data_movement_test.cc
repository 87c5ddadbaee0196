// index_select, gather, embedding, cat, stack, split and chunk through the
// public API, eager and compiled, against references computed here from the
// inputs' values (exact: the ops move values): dims (negative too), dtypes,
// int32/int64 indices, sizes 0/1/odd, non-contiguous inputs and indices;
// bad indices (a fusebox::Error naming the op, the index and the size, and
// the next call works); fusion with pointwise producers and consumers
// (kernel counts). Every CUDA twin is NVRTC-compiled (tests/test_main.cc);
// GPU variants skip without a device.
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/index_flag.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "tests/frontend/data_movement_refs.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using namespace test_move;  // NOLINT: the references
using test_util::AllClose;
using test_util::ErrorOf;
using test_util::Expected;
using test_util::RandomTensor;
using ::testing::HasSubstr;

constexpr DType kF32 = DType::kFloat32, kF16 = DType::kFloat16, kBF16 = DType::kBFloat16, kI32 = DType::kInt32,
                kI64 = DType::kInt64;

// A non-contiguous copy of `t` (2-D and up): the same values read through a transpose.
Tensor Strided(const Tensor& t) {
  return t.transpose(0, 1).contiguous().transpose(0, 1);
}

struct Case {
  DType dtype;
  DType index_dtype;
};

class IndexOpsTest : public ::testing::TestWithParam<Case> {};

TEST_P(IndexOpsTest, IndexSelectEagerAndCompiledOverDims) {
  const auto [dtype, index_dtype] = GetParam();
  const Tensor x = RandomTensor({5, 7, 3}, dtype);
  for (int64_t dim : {0, 1, -1, -3}) {
    const int64_t d = dim < 0 ? dim + 3 : dim;
    const Tensor index = RandomIndex({9}, x.shape()[d], index_dtype);
    const Expected want = IndexSelectRef(x, d, index);
    const std::string what = absl::StrCat("index_select dim ", dim);
    EXPECT_TRUE(AllClose(index_select(x, dim, index), want, what));
    auto f = compile([dim](const Tensor& a, const Tensor& i) { return index_select(a, dim, i); });
    EXPECT_TRUE(AllClose(f(x, index), want, what + " compiled"));
  }
}

TEST_P(IndexOpsTest, GatherEagerAndCompiledOverDims) {
  const auto [dtype, index_dtype] = GetParam();
  const Tensor x = RandomTensor({4, 6, 5}, dtype);
  for (int64_t dim : {0, 2, -2}) {
    const int64_t d = dim < 0 ? dim + 3 : dim;
    Shape shape = {3, 5, 4};
    shape[d] = 7;  // the indexed dim may be longer than x's
    const Tensor index = RandomIndex(shape, x.shape()[d], index_dtype);
    const Expected want = GatherRef(x, d, index);
    const std::string what = absl::StrCat("gather dim ", dim);
    EXPECT_TRUE(AllClose(gather(x, dim, index), want, what));
    auto f = compile([dim](const Tensor& a, const Tensor& i) { return gather(a, dim, i); });
    EXPECT_TRUE(AllClose(f(x, index), want, what + " compiled"));
  }
}

TEST_P(IndexOpsTest, EmbeddingOfAnyIndexRank) {
  const auto [dtype, index_dtype] = GetParam();
  const Tensor weight = RandomTensor({11, 6}, dtype);
  for (const Shape& shape : {Shape{}, Shape{1}, Shape{5}, Shape{3, 4}}) {
    const Tensor indices = RandomIndex(shape, 11, index_dtype);
    Expected want = IndexSelectRef(weight, 0, indices.reshape({indices.numel()}));
    want.shape = shape;
    want.shape.push_back(6);
    const std::string what = absl::StrCat("embedding ", ShapeToString(shape));
    EXPECT_TRUE(AllClose(embedding(indices, weight), want, what));
    auto f = compile([](const Tensor& i, const Tensor& w) { return embedding(i, w); });
    EXPECT_TRUE(AllClose(f(indices, weight), want, what + " compiled"));
  }
}

TEST_P(IndexOpsTest, NonContiguousInputsAndIndices) {
  const auto [dtype, index_dtype] = GetParam();
  const Tensor x = RandomTensor({6, 9}, dtype).transpose(0, 1);  // [9, 6], strides [1, 9]
  const Tensor index2 = Strided(RandomIndex({7, 6}, 9, index_dtype));
  ASSERT_FALSE(x.is_contiguous());
  ASSERT_FALSE(index2.is_contiguous());
  EXPECT_TRUE(AllClose(gather(x, 0, index2), GatherRef(x, 0, index2), "gather, transposed x and index"));
  const Tensor index1 = index2.narrow(1, 2, 1).reshape({7});  // every 7th element of the storage
  EXPECT_TRUE(AllClose(index_select(x, 0, index1), IndexSelectRef(x, 0, index1), "index_select, strided index"));
  auto f = compile([](const Tensor& a, const Tensor& i) { return index_select(a, 1, i); });
  const Tensor cols = RandomIndex({4}, 6, index_dtype);
  EXPECT_TRUE(AllClose(f(x, cols), IndexSelectRef(x, 1, cols), "index_select dim 1 of a transpose, compiled"));
}

// PyTorch's 0-d rules: index_select's 0-d index is one index (the dim keeps
// size 1) and a 0-d x takes one index (a 0-d result); gather counts a 0-d x
// or index as 1-D of one element and gives index's shape.
TEST_P(IndexOpsTest, ZeroDimIndicesAndInputsAsPyTorch) {
  const auto [dtype, index_dtype] = GetParam();
  const Tensor x = RandomTensor({5, 7, 3}, dtype), scalar = RandomTensor({}, dtype);
  auto select = compile([](const Tensor& a, const Tensor& i) { return index_select(a, -1, i); });
  for (int64_t dim : {0, 1, -1}) {
    const int64_t d = dim < 0 ? dim + 3 : dim;
    const Tensor index = RandomIndex({}, x.shape()[d], index_dtype);
    const Expected want = IndexSelectRef(x, d, index.reshape({1}));
    ASSERT_EQ(want.shape[d], 1);
    EXPECT_TRUE(AllClose(index_select(x, dim, index), want, absl::StrCat("index_select, 0-d index, dim ", dim)));
    if (dim == -1) EXPECT_TRUE(AllClose(select(x, index), want, "index_select, 0-d index, compiled"));
  }
  const Expected just_scalar{.shape = {}, .dtype = dtype, .values = scalar.to_double_vector()};
  for (const Shape& shape : {Shape{}, Shape{1}}) {
    const Tensor zero = RandomIndex(shape, 1, index_dtype);
    const std::string what = absl::StrCat("index_select of a 0-d x at index ", ShapeToString(shape));
    EXPECT_TRUE(AllClose(index_select(scalar, 0, zero), just_scalar, what));
    EXPECT_TRUE(AllClose(select(scalar, zero), just_scalar, what + " compiled"));
  }

  auto take = compile([](const Tensor& a, const Tensor& i) { return gather(a, 0, i); });
  const Tensor zero = RandomIndex({}, 1, index_dtype), zeros3 = RandomIndex({3}, 1, index_dtype);
  EXPECT_TRUE(AllClose(gather(scalar, 0, zero), just_scalar, "gather, 0-d x and index"));
  EXPECT_TRUE(AllClose(take(scalar, zero), just_scalar, "gather, 0-d x and index, compiled"));
  const Expected thrice{.shape = {3}, .dtype = dtype, .values = std::vector<double>(3, scalar.to_double_vector()[0])};
  EXPECT_TRUE(AllClose(gather(scalar, -1, zeros3), thrice, "gather, 0-d x and 1-D index"));
  EXPECT_TRUE(AllClose(take(scalar, zeros3), thrice, "gather, 0-d x and 1-D index, compiled"));
  const Tensor v = RandomTensor({6}, dtype), at = RandomIndex({}, 6, index_dtype);
  Expected element = GatherRef(v, 0, at.reshape({1}));
  element.shape = {};
  EXPECT_TRUE(AllClose(gather(v, 0, at), element, "gather, 1-D x and 0-d index"));
  EXPECT_TRUE(AllClose(take(v, at), element, "gather, 1-D x and 0-d index, compiled"));
}

INSTANTIATE_TEST_SUITE_P(DTypes, IndexOpsTest,
                         ::testing::Values(Case{kF32, kI64}, Case{kBF16, kI32}, Case{kF16, kI64}, Case{kI64, kI32},
                                           Case{kF32, kI32}),
                         [](const auto& info) {
                           return absl::StrCat(DTypeName(info.param.dtype), "_", DTypeName(info.param.index_dtype));
                         });

TEST(IndexOpsTest, SizesZeroAndOne) {
  const Tensor x = RandomTensor({1, 3}, kF32);
  const Tensor none = Tensor::from_vector(std::vector<double>{}, {0}, kI64, Device::cpu());
  EXPECT_EQ(index_select(x, 1, none).shape(), (Shape{1, 0}));
  EXPECT_EQ(index_select(RandomTensor({0, 3}, kF32), 1, RandomIndex({2}, 3, kI64)).shape(), (Shape{0, 2}));
  const Tensor one = RandomIndex({1}, 1, kI64);
  EXPECT_TRUE(AllClose(index_select(x, 0, one), IndexSelectRef(x, 0, one), "index_select of a size-1 dim"));
  EXPECT_EQ(embedding(none, RandomTensor({4, 5}, kF32)).shape(), (Shape{0, 5}));
  EXPECT_THROW(index_select(RandomTensor({0, 3}, kF32), 0, one), Error);  // no index is in range of 0
}

TEST(IndexOpsTest, UsageErrorsNameTheOp) {
  const Tensor x = RandomTensor({4, 5}, kF32);
  const Tensor scalar = RandomTensor({}, kF32);
  EXPECT_THAT(ErrorOf([&] { index_select(x, 0, RandomIndex({2, 2}, 4, kI64)); }),
              HasSubstr("index_select: index is supposed to be a vector (0-d or 1-D), got"));
  EXPECT_THAT(ErrorOf([&] { index_select(scalar, 0, RandomIndex({2}, 1, kI64)); }),
              HasSubstr("index_select: index to a 0-d x can have only 1 value"));
  EXPECT_THAT(ErrorOf([&] { index_select(scalar, 0, RandomIndex({0}, 1, kI64)); }),
              HasSubstr("index_select: index to a 0-d x can have only 1 value"));
  EXPECT_THAT(ErrorOf([&] { index_select(scalar, 1, RandomIndex({}, 1, kI64)); }),
              HasSubstr("index_select: dimension 1 is out of range"));
  EXPECT_THAT(ErrorOf([&] { index_select(scalar, 0, Tensor::from_vector(std::vector<double>{1}, {}, kI64)); }),
              HasSubstr("index_select: index 1 is out of range for dim 0 of size 1"));
  EXPECT_THAT(ErrorOf([&] { gather(x, 1, RandomIndex({}, 4, kI64)); }), HasSubstr("gather: index must have x's rank"));
  EXPECT_THAT(ErrorOf([&] { gather(scalar, 0, Tensor::from_vector(std::vector<double>{1}, {}, kI64)); }),
              HasSubstr("gather: index 1 is out of range for dim 0 of size 1"));
  // An empty index gives its shape unchecked (PyTorch returns before its checks).
  EXPECT_EQ(gather(x, 1, RandomIndex({0}, 4, kI64)).shape(), (Shape{0}));
  EXPECT_THAT(ErrorOf([&] { index_select(x, 0, RandomTensor({2}, kF32)); }), HasSubstr("index_select: index must be int64 or int32"));
  EXPECT_THAT(ErrorOf([&] { index_select(x, 2, RandomIndex({2}, 4, kI64)); }), HasSubstr("index_select: dimension 2 is out of range"));
  EXPECT_THAT(ErrorOf([&] { gather(x, 0, RandomIndex({2}, 4, kI64)); }), HasSubstr("gather: index must have x's rank"));
  EXPECT_THAT(ErrorOf([&] { gather(x, 0, RandomIndex({2, 6}, 4, kI64)); }), HasSubstr("larger than x"));
  EXPECT_THAT(ErrorOf([&] { embedding(RandomIndex({2}, 4, kI64), RandomTensor({4}, kF32)); }), HasSubstr("embedding: weight must be 2-D"));
}

// ------------------------------------------------------------ bad indices

TEST(BadIndexTest, EagerAndCompiledReportTheIndexAndTheNextCallWorks) {
  const Tensor x = RandomTensor({5, 3}, kF32);
  for (DType index_dtype : {kI64, kI32}) {
    for (double bad : {5.0, 7.0, -1.0}) {
      const Tensor index = Tensor::from_vector(std::vector<double>{0, bad, 4, 2}, {4}, index_dtype, Device::cpu());
      const std::string eager = ErrorOf([&] { index_select(x, 0, index); });
      EXPECT_THAT(eager, HasSubstr("index_select: index " + absl::StrCat(static_cast<int64_t>(bad)) +
                                   " is out of range for dim 0 of size 5"));
      auto f = compile([](const Tensor& a, const Tensor& i) { return exp(index_select(a * 2, 0, i)); });
      EXPECT_THAT(ErrorOf([&] { f(x, index).to_double_vector(); }), HasSubstr("index_select: index"));
      // The next calls, eager and compiled, work (the flag starts clean).
      const Tensor good = RandomIndex({4}, 5, index_dtype);
      EXPECT_TRUE(AllClose(index_select(x, 0, good), IndexSelectRef(x, 0, good), "after a bad index"));
      const Tensor y = f(x, good);
      Expected want = IndexSelectRef(x, 0, good);
      for (double& v : want.values) v = std::exp(static_cast<double>(static_cast<float>(v * 2)));
      EXPECT_TRUE(AllClose(y, want, "compiled, after a bad index"));
    }
  }
  EXPECT_THAT(ErrorOf([&] { embedding(Tensor::from_vector(std::vector<double>{3, 10}, {2}, kI64, Device::cpu()), x); }),
              HasSubstr("embedding: index 10 is out of range for dim 0 of size 5"));
  EXPECT_THAT(ErrorOf([&] { gather(x, 1, Tensor::from_vector(std::vector<double>{0, 3}, {1, 2}, kI64, Device::cpu())); }),
              HasSubstr("gather: index 3 is out of range for dim 1 of size 3"));
}

// ------------------------------------------------------------ fusion

TEST(GatherFusionTest, PointwiseProducersAndConsumersFuseIntoOneKernel) {
  const Tensor a = RandomTensor({6, 5}, kF32), b = RandomTensor({4, 5}, kF32);
  const Tensor idx = RandomIndex({4}, 6, kI64);
  auto f = compile([](const Tensor& a, const Tensor& i, const Tensor& b) { return exp(index_select(a * 2, 0, i)) + b; });
  const Tensor y = f(a, idx, b);
  Expected want = IndexSelectRef(a, 0, idx);
  const std::vector<double> bv = b.to_double_vector();
  for (size_t k = 0; k < want.values.size(); ++k) want.values[k] = std::exp(want.values[k] * 2) + bv[k];
  EXPECT_TRUE(AllClose(y, want, "exp(index_select(a * 2, 0, idx)) + b"));
  ASSERT_EQ(f.kernels().size(), 1u);
  EXPECT_THAT(f.kernels()[0].source, HasSubstr("fb_check_index("));
  EXPECT_TRUE(f.kernels()[0].ptx_summary.has_value());  // its CUDA twin compiled for sm_90

  // The index itself computed by pointwise ops fuses too.
  auto g = compile([](const Tensor& a, const Tensor& i, const Tensor& one) { return gather(a, 1, i + one); });
  const Tensor i2 = RandomIndex({6, 3}, 4, kI32), one = Tensor::from_vector(std::vector<double>{1}, {1}, kI32);
  std::vector<double> plus_one = i2.to_double_vector();
  for (double& v : plus_one) v += 1;
  const Tensor shifted = Tensor::from_vector(plus_one, {6, 3}, kI64, Device::cpu());
  EXPECT_TRUE(AllClose(g(a, i2, one), GatherRef(a, 1, shifted), "gather(a, 1, idx + one)"));
  EXPECT_EQ(g.kernels().size(), 1u);
}

// ------------------------------------------------------------ nn::Embedding

TEST(EmbeddingModuleTest, WeightIsStandardNormalAndForwardLooksUpRows) {
  nn::Embedding emb(64, 48, Device::cpu(), kF32, /*seed=*/3);
  ASSERT_EQ(emb.weight.shape(), (Shape{64, 48}));
  const std::vector<double> w = emb.weight.to_double_vector();
  double mean = 0, sq = 0;
  for (double v : w) mean += v / w.size(), sq += v * v / w.size();
  EXPECT_NEAR(mean, 0, 0.1);
  EXPECT_NEAR(sq - mean * mean, 1, 0.15);
  const Tensor idx = RandomIndex({2, 3}, 64, kI64);
  Expected want = IndexSelectRef(emb.weight, 0, idx.reshape({6}));
  want.shape = {2, 3, 48};
  EXPECT_TRUE(AllClose(emb(idx), want, "nn::Embedding forward"));
  EXPECT_EQ(nn::Embedding(8, 4, Device::cpu(), kBF16).weight.dtype(), kBF16);
}

// ------------------------------------------------------------ GPU

TEST(DataMovementGpuTest, IndexOpsAndBadIndicesOnCuda) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda();
  for (DType dtype : {kF32, kBF16, kI64}) {
    const Tensor x = RandomTensor({37, 65}, dtype);
    const Tensor idx = RandomIndex({19}, 37, kI32);
    EXPECT_TRUE(AllClose(index_select(x.to(gpu), 0, idx.to(gpu)), IndexSelectRef(x, 0, idx), "index_select cuda"));
    const Tensor gi = RandomIndex({37, 9}, 65, kI64);
    auto f = compile([](const Tensor& a, const Tensor& i) { return gather(a, -1, i); });
    EXPECT_TRUE(AllClose(f(x.to(gpu), gi.to(gpu)), GatherRef(x, 1, gi), "gather cuda compiled"));
    // 0-d: index_select's 0-d index keeps the dim (size 1); gather of a 0-d index is 0-d.
    const Tensor one = RandomIndex({}, 65, kI64);
    EXPECT_TRUE(AllClose(index_select(x.to(gpu), 1, one.to(gpu)), IndexSelectRef(x, 1, one.reshape({1})), "0-d index cuda"));
    const Tensor row = x.narrow(0, 3, 1).reshape({65});
    Expected element = GatherRef(row, 0, one.reshape({1}));
    element.shape = {};
    EXPECT_TRUE(AllClose(f(row.to(gpu), one.to(gpu)), element, "gather of a 0-d index cuda compiled"));
  }
  const Tensor x = RandomTensor({5, 3}, kF32);
  const Tensor bad = Tensor::from_vector(std::vector<double>{1, 9}, {2}, kI64, gpu);
  auto good_on = [](Device d) { return Tensor::from_vector(std::vector<double>{1, 2}, {2}, kI64, d); };
  EXPECT_THAT(ErrorOf([&] { index_select(x.to(gpu), 0, bad); }), HasSubstr("index 9 is out of range for dim 0 of size 5"));
  EXPECT_THAT(ErrorOf([&] { index_select(x, 0, good_on(gpu)); }), HasSubstr("index_select: expected all tensors on one device"));
  // The context survives: the next op runs and is right.
  const Tensor good = RandomIndex({4}, 5, kI64);
  EXPECT_TRUE(AllClose(index_select(x.to(gpu), 0, good.to(gpu)), IndexSelectRef(x, 0, good), "after a bad index"));
  EXPECT_TRUE(AllClose((x.to(gpu) + 1).to(Device::cpu()) - 1, Expected{x.shape(), kF32, x.to_double_vector()}, "x + 1 - 1"));
}

// A compiled gather on CUDA does not wait for its kernel: the bad index is
// reported by the first read of the result (and of anything computed from
// it), the context stays usable, and good runs read no flag until read.
TEST(DataMovementGpuTest, CompiledBadIndexThrowsWhenTheResultIsRead) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda();
  const Tensor x = RandomTensor({5, 3}, kF32);
  const Tensor xg = x.to(gpu);
  auto f = compile([](const Tensor& a, const Tensor& i) { return exp(index_select(a * 2, 0, i)); });
  auto g = compile([](const Tensor& y) { return y + 1; });
  const Tensor bad = Tensor::from_vector(std::vector<double>{0, 7, 4, 2}, {4}, kI64, gpu);
  Tensor y, later;
  EXPECT_NO_THROW(y = f(xg, bad));   // no wait at the call
  EXPECT_NO_THROW(later = g(y));     // nor in a run that reads it
  const std::string want = "index_select: index 7 is out of range for dim 0 of size 5";
  std::vector<std::function<void()>> reads = {
      [&] { y.to_vector(); }, [&] { y.to(Device::cpu()); }, [&] { y.data_ptr(); },
      [&] { y.narrow(0, 1, 1).narrow(1, 0, 1).item(); }, [&] { later.to_vector(); },
      [&] { std::ostringstream os; os << later; }, [&] { (later * 2).to_vector(); }};
  for (size_t k = 0; k < reads.size(); ++k) EXPECT_THAT(ErrorOf(reads[k]), HasSubstr(want)) << "read " << k;
  // Good runs afterwards: right, and not one wait for a flag while unread.
  const cuda::IndexFlagCounts before = cuda::GetIndexFlagCounts();
  const Tensor good = RandomIndex({4}, 5, kI64);
  const Tensor good_gpu = good.to(gpu);
  Tensor last;
  for (int run = 0; run < 20; ++run) last = g(f(xg, good_gpu));
  EXPECT_EQ(cuda::GetIndexFlagCounts().waits, before.waits);
  Expected want_values = IndexSelectRef(x, 0, good);
  for (double& v : want_values.values) v = static_cast<double>(std::exp(static_cast<float>(v * 2))) + 1;
  EXPECT_TRUE(AllClose(last, want_values, "g(f(x, good)) after a bad index"));
  EXPECT_LE(cuda::GetIndexFlagCounts().waits, before.waits + 1);  // the read waited at most once
}

}  // namespace
}  // namespace fusebox
