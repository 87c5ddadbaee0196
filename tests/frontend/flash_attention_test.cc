// The fused scaled_dot_product_attention (one `attention` node: the flash
// kernel on CUDA, its CPU twin on the host) against a float64 reference:
// bf16, f16 and f32, head dims 64 and 128, causal or not, L != S and sizes
// off the tiles (1, 17, 130, 1000), batch dims that broadcast, nanoGPT's
// transposed head views read by their strides, unaligned rows, masks (an
// all-masked row is NaN, as the decomposition's), and that a compiled SDPA is
// one kernel while other head dims keep the decomposition. CUDA skips without
// a device.
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/flash_attention.h"
#include "backend/tuning.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/frontend/attention_ref.h"
#include "tests/test_util.h"

namespace fusebox {
namespace {

using test_util::AttentionRef;
using test_util::CloseToAttention;
using test_util::Expected;
using ::testing::HasSubstr;

constexpr DType kBF16 = DType::kBFloat16, kF16 = DType::kFloat16, kF32 = DType::kFloat32, kBool = DType::kBool;

auto kAll = [](int64_t, int64_t, int64_t) { return true; };
auto kCausal = [](int64_t, int64_t i, int64_t j) { return j <= i; };
auto kNoBias = [](int64_t, int64_t, int64_t) { return 0.0; };

class FlashAttentionTest : public test_util::OnEachDevice {
 protected:
  // Scores of O(1), as a trained model's (q and k scaled down).
  Tensor Random(const Shape& shape, DType dtype, double scale = 1.0) const {
    return (test_util::RandomTensor(shape, DType::kFloat32, test_util::Domain::kAny, device()) * scale).to(dtype);
  }
  std::string KernelName() const {
    return device().is_cuda() ? "extern_flash_attention_0" : "extern_cpu_attention_0";
  }
};

TEST_P(FlashAttentionTest, MatchesFloat64OverDtypesHeadDimsSizesAndCausal) {
  struct Size {
    int64_t l, s;
  };
  for (DType dtype : {kBF16, kF16, kF32}) {
    for (int64_t e : {64, 128}) {
      for (Size size : {Size{1, 1}, Size{17, 130}, Size{130, 17}, Size{1, 1000}, Size{1000, 1000}, Size{1000, 130}}) {
        for (bool causal : {false, true}) {
          SCOPED_TRACE(testing::Message() << DTypeName(dtype) << " E " << e << " L " << size.l << " S " << size.s
                                          << (causal ? " causal" : ""));
          const int64_t batch = size.l * size.s > 100000 ? 1 : 3;
          const Tensor q = Random({batch, size.l, e}, dtype, 0.3), k = Random({batch, size.s, e}, dtype, 0.3),
                       v = Random({batch, size.s, e}, dtype);
          auto f = compile([&](const Tensor& a, const Tensor& b, const Tensor& c) {
            return scaled_dot_product_attention(a, b, c, Tensor(), 0.0, causal);
          });
          const Tensor got = f(q, k, v);
          ASSERT_EQ(f.kernels().size(), 1u) << f.explain();
          EXPECT_EQ(f.kernels()[0].name, KernelName());
          const double scale = 1 / std::sqrt(static_cast<double>(e));
          EXPECT_TRUE(CloseToAttention(got, AttentionRef(q, k, v, scale, causal ? +kCausal : +kAll, kNoBias),
                                       "compiled"));
        }
      }
    }
  }
}

TEST_P(FlashAttentionTest, NanoGptHeadViewsAreReadByTheirStridesInOneKernel) {
  const int64_t batch = 2, heads = 3, t = 70, hd = 64;
  const Tensor x = Random({batch, t, 3 * heads * hd}, kBF16, 0.3);
  auto heads_of = [&](const Tensor& y) { return y.view({batch, t, heads, hd}).transpose(1, 2); };
  auto attend = [&](const Tensor& y) {
    const std::vector<Tensor> parts = split(y, heads * hd, 2);
    return scaled_dot_product_attention(heads_of(parts[0]), heads_of(parts[1]), heads_of(parts[2]), Tensor(), 0.0,
                                        true);
  };
  const std::vector<Tensor> parts = split(x, heads * hd, 2);
  const Expected want = AttentionRef(heads_of(parts[0]).contiguous(), heads_of(parts[1]).contiguous(),
                                     heads_of(parts[2]).contiguous(), 1 / std::sqrt(64.0), kCausal, kNoBias);
  EXPECT_TRUE(CloseToAttention(attend(x), want, "eager"));
  auto f = compile(attend);
  EXPECT_TRUE(CloseToAttention(f(x), want, "compiled"));
  ASSERT_EQ(f.kernels().size(), 1u) << f.explain();  // no copy of q, k or v
  EXPECT_EQ(f.kernels()[0].name, KernelName());
  // Lazy views of a computed x: still no copy, the scale's kernel stores x once.
  auto g = compile([&](const Tensor& y) { return attend(y * 1.0); });
  EXPECT_TRUE(CloseToAttention(g(x), want, "lazy views"));
  EXPECT_EQ(g.kernels().size(), 2u) << g.explain();
}

// nanoGPT's `y.transpose(1, 2).contiguous()` after the attention: the kernel
// stores in that layout (no copy kernel), and a reader of y itself reads
// the same values through the permutation; a permutation moving E is copied.
TEST_P(FlashAttentionTest, TheOutputIsStoredInItsConsumersLayout) {
  for (DType dtype : {kBF16, kF32}) {
    for (int64_t hd : {64, 128}) {
      SCOPED_TRACE(testing::Message() << DTypeName(dtype) << " E " << hd);
      const int64_t batch = 2, heads = 3, t = 70;
      const Tensor q = Random({batch, heads, t, hd}, dtype, 0.3), k = Random({batch, heads, t, hd}, dtype, 0.3),
                   v = Random({batch, heads, t, hd}, dtype);
      const Expected want = AttentionRef(q, k, v, 1 / std::sqrt(static_cast<double>(hd)), kCausal, kNoBias);
      auto attend = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
        return scaled_dot_product_attention(a, b, c, Tensor(), 0.0, true);
      };
      auto merged = compile([&](const Tensor& a, const Tensor& b, const Tensor& c) {
        return attend(a, b, c).transpose(1, 2).contiguous().view({batch, t, heads * hd});
      });
      const Tensor got = merged(q, k, v);
      ASSERT_EQ(merged.kernels().size(), 1u) << merged.explain();  // the attention alone
      EXPECT_THAT(merged.explain(), HasSubstr("stores its result as the copy"));
      EXPECT_EQ(merged.kernels()[0].name, KernelName());
      EXPECT_TRUE(CloseToAttention(got.view({batch, t, heads, hd}).transpose(1, 2), want, "stored transposed"));

      // y read both ways, and again after the copy.
      auto both = compile([&](const Tensor& a, const Tensor& b, const Tensor& c) {
        const Tensor y = attend(a, b, c);
        return std::vector<Tensor>{y * 2.0, y.transpose(1, 2).contiguous() + 1.0};
      });
      const std::vector<Tensor> two = both(q, k, v);
      EXPECT_TRUE(CloseToAttention(two[0] * 0.5, want, "y"));
      EXPECT_TRUE(CloseToAttention((two[1] - 1.0).transpose(1, 2), want, "y transposed"));
      // y itself returned beside its stored layout (the result a view of it).
      auto returned = compile([&](const Tensor& a, const Tensor& b, const Tensor& c) {
        const Tensor y = attend(a, b, c);
        return std::vector<Tensor>{y, y.transpose(1, 2).contiguous()};
      });
      const std::vector<Tensor> pair = returned(q, k, v);
      EXPECT_TRUE(CloseToAttention(pair[0], want, "y returned"));
      EXPECT_TRUE(CloseToAttention(pair[1].transpose(1, 2), want, "y returned transposed"));

      // E moved: the copy stays (a kernel after the attention).
      auto moved = compile([&](const Tensor& a, const Tensor& b, const Tensor& c) {
        return attend(a, b, c).transpose(2, 3).contiguous();
      });
      const Tensor m = moved(q, k, v);
      EXPECT_EQ(moved.kernels().size(), 2u) << moved.explain();
      EXPECT_TRUE(CloseToAttention(m.transpose(2, 3), want, "E moved"));
    }
  }
}

// The consumer's layout over other permutations and shapes: size-1 dims
// (whose strides say nothing), the sequence outermost, 3-D heads, and a copy
// into an input in place (left as a copy: a library kernel does not store
// into an input).
TEST_P(FlashAttentionTest, ConsumerLayoutsOverPermutationsAndSizeOneDims) {
  struct Case {
    Shape shape;                // q, k, v
    std::vector<int64_t> dims;  // the permutation the copy takes
  };
  for (const Case& c : {Case{{1, 3, 40, 64}, {0, 2, 1, 3}}, Case{{2, 1, 40, 64}, {0, 2, 1, 3}},
                        Case{{2, 3, 40, 64}, {2, 0, 1, 3}}, Case{{6, 40, 64}, {1, 0, 2}}}) {
    SCOPED_TRACE(testing::Message() << ShapeToString(c.shape));
    const Tensor q = Random(c.shape, kF32, 0.3), k = Random(c.shape, kF32, 0.3), v = Random(c.shape, kF32);
    const Expected want = AttentionRef(q, k, v, 0.125, kCausal, kNoBias);
    std::vector<int64_t> inverse(c.dims.size());
    for (size_t i = 0; i < c.dims.size(); ++i) inverse[c.dims[i]] = static_cast<int64_t>(i);
    auto f = compile([&](const Tensor& a, const Tensor& b, const Tensor& d) {
      return scaled_dot_product_attention(a, b, d, Tensor(), 0.0, true).permute(c.dims).contiguous();
    });
    const Tensor got = f(q, k, v);
    EXPECT_EQ(f.kernels().size(), 1u) << f.explain();
    EXPECT_EQ(got.shape(), q.permute(c.dims).shape());
    EXPECT_TRUE(CloseToAttention(got.permute(inverse), want, "permuted"));
    // In place into an input: the copy stays, the values are the same.
    Tensor out = Tensor::empty(q.permute(c.dims).shape(), kF32, device());
    auto g = compile([&](const Tensor& a, const Tensor& b, const Tensor& d, const Tensor& o) {
      o.copy_(scaled_dot_product_attention(a, b, d, Tensor(), 0.0, true).permute(c.dims));
      return o;
    });
    (void)g(q, k, v, out);
    EXPECT_TRUE(CloseToAttention(out.permute(inverse), want, "copied in place"));
  }
}

TEST_P(FlashAttentionTest, BroadcastBatchUnalignedRowsAndStridedHeadDims) {
  // k and v shared by every head ([2, 1, S, E] against q's [2, 4, L, E]).
  const Tensor q = Random({2, 4, 33, 128}, kF16, 0.3), k = Random({2, 1, 45, 128}, kF16, 0.3),
               v = Random({2, 1, 45, 128}, kF16);
  const Expected want = AttentionRef(q, k.expand({2, 4, 45, 128}).contiguous(), v.expand({2, 4, 45, 128}).contiguous(),
                                     0.1, kAll, kNoBias);
  EXPECT_TRUE(CloseToAttention(scaled_dot_product_attention(q, k, v, Tensor(), 0.0, false, 0.1), want, "broadcast"));
  // Rows 65 elements apart: not 16-byte aligned, so the kernel copies them without cp.async.
  for (DType dtype : {kBF16, kF32}) {
    const Tensor x = Random({2, 50, 65}, dtype, 0.3);
    const Tensor xq = split(x, 64, 2)[0];
    EXPECT_TRUE(CloseToAttention(scaled_dot_product_attention(xq, xq, xq, Tensor(), 0.0, true),
                                 AttentionRef(xq.contiguous(), xq.contiguous(), xq.contiguous(), 0.125, kCausal, kNoBias),
                                 absl::StrCat("unaligned rows ", DTypeName(dtype))));
  }
  // q strided along E (a transpose): copied first (eager), stored first (compiled).
  const Tensor qt = Random({2, 64, 40}, kBF16, 0.3), kk = Random({2, 40, 64}, kBF16, 0.3), vv = Random({2, 40, 64}, kBF16);
  const Expected want_t = AttentionRef(qt.transpose(1, 2).contiguous(), kk, vv, 0.125, kAll, kNoBias);
  EXPECT_TRUE(CloseToAttention(scaled_dot_product_attention(qt.transpose(1, 2), kk, vv), want_t, "strided E"));
  auto f = compile([](const Tensor& a, const Tensor& b, const Tensor& c) {
    return scaled_dot_product_attention((a * 1.0).transpose(1, 2), b, c);
  });
  EXPECT_TRUE(CloseToAttention(f(qt, kk, vv), want_t, "strided E compiled"));
  EXPECT_EQ(f.kernels().size(), 2u) << f.explain();
}

TEST_P(FlashAttentionTest, BoolAndFloatMasksAndAnAllMaskedRow) {
  for (auto [dtype, e] : {std::pair{kBF16, int64_t{64}}, std::pair{kBF16, int64_t{128}}, std::pair{kF32, int64_t{64}},
                          std::pair{kF32, int64_t{128}}}) {
    SCOPED_TRACE(testing::Message() << DTypeName(dtype) << " E " << e);
    const Tensor q = Random({2, 3, 70, e}, dtype, 0.3), k = Random({2, 3, 90, e}, dtype, 0.3),
                 v = Random({2, 3, 90, e}, dtype);
    // A bool mask [70, 90] over every batch; row 5 has no key (NaN, as the decomposition).
    Tensor mask = test_util::RandomTensor({70, 90}, kBool, test_util::Domain::kAny, device());
    mask = masked_fill(mask, eq(arange(70, device()).view({70, 1}), 5.0), 0.0);
    const std::vector<double> m = mask.to_double_vector();
    auto allowed = [&](int64_t, int64_t i, int64_t j) { return m[i * 90 + j] != 0; };
    auto f = compile([](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) {
      return scaled_dot_product_attention(a, b, c, d);
    });
    const Tensor got = f(q, k, v, mask);
    EXPECT_EQ(f.kernels().size(), 1u) << f.explain();
    const double scale = 1 / std::sqrt(static_cast<double>(e));
    EXPECT_TRUE(CloseToAttention(got, AttentionRef(q, k, v, scale, allowed, kNoBias), "bool mask"));
    const std::vector<double> out = got.to_double_vector();
    EXPECT_TRUE(std::isnan(out[5 * e])) << "the all-masked row";
    // A float mask [2, 1, 1, 90] (f32: added in q's dtype, as the decomposition adds it), -inf included.
    Tensor bias = test_util::RandomTensor({2, 1, 1, 90}, DType::kFloat32, test_util::Domain::kAny, device());
    bias = masked_fill(bias, eq(arange(90, device()), 7.0), -INFINITY);
    const std::vector<double> bv = bias.to(dtype).to_double_vector();
    auto add = [&](int64_t b, int64_t, int64_t j) { return bv[b / 3 * 90 + j]; };
    EXPECT_TRUE(CloseToAttention(f(q, k, v, bias), AttentionRef(q, k, v, scale, kAll, add), "float mask"));
  }
}

// Bool masks whose trailing keys drop out for a block's rows (a causal mask
// given as a tensor, padded keys, one far key kept): the CUDA kernel skips
// those tiles, and reads the mask only in tiles it does not keep whole, and
// must agree with float64; 1024 keys take the mask's rows in 16-byte loads,
// 1000 byte by byte.
TEST_P(FlashAttentionTest, BoolMasksDroppingTrailingKeysMatchFloat64) {
  for (auto [dtype, e] : {std::pair{kBF16, int64_t{64}}, std::pair{kF32, int64_t{64}}, std::pair{kBF16, int64_t{128}}}) {
    for (int64_t t : {1024, 1000}) {
      const Tensor q = Random({1, 2, t, e}, dtype, 0.3), k = Random({1, 2, t, e}, dtype, 0.3),
                   v = Random({1, 2, t, e}, dtype);
      auto mask_of = [&](auto keeps) {
        std::vector<double> m(t * t);
        for (int64_t i = 0; i < t; ++i) {
          for (int64_t j = 0; j < t; ++j) m[i * t + j] = keeps(i, j) ? 1 : 0;
        }
        return Tensor::from_vector(m, {t, t}, kBool, device());
      };
      const std::vector<std::pair<std::string, Tensor>> masks = {
          {"causal", mask_of([](int64_t i, int64_t j) { return j <= i; })},
          {"padded", mask_of([](int64_t, int64_t j) { return j < 130; })},
          // causal, and row 5 also sees the last key.
          {"far key", mask_of([&](int64_t i, int64_t j) { return j <= i || (i == 5 && j == t - 1); })},
          // Every key kept, and causal with one key dropped far below the
          // diagonal.
          {"all kept", mask_of([](int64_t, int64_t) { return true; })},
          {"causal with a hole", mask_of([](int64_t i, int64_t j) { return j <= i && !(i == 700 && j == 3); })},
      };
      auto f = compile([](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) {
        return scaled_dot_product_attention(a, b, c, d);
      });
      for (const auto& [name, mask] : masks) {
        SCOPED_TRACE(testing::Message() << DTypeName(dtype) << " E " << e << " T " << t << " " << name);
        const std::vector<double> m = mask.to_double_vector();
        auto allowed = [&](int64_t, int64_t i, int64_t j) { return m[i * t + j] != 0; };
        const Expected want = AttentionRef(q, k, v, 1 / std::sqrt(static_cast<double>(e)), allowed, kNoBias);
        EXPECT_TRUE(CloseToAttention(f(q, k, v, mask), want, name));
      }
    }
  }
}

// sm_90's warp-specialized kernel (16-bit, unmasked or causal) against
// float64 over head dims and sizes off the tiles; nanoGPT's head views (a
// 4-dim tensor map over [B, T, H, E] strides), k and v broadcast over heads
// (a stride-0 batch dim), a bool mask (the cp.async kernel), and rows TMA
// cannot read (65 elements apart: the cp.async twin runs). Elsewhere the
// same results hold from the other kernels.
TEST_P(FlashAttentionTest, WarpSpecializedKernelMatchesFloat64) {
  const cuda::FlashTmaLaunches before = cuda::CountFlashTmaLaunches();
  auto sdpa = [](bool causal) {
    return compile([causal](const Tensor& a, const Tensor& b, const Tensor& c) {
      return scaled_dot_product_attention(a, b, c, Tensor(), 0.0, causal);
    });
  };
  struct Case {
    DType dtype;
    int64_t e, l, s;
  };
  for (Case c : {Case{kBF16, 64, 1, 1}, Case{kBF16, 64, 1000, 1000}, Case{kF16, 128, 17, 130}, Case{kBF16, 128, 130, 17},
                 Case{kBF16, 128, 1000, 1000}, Case{kBF16, 64, 300, 2000}, Case{kF16, 64, 2048, 2048}}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(testing::Message() << DTypeName(c.dtype) << " E " << c.e << " L " << c.l << " S " << c.s
                                      << (causal ? " causal" : ""));
      const Tensor q = Random({2, c.l, c.e}, c.dtype, 0.3), k = Random({2, c.s, c.e}, c.dtype, 0.3),
                   v = Random({2, c.s, c.e}, c.dtype);
      auto f = sdpa(causal);
      EXPECT_TRUE(CloseToAttention(f(q, k, v), AttentionRef(q, k, v, 1 / std::sqrt(static_cast<double>(c.e)),
                                                            causal ? +kCausal : +kAll, kNoBias),
                                   "compiled"));
    }
  }
  // nanoGPT: q, k, v split from one [B, T, 3C] tensor, heads viewed out of it.
  const int64_t b = 2, t = 515, h = 3, e = 64;
  const Tensor qkv = Random({b, t, 3 * h * e}, kBF16, 0.3);
  const std::vector<Tensor> parts = split(qkv, h * e, 2);
  auto heads = [&](const Tensor& x) { return x.view({b, t, h, e}).transpose(1, 2); };
  const Expected want_heads = AttentionRef(heads(parts[0]).contiguous(), heads(parts[1]).contiguous(),
                                           heads(parts[2]).contiguous(), 0.125, kCausal, kNoBias);
  EXPECT_TRUE(CloseToAttention(scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]),
                                                            Tensor(), 0.0, true),
                               want_heads, "head views"));
  // k and v shared by every head, and a bool mask.
  const Tensor q = Random({2, 4, 200, 128}, kBF16, 0.3), k = Random({2, 1, 333, 128}, kBF16, 0.3),
               v = Random({2, 1, 333, 128}, kBF16);
  const Tensor kx = k.expand({2, 4, 333, 128}).contiguous(), vx = v.expand({2, 4, 333, 128}).contiguous();
  EXPECT_TRUE(CloseToAttention(scaled_dot_product_attention(q, k, v, Tensor(), 0.0, false, 0.1),
                               AttentionRef(q, kx, vx, 0.1, kAll, kNoBias), "broadcast"));
  // A scale of zero or below does not fold into exp2's argument (max(c s) is then not c max(s)).
  for (double scale : {-0.1, 0.0}) {
    EXPECT_TRUE(CloseToAttention(scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true, scale),
                                 AttentionRef(q, kx, vx, scale, kCausal, kNoBias), "non-positive scale"));
  }
  std::vector<double> keep(200 * 333);
  for (size_t i = 0; i < keep.size(); ++i) keep[i] = (i * 7919) % 5 != 0;
  const Tensor mask = Tensor::from_vector(keep, {200, 333}, kBool, device());
  auto allowed = [&](int64_t, int64_t i, int64_t j) { return keep[i * 333 + j] != 0; };
  EXPECT_TRUE(CloseToAttention(scaled_dot_product_attention(q, k, v, mask, 0.0, false, 0.1),
                               AttentionRef(q, kx, vx, 0.1, allowed, kNoBias), "bool mask"));
  const int64_t aligned = cuda::CountFlashTmaLaunches().twin;
  // Rows 65 elements apart: TMA cannot read them.
  const Tensor x = Random({2, 50, 65}, kBF16, 0.3);
  const Tensor xq = split(x, 64, 2)[0];
  EXPECT_TRUE(CloseToAttention(scaled_dot_product_attention(xq, xq, xq, Tensor(), 0.0, true),
                               AttentionRef(xq.contiguous(), xq.contiguous(), xq.contiguous(), 0.125, kCausal, kNoBias),
                               "unaligned rows"));
  const cuda::FlashTmaLaunches after = cuda::CountFlashTmaLaunches();
  if (device().is_cuda() && cuda::Driver::Get().ComputeCapability(device().index).value_or(0) == 90) {
    EXPECT_EQ(aligned, before.twin) << "every aligned operand above has a tensor map";
    EXPECT_GE(after.tma - before.tma, 16);  // 14 compiled calls, 2 eager
    EXPECT_EQ(after.twin - before.twin, 1);
  }
}

