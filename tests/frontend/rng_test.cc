// The generator inside the graph (frontend/random.h): Philox4x32-10 against
// the Random123 paper's known answers, kernels against a host reference,
// determinism after manual_seed (eager, compiled, cached), dropout's mask
// statistics and values per dtype, rand/randn, and the errors; on the CPU and
// (skipping without a device) on CUDA, whose masks must equal the CPU's.
#include <array>
#include <cmath>
#include <cstdint>
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
using test_util::RoundTo;
using ::testing::HasSubstr;

// Philox4x32-10 written again, apart from graph/philox.h, straight from the
// paper's definition: mulhilo, the round's permutation, the Weyl key bumps
// between rounds (9 of them for 10 rounds). Integers only.
std::array<uint32_t, 4> ReferencePhilox(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  auto mulhilo = [](uint32_t a, uint32_t b, uint32_t* hi) {
    const uint64_t product = static_cast<uint64_t>(a) * b;
    *hi = static_cast<uint32_t>(product >> 32);
    return static_cast<uint32_t>(product);
  };
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += 0x9E3779B9u;
      key[1] += 0xBB67AE85u;
    }
    uint32_t hi0, hi1;
    const uint32_t lo0 = mulhilo(0xD2511F53u, ctr[0], &hi0), lo1 = mulhilo(0xCD9E8D57u, ctr[2], &hi1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  }
  return ctr;
}

struct KnownAnswer {
  std::array<uint32_t, 4> ctr;
  std::array<uint32_t, 2> key;
  std::array<uint32_t, 4> out;
};

