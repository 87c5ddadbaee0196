// Dynamic shapes and recompiles: automatic dynamic (a dim seen with two sizes
// becomes a run-time size), dynamic=true/false, the recompile limit's eager
// fallback, sizes 0 and 1, and dims that must stay compiled in. Each size is
// checked against float64; compile counts show which calls compiled.
#include <cmath>
#include <random>

#include "backend/cuda/driver.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/frontend/attention_ref.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

// Inner sizes no other test uses, so the process-wide plan cache starts cold.
constexpr int64_t kCols = 136;

Tensor BiasGelu(const Tensor& x, const Tensor& b) { return ManualGelu(x + b); }

std::vector<double> BiasGeluRef(const Tensor& x, const Tensor& b) {
  const auto xv = x.to_double_vector(), bv = b.to_double_vector();
  std::vector<double> out(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) out[i] = GeluRef(xv[i] + bv[i % bv.size()]);
  return out;
}

// Softmax over the last dim of a [rows, cols] tensor, in float64.
std::vector<double> RowSoftmaxRef(const Tensor& x) {
  const int64_t cols = x.size(-1);
  return SoftmaxRef(x.to_double_vector(), cols == 0 ? 0 : x.numel() / cols, cols);
}

void AutomaticDynamicBatchDim(Device device) {
  const uint64_t seed = FreshSeed();
  Tensor b = randn({kCols}, device, seed);
  auto compiled = compile(BiasGelu);
  int64_t kernel_compiles_after_second = 0;
  const std::vector<int64_t> batches = {16, 24, 40, 7, 64};
  for (size_t call = 0; call < batches.size(); ++call) {
    Tensor x = randn({batches[call], kCols}, device, seed + call + 1);
    Tensor y = compiled(x, b);
    ASSERT_EQ(y.shape(), (Shape{batches[call], kCols}));
    ExpectClose(y.to_vector(), BiasGeluRef(x, b), 1e-5);
    if (call == 1) kernel_compiles_after_second = compiled.stats().kernel_compiles;
  }
  const CompileStats stats = compiled.stats();
  // The first call compiles for 16 rows; the second sees 24, recompiles once
  // with the row count as a run-time size, and every later size reuses it.
  EXPECT_EQ(stats.plan_compiles, 2);
  EXPECT_EQ(stats.cache_hits, 3);
  EXPECT_EQ(stats.kernel_compiles, kernel_compiles_after_second);
  EXPECT_EQ(Names(compiled.kernels()).size(), 1u);
  const std::string explain = compiled.explain();
  EXPECT_THAT(explain, HasSubstr("recompiled: graph 0: input 0: float32[16, 136]"));
  EXPECT_THAT(explain, HasSubstr("-> float32[24, 136]"));
  EXPECT_THAT(explain, HasSubstr("now dynamic: s0 = input 0 dim 0"));
  EXPECT_THAT(explain, HasSubstr("run-time size: s0 = input 0 dim 0"));
  EXPECT_THAT(explain, HasSubstr("input 0 = argument 0: float32[64, 136]"));
}

TEST(DynamicShapesTest, AutomaticDynamicRecompilesOnceForANewBatchSize) { AutomaticDynamicBatchDim(Device::cpu()); }

TEST(DynamicShapesTest, DynamicKernelTakesItsIterationCountAsAnArgument) {
  auto compiled = compile([](const Tensor& x) { return exp(x) * 3.0; }, CompileOptions{.dynamic = true});
  Tensor x = randn({12, 72}, Device::cpu(), FreshSeed());
  compiled(x);
  ASSERT_EQ(compiled.kernels().size(), 1u);
  const std::string source = compiled.kernels()[0].source;
  // The C++ kernel loops over [begin, end) passed at run time; the size
  // appears nowhere in it, not even the comment.
  EXPECT_THAT(source, Not(HasSubstr("864")));
  EXPECT_THAT(source, HasSubstr("run-time"));
  EXPECT_THAT(compiled.explain(), HasSubstr("run-time size: s0 = input 0 dim 0"));
}

