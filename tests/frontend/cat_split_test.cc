// cat and stack (one kernel of masked loads) and split / chunk (views),
// eager and compiled, against references computed here: dims (negative
// too), dtype promotion across inputs, empty and size-1 inputs,
// non-contiguous inputs, errors, fusion with pointwise producers and
// consumers (kernel counts). GPU variants skip without a device.
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
using ::testing::HasSubstr;

constexpr DType kF32 = DType::kFloat32, kF16 = DType::kFloat16, kBF16 = DType::kBFloat16, kI32 = DType::kInt32,
                kI64 = DType::kInt64;

// The values of `xs` joined along `dim`, each rounded to `dtype`.
Expected CatRef(const std::vector<Tensor>& xs, int64_t dim, DType dtype) {
  Expected e{.shape = xs[0].shape(), .dtype = dtype};
  e.shape[dim] = 0;
  for (const Tensor& x : xs) e.shape[dim] += x.shape()[dim];
  // Outer blocks (dims before `dim`), then each input's slab of that block.
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= e.shape[d];
  std::vector<std::vector<double>> values;
  for (const Tensor& x : xs) values.push_back(x.to_double_vector());
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t k = 0; k < xs.size(); ++k) {
      const int64_t slab = outer == 0 ? 0 : xs[k].numel() / outer;
      for (int64_t s = 0; s < slab; ++s) e.values.push_back(test_util::RoundTo(dtype, values[k][o * slab + s]));
    }
  }
  return e;
}

TEST(CatTest, EagerAndCompiledOverDimsAndDTypes) {
  for (DType dtype : {kF32, kBF16, kF16, kI64}) {
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      std::vector<Tensor> xs;
      for (int64_t size : {3, 1, 5}) {
        Shape shape = {2, 3, 4};
        shape[d] = size;
        xs.push_back(RandomTensor(shape, dtype));
      }
      const Expected want = CatRef(xs, d, dtype);
      const std::string what = absl::StrCat("cat ", DTypeName(dtype), " dim ", dim);
      EXPECT_TRUE(AllClose(cat(xs, dim), want, what));
      auto f = compile([dim](const Tensor& a, const Tensor& b, const Tensor& c) { return cat({a, b, c}, dim); });
      EXPECT_TRUE(AllClose(f(xs[0], xs[1], xs[2]), want, what + " compiled"));
      EXPECT_EQ(f.kernels().size(), 1u);
    }
  }
}

TEST(CatTest, PromotesAcrossInputsAsPyTorch) {
  const Tensor h = RandomTensor({2, 3}, kF16), f = RandomTensor({4, 3}, kF32), b = RandomTensor({1, 3}, kBF16);
  const Tensor i = RandomTensor({2, 3}, kI32), l = RandomTensor({3, 3}, kI64);
  EXPECT_TRUE(AllClose(cat({h, f}), CatRef({h, f}, 0, kF32), "f16 + f32"));
  EXPECT_TRUE(AllClose(cat({h, b}), CatRef({h, b}, 0, kF32), "f16 + bf16"));
  EXPECT_TRUE(AllClose(cat({l, b}), CatRef({l, b}, 0, kBF16), "i64 + bf16"));
  EXPECT_TRUE(AllClose(cat({i, l}), CatRef({i, l}, 0, kI64), "i32 + i64"));
  auto fn = compile([](const Tensor& a, const Tensor& c) { return cat({a, c}, -2); });
  EXPECT_TRUE(AllClose(fn(i, f), CatRef({i, f}, 0, kF32), "i32 + f32 compiled"));
}

TEST(CatTest, EmptyAndNonContiguousInputs) {
  const Tensor a = RandomTensor({3, 4}, kF32), empty_rows = RandomTensor({0, 4}, kF32);
  const Tensor legacy = RandomTensor({0}, kF32);  // skipped, as PyTorch does
  EXPECT_TRUE(AllClose(cat({empty_rows, a, empty_rows}), CatRef({a}, 0, kF32), "with empty inputs"));
  EXPECT_TRUE(AllClose(cat({legacy, a}, 1), CatRef({a}, 1, kF32), "with a legacy [0]"));
  EXPECT_EQ(cat({empty_rows, empty_rows}).shape(), (Shape{0, 4}));
  EXPECT_EQ(cat({legacy}).shape(), (Shape{0}));
  // All skipped: empty at any dim, as torch.cat([torch.empty(0)] * 2, dim=2).
  EXPECT_EQ(cat({legacy, legacy}, 2).shape(), (Shape{0}));
  const Tensor t = RandomTensor({4, 5}, kF32).transpose(0, 1);  // [5, 4], non-contiguous
  const Tensor n = RandomTensor({4, 9}, kF32).narrow(1, 2, 4);  // [4, 4] of a wider row
  ASSERT_FALSE(t.is_contiguous());
  EXPECT_TRUE(AllClose(cat({t, n, a}, 0), CatRef({t, n, a}, 0, kF32), "transposed and narrowed inputs"));
  auto f = compile([](const Tensor& x, const Tensor& y) { return cat({x, y}, 0); });
  EXPECT_TRUE(AllClose(f(t, n), CatRef({t, n}, 0, kF32), "compiled, non-contiguous"));
  const Tensor one = RandomTensor({1, 1}, kF32);
  EXPECT_TRUE(AllClose(cat({one, one}, 1), CatRef({one, one}, 1, kF32), "size-1 inputs"));
}