// Random123's kat_vectors for philox4x32 with 10 rounds.
constexpr KnownAnswer kKnownAnswers[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(PhiloxTest, KnownAnswerVectors) {
  for (const KnownAnswer& k : kKnownAnswers) {
    EXPECT_EQ(ReferencePhilox(k.ctr, k.key), k.out);
    const uint64_t lo = k.ctr[0] | (uint64_t{k.ctr[1]} << 32), hi = k.ctr[2] | (uint64_t{k.ctr[3]} << 32);
    EXPECT_EQ(graph::Philox4x32(lo, hi, k.key[0] | (uint64_t{k.key[1]} << 32)), k.out);
  }
}

// dropout's float64 reference for a contiguous (row-major) x whose op drew
// the state (seed, offset): element i is kept where rand >= p.
Expected DropoutRef(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  Expected e{.shape = x.shape(), .dtype = x.dtype()};
  const std::vector<double> v = x.to_double_vector();
  for (size_t i = 0; i < v.size(); ++i) {
    const bool keep = graph::PhiloxUniform(i, seed, offset) >= p;
    e.values.push_back(keep ? RoundTo(x.dtype(), v[i] * (1.0 / (1.0 - p))) : 0.0);
  }
  return e;
}

bool SameValues(const Tensor& a, const Tensor& b) { return a.to_double_vector() == b.to_double_vector(); }

class RngTest : public test_util::OnEachDevice {};

// The kernels draw what the host reference draws, at each element's
// row-major position; rand is exact, randn to float32 math accuracy.
TEST_P(RngTest, KernelsDrawTheHostReference) {
  manual_seed(1234);
  EXPECT_EQ(initial_seed(), 1234u);
  const Tensor u = rand({3, 5, 67}, device());
  const Tensor z = randn({1001}, device());
  EXPECT_EQ(u.dtype(), DType::kFloat32);
  const std::vector<double> uv = u.to_double_vector(), zv = z.to_double_vector();
  for (size_t i = 0; i < uv.size(); ++i) ASSERT_EQ(uv[i], graph::PhiloxUniform(i, 1234, 0)) << i;
  for (size_t i = 0; i < zv.size(); ++i) {
    const double want = graph::PhiloxNormal(i, 1234, 1);
    ASSERT_NEAR(zv[i], want, 2e-5 + 2e-5 * std::fabs(want)) << i;
  }
}

TEST_P(RngTest, RandAndRandnWithoutASeedFollowManualSeed) {
  manual_seed(5);
  const Tensor a = rand({1000}, device()), b = randn({1000}, device());
  const Tensor seeded = rand({1000}, device(), 99);  // host mt19937: draws nothing from the generator
  const Tensor c = rand({1000}, device());
  manual_seed(5);
  EXPECT_TRUE(SameValues(rand({1000}, device()), a));
  EXPECT_TRUE(SameValues(randn({1000}, device()), b));
  EXPECT_TRUE(SameValues(rand({1000}, device()), c));
  EXPECT_FALSE(SameValues(a, c));  // consecutive draws differ
  EXPECT_TRUE(SameValues(rand({1000}, device(), 99), seeded));
  manual_seed(6);
  EXPECT_FALSE(SameValues(rand({1000}, device()), a));
  // Sizes 0 and 0-d.
  EXPECT_EQ(rand({0}, device()).numel(), 0);
  EXPECT_EQ(randn({2, 0}, device()).shape(), (Shape{2, 0}));
  const Tensor scalar = rand({}, device());
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_GE(scalar.item(), 0.0);
}

TEST_P(RngTest, UniformAndNormalStatistics) {
  manual_seed(77);
  constexpr int64_t kN = 1 << 20;
  const std::vector<double> u = rand({kN}, device()).to_double_vector(), z = randn({kN}, device()).to_double_vector();
  double su = 0, sz = 0, szz = 0;
  for (double v : u) {
    ASSERT_TRUE(v >= 0.0 && v < 1.0) << v;
    su += v;
  }
  for (double v : z) {
    ASSERT_TRUE(std::isfinite(v));
    sz += v;
    szz += v * v;
  }
  // Within 5 standard errors: uniform mean 1/2 (sd 1/sqrt(12 n)), normal
  // mean 0 (1/sqrt(n)), variance 1 (sqrt(2/n)).
  EXPECT_NEAR(su / kN, 0.5, 5 / std::sqrt(12.0 * kN));
  EXPECT_NEAR(sz / kN, 0.0, 5 / std::sqrt(1.0 * kN));
  EXPECT_NEAR(szz / kN - (sz / kN) * (sz / kN), 1.0, 5 * std::sqrt(2.0 / kN));
}

// For each p and float dtype on ~1e6 elements: the values are the reference's
// (kept = x / (1 - p) to the dtype's rounding, dropped = 0) and the kept
// fraction is within 5 standard deviations of 1 - p.
TEST_P(RngTest, DropoutMaskStatisticsAndValues) {
  constexpr int64_t kN = 1 << 20;
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    const Tensor x = RandomTensor({kN / 512, 512}, dtype, test_util::Domain::kNonZero, device());
    for (double p : {0.1, 0.5, 0.9}) {
      SCOPED_TRACE(testing::Message() << DTypeName(dtype) << " p=" << p);
      manual_seed(2024);
      const Tensor y = dropout(x, p);
      EXPECT_EQ(y.dtype(), dtype);
      EXPECT_TRUE(AllClose(y, DropoutRef(x, p, 2024, 0), "dropout"));
      int64_t kept = 0;
      for (double v : y.to_double_vector()) kept += v != 0.0;
      const double sd = std::sqrt(p * (1 - p) / kN);
      EXPECT_NEAR(static_cast<double>(kept) / kN, 1 - p, 5 * sd);
    }
  }
}

TEST_P(RngTest, EagerAndCompiledDrawTheSameMasks) {
  const Tensor x = RandomTensor({33, 65}, DType::kFloat32, test_util::Domain::kNonZero, device());
  auto twice = compile([](const Tensor& t) {
    Tensor first = dropout(t, 0.3);  // draws in this order (make_pair's arguments have none)
    return std::make_pair(first, dropout(exp(t), 0.6));
  });
  manual_seed(11);
  const Tensor a = dropout(x, 0.3), b = dropout(exp(x), 0.6);
  EXPECT_FALSE(SameValues(a, dropout(x, 0.3)));  // consecutive calls differ
  int64_t compiles = 0;
  for (int call = 0; call < 2; ++call) {  // the first call compiles, the second reuses its plan
    manual_seed(11);
    const auto [ca, cb] = twice(x);
    EXPECT_TRUE(SameValues(ca, a)) << "call " << call;
    EXPECT_TRUE(SameValues(cb, b)) << "call " << call;
    if (call == 0) compiles = twice.stats().plan_compiles;
  }
  const auto [da, db] = twice(x);  // no manual_seed: fresh numbers, same plan
  EXPECT_FALSE(SameValues(da, a));
  EXPECT_FALSE(SameValues(db, b));
  EXPECT_EQ(twice.stats().plan_compiles, compiles);
  EXPECT_EQ(twice.stats().repeated_graphs, 2);
  manual_seed(12);
  EXPECT_FALSE(SameValues(dropout(x, 0.3), a));  // another seed, another mask
  EXPECT_TRUE(AllClose(a, DropoutRef(x, 0.3, 11, 0), "dropout after manual_seed(11)"));
}