TEST(DynamicShapesTest, DynamicTrueCompilesOncePerFunctionFromTheFirstCall) {
  auto compiled = compile(ManualSoftmax, CompileOptions{.dynamic = true});
  const uint64_t seed = FreshSeed();
  for (int64_t rows : {5, 33, 130, 2}) {
    Tensor x = randn({rows, 100}, Device::cpu(), seed + rows);
    ExpectClose(compiled(x).to_vector(), RowSoftmaxRef(x), 1e-5);
  }
  EXPECT_EQ(compiled.stats().plan_compiles, 1);
  EXPECT_EQ(compiled.stats().cache_hits, 3);
}

TEST(DynamicShapesTest, DynamicFalseCompilesEverySize) {
  auto compiled = compile([](const Tensor& x) { return sigmoid(x) * x; }, CompileOptions{.dynamic = false});
  const uint64_t seed = FreshSeed();
  for (int64_t rows : {3, 4, 6}) {
    Tensor x = randn({rows, 52}, Device::cpu(), seed + rows);
    const auto xv = x.to_double_vector();
    std::vector<double> want;
    for (double v : xv) want.push_back(v / (1 + std::exp(-v)));
    ExpectClose(compiled(x).to_vector(), want, 1e-5);
  }
  EXPECT_EQ(compiled.stats().plan_compiles, 3);
  EXPECT_THAT(compiled.explain(), Not(HasSubstr("run-time size")));
}

TEST(DynamicShapesTest, AReducedDimStaysCompiledInAndEachRowLengthRecompiles) {
  auto compiled = compile(ManualSoftmax);
  const uint64_t seed = FreshSeed();
  for (int64_t cols : {40, 56, 88}) {
    Tensor x = randn({9, cols}, Device::cpu(), seed + cols);
    ExpectClose(compiled(x).to_vector(), RowSoftmaxRef(x), 1e-5);
  }
  // The row length is compiled into reductions: no plan serves two lengths.
  EXPECT_EQ(compiled.stats().plan_compiles, 3);
  EXPECT_THAT(compiled.explain(), Not(HasSubstr("run-time size")));
  // explain() says which node keeps the dim static, and why.
  EXPECT_THAT(compiled.explain(), HasSubstr("input 0 dim 1 (size 88) stays static: node"));
  EXPECT_THAT(compiled.explain(), HasSubstr("a reduction's row length"));
}

TEST(DynamicShapesTest, DynamicRowsOfAReductionAndAnInnerPointwiseDim) {
  auto rows = compile(ManualSoftmax);
  auto inner = compile([](const Tensor& x) { return tanh(x) + 1.0; });
  const uint64_t seed = FreshSeed();
  for (int64_t n : {10, 17, 300}) {
    Tensor x = randn({n, 76}, Device::cpu(), seed + n);
    ExpectClose(rows(x).to_vector(), RowSoftmaxRef(x), 1e-5);
    Tensor z = randn({6, n}, Device::cpu(), seed + n + 1000);  // contiguous: [6, n] is one run of 6n
    std::vector<double> want;
    for (double v : z.to_double_vector()) want.push_back(std::tanh(v) + 1);
    ExpectClose(inner(z).to_vector(), want, 1e-5);
  }
  EXPECT_EQ(rows.stats().plan_compiles, 2);
  EXPECT_EQ(inner.stats().plan_compiles, 2);
  EXPECT_THAT(inner.explain(), HasSubstr("run-time size: s0 = input 0 dim 1"));
}