TEST(CatTest, FusesWithPointwiseProducersAndConsumers) {
  const Tensor a = RandomTensor({5, 3}, kF32), b = RandomTensor({5, 7}, kF32);
  auto f = compile([](const Tensor& a, const Tensor& b) { return relu(cat({a * 2, b + 1}, 1)) * 3; });
  const Tensor y = f(a, b);
  const std::vector<double> av = a.to_double_vector(), bv = b.to_double_vector();
  Expected want{.shape = {5, 10}, .dtype = kF32};
  for (int64_t r = 0; r < 5; ++r) {
    for (int64_t c = 0; c < 10; ++c) {
      const double v = c < 3 ? av[r * 3 + c] * 2 : bv[r * 7 + c - 3] + 1;
      want.values.push_back(std::max(v, 0.0) * 3);
    }
  }
  EXPECT_TRUE(AllClose(y, want, "relu(cat({a * 2, b + 1}, 1)) * 3"));
  ASSERT_EQ(f.kernels().size(), 1u);
  EXPECT_THAT(f.kernels()[0].source, HasSubstr("? in"));  // masked loads, no copy first
  EXPECT_THAT(f.kernels()[0].source, ::testing::Not(HasSubstr("fb_err")));  // nothing to check
  EXPECT_TRUE(f.kernels()[0].ptx_summary.has_value());  // its CUDA twin compiled for sm_90
  // A reduction over a cat loads it from the kernel that stores it.
  auto g = compile([](const Tensor& a, const Tensor& b) { return sum(cat({a, b}, 0), 0); });
  const Tensor c = RandomTensor({4, 3}, kF32);
  const Expected joined = CatRef({a, c}, 0, kF32);
  Expected want_sum{.shape = {3}, .dtype = kF32, .values = {0, 0, 0}};
  for (size_t k = 0; k < joined.values.size(); ++k) want_sum.values[k % 3] += joined.values[k];
  EXPECT_TRUE(AllClose(g(a, c), want_sum, "sum(cat({a, c}), 0)"));
}

TEST(CatTest, DynamicBatchSizesAndInPlaceStores) {
  auto f = compile([](const Tensor& x, const Tensor& y) { return cat({x, y * 2}, -1); }, CompileOptions{.dynamic = true});
  for (int64_t rows : {3, 5, 8}) {
    const Tensor x = RandomTensor({rows, 2}, kF32), y = RandomTensor({rows, 3}, kF32);
    EXPECT_TRUE(AllClose(f(x, y), CatRef({x, y * 2}, 1, kF32), absl::StrCat("dynamic rows ", rows)));
  }
  Tensor out = zeros({4, 3}, Device::cpu(), kF32);
  const Tensor a = RandomTensor({1, 3}, kF32), b = RandomTensor({3, 3}, kF32);
  out.copy_(cat({a, b}));
  EXPECT_TRUE(AllClose(out, CatRef({a, b}, 0, kF32), "out.copy_(cat)"));
}

TEST(CatTest, ErrorsNameTheOpAndShapes) {
  const Tensor a = RandomTensor({2, 3}, kF32);
  EXPECT_THAT(ErrorOf([&] { cat({}); }), HasSubstr("cat: expected a non-empty list"));
  EXPECT_THAT(ErrorOf([&] { cat({a, RandomTensor({2, 3, 1}, kF32)}); }), HasSubstr("cat: tensors must have one rank"));
  EXPECT_THAT(ErrorOf([&] { cat({a, RandomTensor({2, 4}, kF32)}); }), HasSubstr("cat: sizes must match except in dim 0"));
  EXPECT_THAT(ErrorOf([&] { cat({a, a}, 2); }), HasSubstr("cat: dimension 2 is out of range"));
  EXPECT_THAT(ErrorOf([&] { cat({RandomTensor({}, kF32)}); }), HasSubstr("zero-dimensional"));
  EXPECT_THAT(ErrorOf([&] { stack({a, RandomTensor({3, 2}, kF32)}); }), HasSubstr("stack: expects each tensor to be of one shape"));
}

