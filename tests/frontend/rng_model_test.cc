// Random ops where models use them: nn::Dropout, attention's dropout_p,
// dropout fused into reductions (softmax's epilogue, row and column sums),
// replayed calls (a fresh draw each), dynamic shapes, and iota itself; each
// against a float64 reference whose mask comes from the host Philox, on the
// CPU and (skipping without a device) on CUDA.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "graph/philox.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace fusebox {
namespace {

using test_util::AllClose;
using test_util::ErrorOf;
using test_util::Expected;
using test_util::RandomTensor;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr DType kF32 = DType::kFloat32;

// Element i of a random op's result after manual_seed(seed), its draw `offset`-th.
bool Kept(size_t i, double p, uint64_t seed, uint64_t offset) { return graph::PhiloxUniform(i, seed, offset) >= p; }

// `values` (row-major over `shape`) dropped with the op's mask, in float64.
std::vector<double> Dropped(std::vector<double> values, double p, uint64_t seed, uint64_t offset) {
  for (size_t i = 0; i < values.size(); ++i) values[i] = Kept(i, p, seed, offset) ? values[i] / (1 - p) : 0.0;
  return values;
}

Expected F32(const Shape& shape, std::vector<double> values) {
  for (double& v : values) v = static_cast<float>(v);
  return {.shape = shape, .dtype = kF32, .values = std::move(values)};
}

// Every element within `tol` (absolute + relative) of `want`.
::testing::AssertionResult Near(const Tensor& got, const std::vector<double>& want, double tol) {
  const std::vector<double> v = got.to_double_vector();
  if (v.size() != want.size()) return ::testing::AssertionFailure() << v.size() << " values, want " << want.size();
  for (size_t i = 0; i < v.size(); ++i) {
    if (!(std::fabs(v[i] - want[i]) <= tol * (1 + std::fabs(want[i])))) {
      return ::testing::AssertionFailure() << "element " << i << ": " << v[i] << ", want " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

class RngModelTest : public test_util::OnEachDevice {};

TEST_P(RngModelTest, DropoutModuleFollowsItsTrainingFlag) {
  nn::Dropout drop(0.4);
  EXPECT_TRUE(drop.training);
  const Tensor x = RandomTensor({16, 32}, kF32, test_util::Domain::kNonZero, device());
  manual_seed(31);
  EXPECT_TRUE(AllClose(drop(x), F32(x.shape(), Dropped(x.to_double_vector(), 0.4, 31, 0)), "nn::Dropout training"));
  drop.training = false;  // model.eval()
  EXPECT_EQ(&drop(x).impl(), &x.impl());
}

// softmax(q k^T * scale) dropped, then @ v: the mask is over the weights
// [B, H, L, S] in row-major order, the op's first draw after manual_seed.
std::vector<double> AttentionRef(const Tensor& q, const Tensor& k, const Tensor& v, double p, uint64_t seed) {
  const int64_t bh = q.shape()[0] * q.shape()[1], l = q.shape()[2], e = q.shape()[3], s = k.shape()[2],
                ev = v.shape()[3];
  const std::vector<double> qv = q.to_double_vector(), kv = k.to_double_vector(), vv = v.to_double_vector();
  std::vector<double> weights(bh * l * s), out(bh * l * ev, 0.0);
  for (int64_t b = 0; b < bh; ++b) {
    for (int64_t i = 0; i < l; ++i) {
      double* row = &weights[(b * l + i) * s];
      double max = -INFINITY, sum = 0;
      for (int64_t j = 0; j < s; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < e; ++c) dot += qv[(b * l + i) * e + c] * kv[(b * s + j) * e + c];
        row[j] = dot / std::sqrt(static_cast<double>(e));
        max = std::max(max, row[j]);
      }
      for (int64_t j = 0; j < s; ++j) sum += (row[j] = std::exp(row[j] - max));
      for (int64_t j = 0; j < s; ++j) row[j] /= sum;
    }
  }
  weights = Dropped(std::move(weights), p, seed, 0);
  for (int64_t b = 0; b < bh; ++b) {
    for (int64_t i = 0; i < l; ++i) {
      for (int64_t j = 0; j < s; ++j) {
        for (int64_t c = 0; c < ev; ++c) out[(b * l + i) * ev + c] += weights[(b * l + i) * s + j] * vv[(b * s + j) * ev + c];
      }
    }
  }
  return out;
}

TEST_P(RngModelTest, AttentionDropoutIsReproducibleAndMatchesTheReference) {
  const Tensor q = RandomTensor({2, 3, 8, 16}, kF32, test_util::Domain::kAny, device());
  const Tensor k = RandomTensor({2, 3, 10, 16}, kF32, test_util::Domain::kAny, device());
  const Tensor v = RandomTensor({2, 3, 10, 12}, kF32, test_util::Domain::kAny, device());
  auto attend = [](const Tensor& a, const Tensor& b, const Tensor& c) {
    return scaled_dot_product_attention(a, b, c, Tensor(), 0.1);
  };
  const std::vector<double> want = AttentionRef(q, k, v, 0.1, 42);
  manual_seed(42);
  const Tensor eager = attend(q, k, v);
  EXPECT_TRUE(Near(eager, want, 1e-4));
  auto compiled = compile(attend);
  for (int call = 0; call < 2; ++call) {
    manual_seed(42);
    EXPECT_TRUE(Near(compiled(q, k, v), want, 1e-4)) << "call " << call;
  }
  EXPECT_FALSE(Near(compiled(q, k, v), want, 1e-4));  // the next draw drops others
  // Causal attention with dropout compiles too (tril's mask from iota).
  manual_seed(42);
  const Tensor causal = scaled_dot_product_attention(q, k, v, Tensor(), 0.5, /*is_causal=*/true);
  EXPECT_EQ(causal.shape(), (Shape{2, 3, 8, 12}));
  for (double x : causal.to_double_vector()) EXPECT_TRUE(std::isfinite(x));
  EXPECT_THAT(ErrorOf([&] { scaled_dot_product_attention(q, k, v, Tensor(), 1.5); }),
              HasSubstr("dropout_p must be in [0, 1], got 1.5"));
}

// Where the fused attention kernel would run (bf16, head dim 64), dropout_p
// > 0 still drops weights: it takes the math path, and p = 0 the fused node.
TEST_P(RngModelTest, AttentionDropoutLeavesTheFusedKernel) {
  const DType bf16 = DType::kBFloat16;
  const Tensor q = RandomTensor({1, 2, 16, 64}, bf16, test_util::Domain::kAny, device());
  const Tensor k = RandomTensor({1, 2, 16, 64}, bf16, test_util::Domain::kAny, device());
  const Tensor v = RandomTensor({1, 2, 16, 64}, bf16, test_util::Domain::kAny, device());
  auto names = [](const std::vector<KernelInfo>& ks) {
    std::string all;
    for (const KernelInfo& ki : ks) all += ki.name + " ";
    return all;
  };
  auto with_dropout = compile([](const Tensor& a, const Tensor& b, const Tensor& c) {
    return scaled_dot_product_attention(a, b, c, Tensor(), 0.5);
  });
  auto without = compile([](const Tensor& a, const Tensor& b, const Tensor& c) {
    return scaled_dot_product_attention(a, b, c, Tensor(), 0.0);
  });
  manual_seed(7);
  const Tensor dropped = with_dropout(q, k, v);
  const Tensor kept = without(q, k, v);
  EXPECT_THAT(names(with_dropout.kernels()), Not(HasSubstr("attention"))) << names(with_dropout.kernels());
  EXPECT_THAT(names(without.kernels()), HasSubstr("attention")) << names(without.kernels());
  // Half the weights dropped (the rest doubled): the outputs differ.
  const std::vector<double> a = dropped.to_double_vector(), b = kept.to_double_vector();
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(a[i] - b[i]));
  EXPECT_GT(diff, 0.05);
}

// Dropout inside reduction kernels: in softmax's epilogue, before a row sum
// and before a column sum; each one kernel where fusion allows.
TEST_P(RngModelTest, DropoutFusesIntoReductions) {
  const Tensor x = RandomTensor({37, 50}, kF32, test_util::Domain::kAny, device());
  const std::vector<double> xv = x.to_double_vector();
  std::vector<double> softmax_ref(xv.size());
  for (int64_t r = 0; r < 37; ++r) {
    double max = -INFINITY, sum = 0;
    for (int64_t c = 0; c < 50; ++c) max = std::max(max, xv[r * 50 + c]);
    for (int64_t c = 0; c < 50; ++c) sum += std::exp(xv[r * 50 + c] - max);
    for (int64_t c = 0; c < 50; ++c) softmax_ref[r * 50 + c] = std::exp(xv[r * 50 + c] - max) / sum;
  }
  auto after_softmax = compile([](const Tensor& t) { return dropout(softmax(t, -1), 0.3); });
  manual_seed(5);
  EXPECT_TRUE(Near(after_softmax(x), Dropped(softmax_ref, 0.3, 5, 0), 1e-5));
  EXPECT_EQ(after_softmax.kernels().size(), 1u) << after_softmax.explain();

  const std::vector<double> dropped = Dropped(xv, 0.6, 6, 0);
  std::vector<double> rows(37, 0.0), cols(50, 0.0);
  for (int64_t r = 0; r < 37; ++r) {
    for (int64_t c = 0; c < 50; ++c) {
      rows[r] += dropped[r * 50 + c];
      cols[c] += dropped[r * 50 + c];
    }
  }
  auto row_sum = compile([](const Tensor& t) { return sum(dropout(t, 0.6), -1); });
  auto col_sum = compile([](const Tensor& t) { return sum(dropout(t, 0.6), 0); });
  manual_seed(6);
  EXPECT_TRUE(Near(row_sum(x), rows, 1e-5));
  manual_seed(6);
  EXPECT_TRUE(Near(col_sum(x), cols, 1e-5));
  EXPECT_EQ(row_sum.kernels().size(), 1u) << row_sum.explain();
}

// A replayed call draws a fresh state as a traced call would: after the same
// manual_seed, replayed calls give eager's sequence, never a repeat.
TEST_P(RngModelTest, ReplayDrawsFreshNumbersEachCall) {
  const Tensor x = RandomTensor({300}, kF32, test_util::Domain::kNonZero, device());
  auto fn = [](const Tensor& t) { return dropout(t, 0.5) * 2.0; };
  manual_seed(21);
  std::vector<std::vector<double>> eager;
  for (int k = 0; k < 5; ++k) eager.push_back(fn(x).to_double_vector());
  auto replayed = compile(fn, CompileOptions{.replay = true});
  manual_seed(21);
  for (int k = 0; k < 5; ++k) EXPECT_EQ(replayed(x).to_double_vector(), eager[k]) << "call " << k;
  EXPECT_GE(replayed.stats().replays, 2) << replayed.explain();
  EXPECT_NE(eager[3], eager[4]);
  EXPECT_THAT(replayed.explain(), HasSubstr("random generator state"));
}

// Dynamic sizes: the positions stay row-major whatever the run-time size.
TEST_P(RngModelTest, DropoutWithDynamicShapes) {
  auto f = compile([](const Tensor& t) { return dropout(t, 0.5); }, CompileOptions{.dynamic = true});
  for (int64_t n : {5, 9, 13}) {
    const Tensor x = RandomTensor({n, 48}, kF32, test_util::Domain::kNonZero, device());
    manual_seed(100 + n);
    EXPECT_TRUE(AllClose(f(x), F32(x.shape(), Dropped(x.to_double_vector(), 0.5, 100 + n, 0)), "dynamic dropout"));
  }
}

TEST_P(RngModelTest, IotaCountsPositionsEagerAndCompiled) {
  for (const Shape& shape : {Shape{}, Shape{0}, Shape{7}, Shape{3, 4}, Shape{2, 0, 3}, Shape{2, 3, 5}}) {
    const Tensor t = frontend::Iota(shape, device());
    EXPECT_EQ(t.shape(), shape);
    EXPECT_EQ(t.dtype(), DType::kInt64);
    const std::vector<double> v = t.to_double_vector();
    ASSERT_EQ(static_cast<int64_t>(v.size()), Numel(shape));
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], static_cast<double>(i));
  }
  const Tensor x = RandomTensor({6, 9}, kF32, test_util::Domain::kAny, device());
  auto f = compile([](const Tensor& a) { return a + frontend::Iota({9}, a.device()).to(DType::kFloat32); });
  const std::vector<double> got = f(x).to_double_vector(), xv = x.to_double_vector();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], static_cast<float>(xv[i] + static_cast<double>(i % 9)));
  EXPECT_EQ(f.kernels().size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Devices, RngModelTest, ::testing::Bool(), test_util::OnEachDevice::Name);

}  // namespace
}  // namespace fusebox