// Transposed, the dynamic dim is no longer outermost: the index math divides
// by its size, which the kernel takes as an argument (fb_s0), so one plan
// serves every later size. A stride that is the size (x.t() of a [20, n]
// argument steps n along its rows) is compiled in: such a dim stays static
// rather than reusing a kernel made for another size.
void DynamicSizeInTheIndexMath(Device device) {
  auto divides = compile([](const Tensor& x) { return (x.transpose(0, 1) * 2.0).contiguous(); });
  auto strides = compile([](const Tensor& x) { return (x.transpose(0, 1) * 2.0).contiguous(); });
  const uint64_t seed = FreshSeed();
  for (int64_t n : {3, 5, 8, 13}) {
    SCOPED_TRACE(testing::Message() << "n " << n);
    Tensor x = randn({n, 20}, device, seed + n);
    const auto xv = x.to_double_vector();
    std::vector<double> want(xv.size());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < 20; ++j) want[j * n + i] = 2 * xv[i * 20 + j];
    }
    Tensor y = divides(x);
    ASSERT_EQ(y.shape(), (Shape{20, n}));
    ExpectClose(y.to_vector(), want, 1e-6);

    Tensor z = randn({20, n}, device, seed + 100 + n);
    const auto zv = z.to_double_vector();
    std::vector<double> want_t(zv.size());
    for (int64_t i = 0; i < 20; ++i) {
      for (int64_t j = 0; j < n; ++j) want_t[j * 20 + i] = 2 * zv[i * n + j];
    }
    ExpectClose(strides(z).to_vector(), want_t, 1e-6);
  }
  EXPECT_EQ(divides.stats().plan_compiles, 2) << divides.explain();
  ASSERT_EQ(divides.kernels().size(), 1u);
  EXPECT_THAT(divides.kernels()[0].source, HasSubstr("% fb_s0"));
  EXPECT_THAT(divides.explain(), HasSubstr("run-time size: s0 = input 0 dim 0"));
  EXPECT_EQ(strides.stats().plan_compiles, 4) << strides.explain();

  // Two run-time sizes in one index: a buffer sliced to [:, :n, :m] (n and
  // m grow apart, so they are two symbols) divides by both.
  const Tensor buffer = randn({3, 24, 24}, device, seed + 500);
  auto sliced = compile([&](const Tensor& x) {
    return x * buffer.narrow(1, 0, x.size(1)).narrow(2, 0, x.size(2)) + 1.0;
  });
  const std::vector<double> bv = buffer.to_double_vector();
  for (auto [n, m] : {std::pair<int64_t, int64_t>{4, 9}, {5, 11}, {7, 12}, {9, 17}, {3, 23}}) {
    SCOPED_TRACE(testing::Message() << "n " << n << ", m " << m);
    Tensor x = randn({3, n, m}, device, seed + 600 + n);
    const auto xv = x.to_double_vector();
    std::vector<double> want(xv.size());
    for (int64_t a = 0; a < 3; ++a) {
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < m; ++j) want[(a * n + i) * m + j] = xv[(a * n + i) * m + j] * bv[(a * 24 + i) * 24 + j] + 1;
      }
    }
    ExpectClose(sliced(x).to_vector(), want, 1e-6);
  }
  EXPECT_EQ(sliced.stats().plan_compiles, 2) << sliced.explain();
  ASSERT_EQ(sliced.kernels().size(), 1u);
  EXPECT_THAT(sliced.kernels()[0].source, HasSubstr("% fb_s0"));
  EXPECT_THAT(sliced.kernels()[0].source, HasSubstr("% fb_s1"));
}

TEST(DynamicShapesTest, DimsTheIndexMathDividesByAreKernelArguments) { DynamicSizeInTheIndexMath(Device::cpu()); }

// A reshape that merges a run-time dim with fixed ones ([2, T, 64] as
// [2 T, 64], as `linear` flattens its rows) makes a dim of twice the size;
// one that splits it back gives T again: one plan serves every T.
void ReshapesKeepRunTimeSizes(Device device) {
  const uint64_t seed = FreshSeed();
  const Tensor w = randn({64}, device, seed);
  auto f = compile([&](const Tensor& x) {  // x: [2, T, 64]
    const int64_t t = x.size(1);
    const Tensor rows = x.view({2 * t, 64});
    const Tensor normed = rows * rsqrt(mean(rows * rows, -1, true) + 1e-6) * w;
    return normed.view({2, t, 64}) + x;
  });
  const std::vector<double> wv = w.to_double_vector();
  for (int64_t t : {5, 6, 9, 12, 17}) {
    SCOPED_TRACE(testing::Message() << "T " << t);
    const Tensor x = randn({2, t, 64}, device, seed + t);
    const std::vector<double> xv = x.to_double_vector();
    std::vector<double> want(xv.size());
    for (int64_t r = 0; r < 2 * t; ++r) {
      double ss = 0;
      for (int64_t j = 0; j < 64; ++j) ss += xv[r * 64 + j] * xv[r * 64 + j];
      const double scale = 1 / std::sqrt(ss / 64 + 1e-6);
      for (int64_t j = 0; j < 64; ++j) want[r * 64 + j] = xv[r * 64 + j] * scale * wv[j] + xv[r * 64 + j];
    }
    const Tensor got = f(x);
    ASSERT_EQ(got.shape(), (Shape{2, t, 64}));
    ExpectClose(got.to_vector(), want, 1e-5);
  }
  EXPECT_EQ(f.stats().plan_compiles, 2) << f.explain();
  // The argument is read twice, as [2 T, 64] (input 0) and as [2, T, 64].
  EXPECT_THAT(f.explain(), HasSubstr("run-time size: s0 = input 2 dim 1"));
}