TEST(StackTest, NewDimAnywhere) {
  const Tensor a = RandomTensor({2, 3}, kF32), b = RandomTensor({2, 3}, kF32), c = RandomTensor({2, 3}, kF32);
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    const int64_t d = dim < 0 ? dim + 3 : dim;
    const Expected want = CatRef({a.unsqueeze(d), b.unsqueeze(d), c.unsqueeze(d)}, d, kF32);
    EXPECT_TRUE(AllClose(stack({a, b, c}, dim), want, absl::StrCat("stack dim ", dim)));
    auto f = compile([dim](const Tensor& x, const Tensor& y) { return stack({x, y, x * 2}, dim); });
    EXPECT_TRUE(AllClose(f(a, b), CatRef({a.unsqueeze(d), b.unsqueeze(d), (a * 2).unsqueeze(d)}, d, kF32),
                         absl::StrCat("stack compiled dim ", dim)));
    EXPECT_EQ(f.kernels().size(), 1u);
  }
}

// ------------------------------------------------------------ split / chunk

std::vector<int64_t> Sizes(const std::vector<Tensor>& pieces, int64_t dim) {
  std::vector<int64_t> sizes;
  for (const Tensor& p : pieces) sizes.push_back(p.shape()[dim]);
  return sizes;
}

TEST(SplitTest, PiecesAreViewsWithPyTorchSizes) {
  const Tensor x = RandomTensor({7, 4}, kF32);
  using V = std::vector<int64_t>;
  EXPECT_EQ(Sizes(split(x, 3), 0), (V{3, 3, 1}));
  EXPECT_EQ(Sizes(split(x, 7), 0), (V{7}));
  EXPECT_EQ(Sizes(split(x, 10), 0), (V{7}));
  EXPECT_EQ(Sizes(split(x, 3, -1), 1), (V{3, 1}));
  EXPECT_EQ(Sizes(chunk(x, 3), 0), (V{3, 3, 1}));
  EXPECT_EQ(Sizes(chunk(x, 4), 0), (V{2, 2, 2, 1}));
  EXPECT_EQ(Sizes(chunk(RandomTensor({6}, kF32), 4), 0), (V{2, 2, 2}));  // fewer than n
  EXPECT_EQ(Sizes(chunk(x, 8), 0), (V{1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(Sizes(chunk(x, 2, -1), 1), (V{2, 2}));
  const Tensor empty = RandomTensor({0, 4}, kF32);
  EXPECT_EQ(Sizes(split(empty, 2), 0), (V{0}));
  EXPECT_EQ(Sizes(chunk(empty, 3), 0), (V{0, 0, 0}));
  // The pieces are x's values, and joining them gives x back.
  const std::vector<Tensor> pieces = split(x, 3, 0);
  EXPECT_EQ(pieces[1].data_ptr(), static_cast<const char*>(x.data_ptr()) + 3 * 4 * sizeof(float));  // a view
  EXPECT_TRUE(AllClose(cat(pieces), CatRef({x}, 0, kF32), "cat(split(x))"));
  const std::vector<Tensor> cols = chunk(x, 2, 1);
  EXPECT_TRUE(AllClose(cat(cols, 1), CatRef({x}, 0, kF32), "cat(chunk(x, 2, 1), 1)"));
  EXPECT_THAT(ErrorOf([&] { split(x, 0); }), HasSubstr("split: split_size must be positive"));
  EXPECT_THAT(ErrorOf([&] { chunk(x, 0); }), HasSubstr("chunk: the number of chunks must be positive"));
  EXPECT_THAT(ErrorOf([&] { split(x, 2, 2); }), HasSubstr("split: dimension 2 is out of range"));
}

TEST(SplitTest, WithSizesAsPyTorchSplitWithSizes) {
  const Tensor x = RandomTensor({3, 9, 2}, kF32);
  using V = std::vector<int64_t>;
  EXPECT_EQ(Sizes(split(x, V{2, 0, 4, 3}, 1), 1), (V{2, 0, 4, 3}));
  EXPECT_EQ(Sizes(split(x, V{9}, -2), 1), (V{9}));
  EXPECT_EQ(Sizes(split(x, V{1, 2}, -3), 0), (V{1, 2}));
  EXPECT_EQ(Sizes(split(x, V{0, 2, 0}, -1), 2), (V{0, 2, 0}));
  EXPECT_TRUE(split(RandomTensor({0, 4}, kF32), V{}).empty());
  // Views at the running offset, with x's values: joined they give x back.
  const std::vector<Tensor> pieces = split(x, V{2, 0, 4, 3}, 1);
  EXPECT_EQ(pieces[2].data_ptr(), static_cast<const char*>(x.data_ptr()) + 2 * 2 * sizeof(float));
  EXPECT_EQ(pieces[3].data_ptr(), static_cast<const char*>(x.data_ptr()) + 6 * 2 * sizeof(float));
  EXPECT_TRUE(AllClose(cat(pieces, 1), CatRef({x}, 0, kF32), "cat(split(x, [2, 0, 4, 3], 1), 1)"));
  EXPECT_TRUE(AllClose(pieces[2], CatRef({x.narrow(1, 2, 4).contiguous()}, 0, kF32), "the third piece"));
  // Inside compile the pieces are views feeding one kernel.
  auto f = compile([](const Tensor& x) {
    const std::vector<Tensor> p = split(x, V{4, 4, 1}, 1);
    return p[0] * p[1];
  });
  const std::vector<double> v = x.to_double_vector();
  Expected want{.shape = {3, 4, 2}, .dtype = kF32};
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t k = 0; k < 8; ++k) want.values.push_back(v[i * 18 + k] * v[i * 18 + 8 + k]);
  }
  EXPECT_TRUE(AllClose(f(x), want, "split with sizes inside compile"));
  EXPECT_EQ(f.kernels().size(), 1u);
  EXPECT_THAT(ErrorOf([&] { split(x, V{4, 4}, 1); }),
              HasSubstr("split: split_sizes [4, 4] must sum exactly to 9 (the size of dim 1 of"));
  EXPECT_THAT(ErrorOf([&] { split(x, V{10, -1}, 1); }), HasSubstr("split: split_sizes must be non-negative, got [10, -1]"));
  EXPECT_THAT(ErrorOf([&] { split(x, V{INT64_MAX, INT64_MAX, 2}, 1); }), HasSubstr("must sum exactly to 9"));
  EXPECT_THAT(ErrorOf([&] { split(x, V{3}, 3); }), HasSubstr("split: dimension 3 is out of range"));
  EXPECT_THAT(ErrorOf([&] { split(RandomTensor({}, kF32), V{1}); }), HasSubstr("split: expected a tensor with dims"));
}

TEST(SplitTest, InsideCompileThePiecesFeedOneKernel) {
  const Tensor x = RandomTensor({6, 5}, kF32);
  auto f = compile([](const Tensor& x) {
    const std::vector<Tensor> p = chunk(x, 3, 0);
    return p[0] * p[1] + p[2];
  });
  const std::vector<double> v = x.to_double_vector();
  Expected want{.shape = {2, 5}, .dtype = kF32};
  for (int64_t k = 0; k < 10; ++k) want.values.push_back(static_cast<float>(v[k] * v[10 + k]) + v[20 + k]);
  EXPECT_TRUE(AllClose(f(x), want, "chunk inside compile"));
  EXPECT_EQ(f.kernels().size(), 1u);
}

TEST(CatGpuTest, CatAndStackOnCuda) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda();
  const Tensor a = RandomTensor({33, 7}, kBF16), b = RandomTensor({33, 5}, kF32);
  EXPECT_TRUE(AllClose(cat({a.to(gpu), b.to(gpu)}, -1), CatRef({a, b}, 1, kF32), "cat cuda"));
  auto f = compile([](const Tensor& x, const Tensor& y) { return stack({x, y * 2}, 1); });
  const Tensor c = RandomTensor({33, 7}, kF32);
  const Tensor a32 = a.to(kF32);
  EXPECT_TRUE(AllClose(f(a32.to(gpu), c.to(gpu)), CatRef({a32.unsqueeze(1), (c * 2).unsqueeze(1)}, 1, kF32),
                       "stack cuda compiled"));
  EXPECT_THAT(ErrorOf([&] { cat({a, b.to(gpu)}, 1); }), HasSubstr("cat: expected all tensors on one device"));
}

}  // namespace
}  // namespace fusebox
