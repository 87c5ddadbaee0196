// scaled_dot_product_attention against a float64 reference computed here:
// 3-D and 4-D inputs, causal (square and L != S), bool and float masks that
// broadcast, an explicit scale, bf16, eager and compiled (the scale, the mask
// and the softmax fuse between the two GEMMs), and its errors. CPU,
// and CUDA skipping without a device.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/frontend/attention_ref.h"
#include "tests/test_util.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using test_util::AttentionRef;
using test_util::CloseToAttention;
using test_util::ErrorOf;
using test_util::Expected;
using test_util::RandomTensor;
using ::testing::HasSubstr;

constexpr DType kF32 = DType::kFloat32, kBF16 = DType::kBFloat16, kBool = DType::kBool;

class AttentionTest : public test_util::OnEachDevice {
 protected:
  Tensor Random(const Shape& shape, DType dtype = kF32) const {
    return RandomTensor(shape, dtype, test_util::Domain::kAny, device());
  }
};

auto kAll = [](int64_t, int64_t, int64_t) { return true; };
auto kNoBias = [](int64_t, int64_t, int64_t) { return 0.0; };

TEST_P(AttentionTest, CausalAndUnmaskedOverThreeDims) {
  for (DType dtype : {kF32, kBF16}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(testing::Message() << DTypeName(dtype) << (causal ? " causal" : ""));
      // Scores of O(1), as a trained model's: bf16 rounds a score of 30 by
      // 0.125, which exp turns into a 12% error of its probability.
      const Tensor q = (Random({3, 9, 16}) * 0.3).to(dtype), k = (Random({3, 9, 16}) * 0.3).to(dtype),
                   v = Random({3, 9, 8}, dtype);
      auto allowed = [&](int64_t, int64_t i, int64_t j) { return !causal || j <= i; };
      const Expected want = AttentionRef(q, k, v, 0.25, allowed, kNoBias);
      EXPECT_TRUE(CloseToAttention(scaled_dot_product_attention(q, k, v, Tensor(), 0.0, causal), want, "eager"));
      auto f = compile([&](const Tensor& a, const Tensor& b, const Tensor& c) {
        return scaled_dot_product_attention(a, b, c, Tensor(), 0.0, causal);
      });
      EXPECT_TRUE(CloseToAttention(f(q, k, v), want, "compiled"));
      // GEMM, the scale + mask + softmax (one kernel storing the
      // probabilities the second GEMM reads), GEMM.
      EXPECT_EQ(f.kernels().size(), 3u) << f.explain();
    }
  }
}

TEST_P(AttentionTest, CausalWithMoreKeysThanQueriesIsTheTopLeftTriangle) {
  const Tensor q = Random({2, 5, 8}), k = Random({2, 7, 8}), v = Random({2, 7, 4});
  const Expected want = AttentionRef(q, k, v, 1 / std::sqrt(8.0), [](int64_t, int64_t i, int64_t j) { return j <= i; },
                                     kNoBias);
  EXPECT_TRUE(CloseToAttention(scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true), want, "causal 5 x 7"));
}

TEST_P(AttentionTest, BoolAndFloatMasksBroadcastAndAnExplicitScale) {
  const Tensor q = Random({2, 6, 8}), k = Random({2, 10, 8}), v = Random({2, 10, 8});
  // A bool mask [6, 10] broadcast over the batch; row 0 keeps one key at least.
  Tensor mask = RandomTensor({6, 10}, kBool, test_util::Domain::kAny, device());
  mask = masked_fill(mask, eq(arange(10, device()), 0.0), 1.0);
  const std::vector<double> m = mask.to_double_vector();
  auto allowed = [&](int64_t, int64_t i, int64_t j) { return m[i * 10 + j] != 0; };
  EXPECT_TRUE(CloseToAttention(scaled_dot_product_attention(q, k, v, mask, 0.0, false, 0.5),
                    AttentionRef(q, k, v, 0.5, allowed, kNoBias), "bool mask"));
  // A float mask [2, 1, 10] added to the scores.
  const Tensor bias = Random({2, 1, 10});
  const std::vector<double> bv = bias.to_double_vector();
  auto add = [&](int64_t b, int64_t, int64_t j) { return bv[b * 10 + j]; };
  auto f = compile([](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) {
    return scaled_dot_product_attention(a, b, c, d);
  });
  EXPECT_TRUE(CloseToAttention(f(q, k, v, bias), AttentionRef(q, k, v, 1 / std::sqrt(8.0), kAll, add), "float mask"));
  // A row with no key allowed is NaN, as PyTorch's math path.
  const Tensor none = zeros({6, 10}, device(), kBool);
  const std::vector<double> out = scaled_dot_product_attention(q, k, v, none).to_double_vector();
  EXPECT_TRUE(std::isnan(out[0]));
}

TEST_P(AttentionTest, FourDimensionalHeadsAsNanoGPTWritesThem) {
  const int64_t batch = 2, heads = 3, t = 7, hd = 8;
  const Tensor x = Random({batch, t, 3 * heads * hd});
  // q, k, v split from one projection and transposed to [B, H, T, hd] views.
  const std::vector<Tensor> qkv = split(x, heads * hd, 2);
  auto heads_of = [&](const Tensor& y) { return y.view({batch, t, heads, hd}).transpose(1, 2); };
  const Tensor q = heads_of(qkv[0]), k = heads_of(qkv[1]), v = heads_of(qkv[2]);
  const Expected want = AttentionRef(q.contiguous(), k.contiguous(), v.contiguous(), 1 / std::sqrt(8.0),
                                     [](int64_t, int64_t i, int64_t j) { return j <= i; }, kNoBias);
  EXPECT_TRUE(CloseToAttention(scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true), want, "4-D causal eager"));
  auto f = compile([&](const Tensor& y) {
    const std::vector<Tensor> parts = split(y, heads * hd, 2);
    return scaled_dot_product_attention(heads_of(parts[0]), heads_of(parts[1]), heads_of(parts[2]), Tensor(), 0.0,
                                        true);
  });
  EXPECT_TRUE(CloseToAttention(f(x), want, "4-D causal compiled"));
}

TEST_P(AttentionTest, BadInputsAreClearErrors) {
  const Tensor q = Random({2, 4, 8}), k = Random({2, 5, 8}), v = Random({2, 5, 8});
  EXPECT_THAT(ErrorOf([&] { (void)scaled_dot_product_attention(q, Random({2, 5, 6}), v); }),
              HasSubstr("must share the last size E"));
  EXPECT_THAT(ErrorOf([&] { (void)scaled_dot_product_attention(q, k, Random({2, 4, 8})); }),
              HasSubstr("must share the key count S"));
  EXPECT_THAT(ErrorOf([&] { (void)scaled_dot_product_attention(q, k, v, ones({4, 5}, device(), kBool), 0.0, true); }),
              HasSubstr("not both"));
  EXPECT_THAT(ErrorOf([&] { (void)scaled_dot_product_attention(q, k, v, Tensor(), -0.1); }),
              HasSubstr("dropout_p must be in [0, 1], got -0.1"));
  EXPECT_THAT(ErrorOf([&] { (void)scaled_dot_product_attention(Random({8}), k, v); }), HasSubstr("at least 2 dims"));
}

INSTANTIATE_TEST_SUITE_P(Devices, AttentionTest, ::testing::Values(false, true), test_util::OnEachDevice::Name);

}  // namespace
}  // namespace fusebox