TEST(DynamicShapesTest, ReshapesKeepRunTimeSizes) { ReshapesKeepRunTimeSizes(Device::cpu()); }

// Token and position embeddings of [2, T] ids, normalized per row: the
// kernel reads the ids at b * T + t and the positions at t, with T a kernel
// argument (IndexExpr times a run-time size; i / T * T + i % T folds to i),
// so one plan serves every T.
void EmbeddingRowsWithARunTimeLength(Device device) {
  const uint64_t seed = FreshSeed();
  const int64_t vocab = 11, width = 48;
  const Tensor table = randn({vocab, width}, device, seed), positions = randn({32, width}, device, seed + 1);
  auto f = compile([&](const Tensor& ids) {  // [2, T]
    const Tensor x = embedding(ids, table) + embedding(arange(ids.size(1), device), positions);
    return x * rsqrt(mean(x * x, -1, true) + 1e-5);
  });
  const std::vector<double> tv = table.to_double_vector(), pv = positions.to_double_vector();
  std::mt19937_64 rng(seed);
  for (int64_t t : {3, 4, 7, 12, 20, 31}) {
    SCOPED_TRACE(testing::Message() << "T " << t);
    std::vector<int64_t> ids(2 * t);
    for (int64_t& id : ids) id = static_cast<int64_t>(rng() % vocab);
    std::vector<double> want(2 * t * width);
    for (int64_t r = 0; r < 2 * t; ++r) {
      double ss = 0;
      for (int64_t j = 0; j < width; ++j) {
        const double v = tv[ids[r] * width + j] + pv[(r % t) * width + j];
        want[r * width + j] = v;
        ss += v * v;
      }
      for (int64_t j = 0; j < width; ++j) want[r * width + j] /= std::sqrt(ss / width + 1e-5);
    }
    ExpectClose(f(Tensor::from_vector(ids, {2, t}, device)).to_vector(), want, 1e-5);
  }
  EXPECT_EQ(f.stats().plan_compiles, 2) << f.explain();
  ASSERT_EQ(f.kernels().size(), 1u);
  EXPECT_THAT(f.kernels()[0].source, HasSubstr("fb_s0"));
}

TEST(DynamicShapesTest, EmbeddingRowsWithARunTimeLength) { EmbeddingRowsWithARunTimeLength(Device::cpu()); }

TEST(DynamicShapesCudaTest, EmbeddingRowsWithARunTimeLength) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  EmbeddingRowsWithARunTimeLength(Device::cuda(0));
}

TEST(DynamicShapesCudaTest, ReshapesKeepRunTimeSizes) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  ReshapesKeepRunTimeSizes(Device::cuda(0));
}

TEST(DynamicShapesCudaTest, DimsTheIndexMathDividesByAreKernelArguments) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  DynamicSizeInTheIndexMath(Device::cuda(0));
}

TEST(DynamicShapesTest, EqualDynamicSizesShareASymbolAndBroadcastStaysRight) {
  auto compiled = compile([](const Tensor& x, const Tensor& y, const Tensor& row) { return x * y + row; });
  const uint64_t seed = FreshSeed();
  for (int64_t n : {4, 9, 21}) {
    Tensor x = randn({n, 44}, Device::cpu(), seed + n), y = randn({n, 44}, Device::cpu(), seed + n + 1);
    Tensor row = randn({1, 44}, Device::cpu(), seed + n + 2);
    const auto xv = x.to_double_vector(), yv = y.to_double_vector(), rv = row.to_double_vector();
    std::vector<double> want(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) want[i] = xv[i] * yv[i] + rv[i % 44];
    ExpectClose(compiled(x, y, row).to_vector(), want, 1e-6);
  }
  EXPECT_EQ(compiled.stats().plan_compiles, 2);
  EXPECT_THAT(compiled.explain(), HasSubstr("s0 = input 0 dim 0 = input 1 dim 0"));
}