// Inside compile() dropout fuses with its neighbours: one kernel.
TEST_P(RngTest, DropoutFusesWithPointwiseNeighbours) {
  const Tensor x = RandomTensor({64, 128}, DType::kFloat32, test_util::Domain::kAny, device());
  const Tensor y = RandomTensor({64, 128}, DType::kFloat32, test_util::Domain::kAny, device());
  auto f = compile([](const Tensor& a, const Tensor& b) { return dropout(gelu(a), 0.25) + b; });
  manual_seed(3);
  const Tensor got = f(x, y);
  ASSERT_EQ(f.kernels().size(), 1u);
  EXPECT_THAT(f.kernels()[0].name, HasSubstr("rand"));
  Expected want = DropoutRef(gelu(x), 0.25, 3, 0);
  const std::vector<double> b = y.to_double_vector();
  for (size_t i = 0; i < b.size(); ++i) want.values[i] = static_cast<float>(want.values[i] + b[i]);
  EXPECT_TRUE(AllClose(got, want, "dropout(gelu(x)) + y"));
}

// The result keeps x's layout (PyTorch's empty_like), its mask in x's memory order.
TEST_P(RngTest, DropoutOfATransposeKeepsItsLayout) {
  const Tensor base = RandomTensor({40, 24}, DType::kFloat32, test_util::Domain::kNonZero, device());
  const Tensor xt = base.t();
  manual_seed(8);
  const Tensor y = dropout(xt, 0.5);
  EXPECT_EQ(y.strides(), xt.strides());
  manual_seed(8);
  // In memory order the transposed result is the contiguous base's dropout.
  EXPECT_TRUE(AllClose(y.t(), DropoutRef(base, 0.5, 8, 0), "dropout(x.t()).t()"));
}

TEST_P(RngTest, TrivialCasesReturnXAndErrorsAreClear) {
  const Tensor x = RandomTensor({5, 7}, DType::kFloat32, test_util::Domain::kNonZero, device());
  EXPECT_EQ(&dropout(x, 0.5, /*training=*/false).impl(), &x.impl());
  EXPECT_EQ(&dropout(x, 0.0).impl(), &x.impl());
  for (double v : dropout(x, 1.0).to_double_vector()) EXPECT_EQ(v, 0.0);
  EXPECT_THAT(ErrorOf([&] { dropout(x, -0.1); }), HasSubstr("probability has to be between 0 and 1, but got -0.1"));
  EXPECT_THAT(ErrorOf([&] { dropout(x, 1.5); }), HasSubstr("but got 1.5"));
  const Tensor ints = RandomTensor({4}, DType::kInt32, test_util::Domain::kAny, device());
  EXPECT_THAT(ErrorOf([&] { dropout(ints, 0.5); }), HasSubstr("dropout: x must be a floating tensor, got int32"));
  EXPECT_THAT(ErrorOf([&] { dropout(gt(ints, 0.0), 0.5); }), HasSubstr("got bool"));
  EXPECT_THAT(ErrorOf([] { nn::Dropout(2.0); }), HasSubstr("nn::Dropout"));
}

INSTANTIATE_TEST_SUITE_P(Devices, RngTest, ::testing::Bool(), test_util::OnEachDevice::Name);

}  // namespace
}  // namespace fusebox
