// Factories inside compile() (zeros, ones, full, arange) are part of the
// graph, as torch.compile traces them: a constant or positions computed by
// the kernels that read them, no buffer made on the host per call. Values
// against eager and float64, kernel counts and minimal bytes, on the CPU and
// on CUDA (skipped without a device).
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace fusebox {
namespace {


class FactoryCaptureTest : public test_util::OnEachDevice {
 protected:
  Tensor Random(const Shape& shape) const {
    return test_util::RandomTensor(shape, DType::kFloat32, test_util::Domain::kAny, device());
  }
};

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
  }
}

// x + ones * 3 + zeros + full(2.5): one kernel that reads x alone (its
// minimal bytes: x in, the result out).
TEST_P(FactoryCaptureTest, ConstantsFuseIntoTheirConsumer) {
  const Shape shape{6, 33};
  const Tensor x = Random(shape);
  auto f = compile([&](const Tensor& t) {
    return t + ones(shape, device()) * 3.0 + zeros(shape, device()) + full(shape, 2.5, device());
  });
  const Tensor got = f(x);
  std::vector<double> want = x.to_double_vector();
  for (double& v : want) v += 5.5;
  ExpectNear(got.to_double_vector(), want, 1e-6);
  ASSERT_EQ(f.kernels().size(), 1u) << f.explain();
  EXPECT_EQ(f.kernels()[0].bytes, 2 * x.numel() * 4) << f.kernels()[0].source;
}

// Compiled arange is the eager one exactly: int64 beyond float32's integers,
// negative steps, float results, and positions offset by a tensor's values.
TEST_P(FactoryCaptureTest, ArangeMatchesEagerExactly) {
  const int64_t big = (int64_t{1} << 40) + 3;
  const Tensor x = Random({7});
  auto f = compile([&](const Tensor& t) {
    return std::make_tuple(arange(7, device()), arange(big, big + 21, 3, device()), arange(5, -6, -2, device()),
                           arange(2, 9, 1, device(), DType::kFloat32) * t);
  });
  const auto [a, b, c, d] = f(x);
  EXPECT_EQ(a.dtype(), DType::kInt64);
  EXPECT_EQ(a.to_double_vector(), arange(7).to_double_vector());
  EXPECT_EQ(b.to_double_vector(), arange(big, big + 21, 3).to_double_vector());
  EXPECT_EQ(b.to_double_vector()[6], static_cast<double>(big + 18));  // exact below 2^53
  EXPECT_EQ(c.to_double_vector(), (std::vector<double>{5, 3, 1, -1, -3, -5}));
  std::vector<double> want = x.to_double_vector();
  for (size_t i = 0; i < want.size(); ++i) want[i] *= 2.0 + static_cast<double>(i);
  ExpectNear(d.to_double_vector(), want, 1e-6);
}

// A factory's value returned as it is, used as a GEMM operand, and written
// in place before it is read.
TEST_P(FactoryCaptureTest, ReturnedMultipliedAndMutatedFactories) {
  const Tensor x = Random({5, 8});
  auto f = compile([&](const Tensor& t) {
    Tensor acc = zeros({5, 8}, device());
    acc.add_(t);
    return std::make_tuple(full({3, 4}, -1.25, device(), DType::kBFloat16), matmul(t, ones({8, 3}, device())), acc * 2.0);
  });
  const auto [filled, sums, doubled] = f(x);
  EXPECT_EQ(filled.shape(), (Shape{3, 4}));
  EXPECT_EQ(filled.dtype(), DType::kBFloat16);
  EXPECT_EQ(filled.to_double_vector(), std::vector<double>(12, -1.25));
  const std::vector<double> xv = x.to_double_vector();
  std::vector<double> want_sums(15, 0.0), want_doubled(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    for (int j = 0; j < 3; ++j) want_sums[i / 8 * 3 + j] += xv[i];
    want_doubled[i] = 2 * xv[i];
  }
  ExpectNear(sums.to_double_vector(), want_sums, 1e-5);
  ExpectNear(doubled.to_double_vector(), want_doubled, 1e-6);
  // The eager result of a factory stays concrete.
  EXPECT_EQ(ones({2}, device()).to_double_vector(), (std::vector<double>{1, 1}));
}

// Causal SDPA on the math path (float32): its mask comes from the graph, so
// the softmax reads no bool buffer (it was a T x T ones tensor made on the host
// per call and per layer).
TEST_P(FactoryCaptureTest, CausalMaskIsComputedInTheKernel) {
  const Tensor q = Random({2, 3, 9, 8}), k = Random({2, 3, 9, 8}), v = Random({2, 3, 9, 8});
  auto f = compile([](const Tensor& a, const Tensor& b, const Tensor& c) {
    return scaled_dot_product_attention(a, b, c, Tensor(), 0.0, /*is_causal=*/true);
  });
  const Tensor got = f(q, k, v);
  const Tensor want = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true);
  ExpectNear(got.to_double_vector(), want.to_double_vector(), 1e-5);
  // The softmax kernel's minimal bytes: the scores in, the weights out.
  int softmax_kernels = 0;
  for (const KernelInfo& kernel : f.kernels()) {
    if (kernel.name.find("exp") == std::string::npos) continue;
    ++softmax_kernels;
    EXPECT_EQ(kernel.bytes, 2 * (2 * 3 * 9 * 9) * 4) << kernel.name;
  }
  EXPECT_EQ(softmax_kernels, 1) << f.explain();
}

INSTANTIATE_TEST_SUITE_P(Devices, FactoryCaptureTest, ::testing::Values(false, true), test_util::OnEachDevice::Name);

}  // namespace
}  // namespace fusebox