TEST(DynamicShapesTest, SizesZeroAndOneStayCompiledInAndWork) {
  auto compiled = compile([](const Tensor& x, const Tensor& b) { return sum(x * b, -1); });
  const uint64_t seed = FreshSeed();
  Tensor b = randn({1, 28}, Device::cpu(), seed);
  const auto bv = b.to_double_vector();
  for (int64_t n : {0, 1, 6, 1, 0, 11}) {
    Tensor x = randn({n, 28}, Device::cpu(), seed + n + 1);
    Tensor y = compiled(x, b);
    ASSERT_EQ(y.shape(), (Shape{n}));
    const auto xv = x.to_double_vector();
    std::vector<double> want(n, 0.0);
    for (int64_t i = 0; i < n * 28; ++i) want[i / 28] += xv[i] * bv[i % 28];
    ExpectClose(y.to_vector(), want, 1e-5);
  }
  // 0 and 1 are compiled once each; from 6 on the row count is a run-time size.
  EXPECT_EQ(compiled.stats().plan_compiles, 3);
}

TEST(DynamicShapesTest, TheRecompileLimitFallsBackToEagerWithTheSameResults) {
  auto compiled = compile([](const Tensor& x) { return relu(x) * 0.5 + x; },
                          CompileOptions{.dynamic = false, .recompile_limit = 2});
  const uint64_t seed = FreshSeed();
  for (int64_t n : {31, 32, 33, 34, 35}) {
    Tensor x = randn({n}, Device::cpu(), seed + n);
    std::vector<double> want;
    for (double v : x.to_double_vector()) want.push_back(std::max(v, 0.0) * 0.5 + v);
    ExpectClose(compiled(x).to_vector(), want, 1e-6);
  }
  const CompileStats stats = compiled.stats();
  EXPECT_EQ(stats.calls, 5);
  EXPECT_EQ(stats.plan_compiles, 3);  // the first compile and two recompiles
  EXPECT_EQ(stats.eager_calls, 2);
  EXPECT_THAT(compiled.explain(), HasSubstr("recompile limit (2) reached: 2 call(s) ran eagerly"));
}

// A GEMM and an attention read their sizes at run time: the rows of x @ w
// and the sequence of a causal SDPA (nanoGPT's generate(), T growing by one)
// stay dynamic through them, one plan for every later size, each size right.
TEST(DynamicShapesTest, SizesStayDynamicThroughMatmulAndAttention) {
  const uint64_t seed = FreshSeed();
  const int64_t heads = 2, hd = 64, width = heads * hd;
  const Tensor w = randn({width, 3 * width}, Device::cpu(), seed) * 0.05;
  auto attend = [&](const Tensor& x) {  // x: [T, width]
    const Tensor qkv = matmul(x, w);       // [T, 3 width]
    auto head = [&](int part) {
      return qkv.narrow(1, part * width, width).view({x.size(0), heads, hd}).transpose(0, 1);  // [heads, T, hd]
    };
    return scaled_dot_product_attention(head(0), head(1), head(2), Tensor(), 0.0, true);
  };
  auto compiled = compile(attend);
  const std::vector<int64_t> lengths = {5, 6, 7, 8, 9, 12};
  for (size_t call = 0; call < lengths.size(); ++call) {
    SCOPED_TRACE(testing::Message() << "T " << lengths[call]);
    const Tensor x = randn({lengths[call], width}, Device::cpu(), seed + call + 1);
    const Tensor got = compiled(x);
    // float64 attention over the eager GEMM's q, k and v.
    const Tensor qkv = matmul(x, w);
    auto head = [&](int part) {
      return qkv.narrow(1, part * width, width).view({x.size(0), heads, hd}).transpose(0, 1).contiguous();
    };
    const test_util::Expected want = test_util::AttentionRef(
        head(0), head(1), head(2), 1 / std::sqrt(64.0), [](int64_t, int64_t i, int64_t j) { return j <= i; },
        [](int64_t, int64_t, int64_t) { return 0.0; });
    EXPECT_TRUE(test_util::CloseToAttention(got, want, "compiled"));
  }
  // The first length compiles; the second recompiles with T at run time;
  // every later one reuses that plan.
  EXPECT_EQ(compiled.stats().plan_compiles, 2) << compiled.explain();

  // With a batch dim the heads' views of an argument step over whole
  // sequences (a batch stride of T * 3 width): that stride follows T, so the
  // second length's plan serves every later one, each right.
  auto batched = compile([&](const Tensor& qkv) {  // [2, T, 3 width]
    auto head = [&](int part) {
      return qkv.narrow(2, part * width, width).view({2, qkv.size(1), heads, hd}).transpose(1, 2);
    };
    return scaled_dot_product_attention(head(0), head(1), head(2), Tensor(), 0.0, true);
  });
  for (int64_t t : {5, 6, 7, 9}) {
    SCOPED_TRACE(testing::Message() << "batched T " << t);
    const Tensor qkv = randn({2, t, 3 * width}, Device::cpu(), seed + 100 + t) * 0.3;
    auto head = [&](int part) {
      return qkv.narrow(2, part * width, width).view({2, t, heads, hd}).transpose(1, 2).contiguous();
    };
    const test_util::Expected want = test_util::AttentionRef(
        head(0), head(1), head(2), 1 / std::sqrt(64.0), [](int64_t, int64_t i, int64_t j) { return j <= i; },
        [](int64_t, int64_t, int64_t) { return 0.0; });
    EXPECT_TRUE(test_util::CloseToAttention(batched(qkv), want, "batched"));
  }
  EXPECT_EQ(batched.stats().plan_compiles, 2) << batched.explain();
}