// The causal block orders (Knob::kFlashCausalOrder), the persistent
// warp-specialized kernel (Knob::kFlashPersistent: a block per SM taking
// items from a counter) and row tiles ending at the last row
// (Knob::kFlashAlignEnd: a first tile reaching before row 0, its rows
// zero-filled, fully masked and not stored) and two consumer warpgroups
// where the rule takes three (Knob::kFlashConsumers: 128-row blocks) change
// which block computes what when, not what it computes (a fully masked
// tile adds exact zeros):
// each gives the default's output bit for bit, causal or not,
// over more items than SMs, rows past the end of a 192-row block, L < S
// and L > S; every setting runs twice (the persistent launch's last block
// zeroes the counter the next launch starts from).
TEST_P(FlashAttentionTest, BlockOrdersAndThePersistentKernelGiveTheDefaultsOutput) {
  if (!device().is_cuda()) GTEST_SKIP() << "the CUDA kernel's block order";
  using backend::Knob;
  struct Case {
    DType dtype;
    int64_t batch, heads, e, l, s;
  };
  for (Case c : {Case{kBF16, 3, 100, 64, 400, 400}, Case{kF16, 2, 3, 128, 1000, 1000}, Case{kBF16, 2, 3, 64, 300, 2000},
                 Case{kBF16, 2, 3, 64, 130, 17}, Case{kBF16, 1, 1, 64, 1, 1}, Case{kBF16, 3, 100, 128, 300, 300},
                 Case{kF32, 3, 100, 64, 200, 200}}) {
    for (bool causal : {true, false}) {
      SCOPED_TRACE(testing::Message() << DTypeName(c.dtype) << " [" << c.batch << ", " << c.heads << ", " << c.l
                                      << ", " << c.s << ", " << c.e << "]" << (causal ? " causal" : ""));
      const Tensor q = Random({c.batch, c.heads, c.l, c.e}, c.dtype, 0.3),
                   k = Random({c.batch, c.heads, c.s, c.e}, c.dtype, 0.3),
                   v = Random({c.batch, c.heads, c.s, c.e}, c.dtype);
      auto run = [&] {
        auto f = compile([causal](const Tensor& a, const Tensor& b, const Tensor& x) {
          return scaled_dot_product_attention(a, b, x, Tensor(), 0.0, causal);
        });
        const Tensor out = f(q, k, v);
        EXPECT_EQ(f.kernels().size(), 1u) << f.explain();
        return out.to_double_vector();
      };
      const std::vector<double> want = run();
      if (c.heads <= 3) {  // small enough for the float64 reference
        EXPECT_TRUE(CloseToAttention(Tensor::from_vector(want, {c.batch, c.heads, c.l, c.e}, c.dtype),
                                     AttentionRef(q, k, v, 1 / std::sqrt(static_cast<double>(c.e)),
                                                  causal ? +kCausal : +kAll, kNoBias),
                                     "default"));
      }
      // {causal order, persistent knob, row tiles from row 0 (1) or ending at
      // the last row (2), consumer warpgroups (0: the rule; 2: 128-row
      // blocks at head dim 64 too, persistent by the rule or not)}
      for (auto [order, persistent, align_end, consumers] :
           {std::tuple{1, 1, 1, 0}, std::tuple{2, 1, 2, 0}, std::tuple{1, 2, 1, 0}, std::tuple{2, 2, 2, 0},
            std::tuple{1, 1, 2, 0}, std::tuple{2, 2, 1, 0}, std::tuple{1, 0, 0, 2}, std::tuple{1, 1, 0, 2}}) {
        backend::ScopedTuning tuning({{Knob::kFlashCausalOrder, order},
                                      {Knob::kFlashPersistent, persistent},
                                      {Knob::kFlashAlignEnd, align_end},
                                      {Knob::kFlashConsumers, consumers}});
        for (int call = 0; call < 2; ++call) {
          const std::vector<double> got = run();
          ASSERT_EQ(got.size(), want.size());
          int64_t differ = 0;
          for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
          EXPECT_EQ(differ, 0) << "order " << order << ", persistent knob " << persistent << ", align end "
                               << align_end << ", consumers " << consumers << ", call " << call
                               << ": values unlike the default's";
        }
      }
    }
  }
}

TEST_P(FlashAttentionTest, OtherHeadDimsKeepTheDecomposition) {
  auto f = compile([](const Tensor& a, const Tensor& b, const Tensor& c) { return scaled_dot_product_attention(a, b, c); });
  for (auto [dtype, e] : {std::pair{kBF16, int64_t{32}}, std::pair{kF32, int64_t{96}}}) {
    const Tensor q = Random({2, 9, e}, dtype, 0.3), k = Random({2, 11, e}, dtype, 0.3), v = Random({2, 11, e}, dtype);
    EXPECT_TRUE(CloseToAttention(f(q, k, v), AttentionRef(q, k, v, 1 / std::sqrt(static_cast<double>(e)), kAll, kNoBias),
                                 DTypeName(dtype)));
    EXPECT_GE(f.kernels().size(), 3u) << f.explain();
    for (const KernelInfo& info : f.kernels()) EXPECT_THAT(info.name, ::testing::Not(HasSubstr("attention")));
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, FlashAttentionTest, ::testing::Values(false, true), test_util::OnEachDevice::Name);

}  // namespace
}  // namespace fusebox