// Attention written by hand with a causal mask made in the function is
// recognized before symbols are found, so its softmax's row length does not
// pin T: one plan for the first length, one for every later one.
TEST(DynamicShapesTest, HandWrittenAttentionKeepsTheSequenceDynamic) {
  const uint64_t seed = FreshSeed();
  const int64_t heads = 2, hd = 64;
  auto attend = [](const Tensor& q, const Tensor& k, const Tensor& v) {  // [heads, T, hd]
    const int64_t t = q.size(1);
    const Tensor causal = tril(ones({t, t}));
    const Tensor scores = matmul(q, k.transpose(-2, -1)) * (1 / std::sqrt(64.0));
    return matmul(softmax(masked_fill(scores, eq(causal, 0.0), -INFINITY), -1), v);
  };
  auto compiled = compile(attend);
  for (int64_t t : {5, 6, 7, 9, 12}) {
    SCOPED_TRACE(testing::Message() << "T " << t);
    const Tensor q = randn({heads, t, hd}, Device::cpu(), seed + t);
    const Tensor k = randn({heads, t, hd}, Device::cpu(), seed + 100 + t);
    const Tensor v = randn({heads, t, hd}, Device::cpu(), seed + 200 + t);
    const test_util::Expected want = test_util::AttentionRef(
        q, k, v, 1 / std::sqrt(64.0), [](int64_t, int64_t i, int64_t j) { return j <= i; },
        [](int64_t, int64_t, int64_t) { return 0.0; });
    EXPECT_TRUE(test_util::CloseToAttention(compiled(q, k, v), want, "compiled"));
  }
  EXPECT_THAT(compiled.explain(), HasSubstr("attention"));
  EXPECT_EQ(compiled.stats().plan_compiles, 2) << compiled.explain();
}

TEST(DynamicShapesTest, ExplainTellsArgumentsFromGlobals) {
  Tensor weight = randn({kCols}, Device::cpu(), FreshSeed());
  auto compiled = compile([&](const Tensor& x) { return x * weight; });
  compiled(randn({3, kCols}, Device::cpu(), FreshSeed()));
  const std::string explain = compiled.explain();
  EXPECT_THAT(explain, HasSubstr("= argument 0: float32[3, 136]"));
  // The weight is read broadcast to the rows: a view of the global's storage.
  EXPECT_THAT(explain, HasSubstr("= global tensor (not an argument): float32[3, 136] strides [0, 1]"));
}

TEST(DynamicShapesCudaTest, AutomaticDynamicOnTheGpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  AutomaticDynamicBatchDim(Device::cuda(0));
  auto compiled = compile(ManualSoftmax);
  const uint64_t seed = FreshSeed();
  for (int64_t rows : {64, 100, 4097, 3}) {
    Tensor x = randn({rows, 1000}, Device::cuda(0), seed + rows);
    ExpectClose(compiled(x).to_vector(), RowSoftmaxRef(x), 1e-5);
  }
  EXPECT_EQ(compiled.stats().plan_compiles, 2);
  ASSERT_EQ(compiled.kernels().size(), 1u);
  EXPECT_THAT(compiled.kernels()[0].source, HasSubstr("long long fb_n"));
}

}  // namespace
}  // namespace fusebox
