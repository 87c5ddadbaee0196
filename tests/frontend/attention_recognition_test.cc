// Attention written by hand (softmax(masked_fill(q @ k^T * scale, mask,
// -inf)) @ v and its other spellings) is recognized by the graph pass
// fusion/recognize_attention.h and runs as scaled_dot_product_attention's
// fused kernel: values against a float64 reference for each mask form and
// scale spelling, the same kernels as the SDPA form, explain() saying so, and
// the cases left as written (probabilities used elsewhere, head dims the
// kernel does not take) still right. CUDA skips without a device.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/cuda/driver.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/frontend/attention_ref.h"
#include "tests/test_util.h"

namespace fusebox {
namespace {

using test_util::AttentionRef;
using test_util::CloseToAttention;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr DType kBF16 = DType::kBFloat16, kF16 = DType::kFloat16;

auto kCausal = [](int64_t, int64_t i, int64_t j) { return j <= i; };
auto kAll = [](int64_t, int64_t, int64_t) { return true; };
auto kNoBias = [](int64_t, int64_t, int64_t) { return 0.0; };

// The kernel kinds of a compiled function, in order ("attention" for the
// fused node's, "gemm", "per", "poi", "red").
std::vector<std::string> Kinds(const std::vector<KernelInfo>& kernels) {
  std::vector<std::string> kinds;
  for (const KernelInfo& k : kernels) {
    const std::string& n = k.name;
    kinds.push_back(n.find("attention") != std::string::npos ? "attention"
                    : n.find("gemm") != std::string::npos    ? "gemm"
                                                             : n.substr(0, 3));
  }
  return kinds;
}

class AttentionRecognitionTest : public test_util::OnEachDevice {
 protected:
  Tensor Random(const Shape& shape, DType dtype, double scale = 1.0) const {
    return (test_util::RandomTensor(shape, DType::kFloat32, test_util::Domain::kAny, device()) * scale).to(dtype);
  }
};

// One way users mask the scores, the mask it means, and how it scales.
struct Form {
  std::string name;
  std::function<Tensor(const Tensor& scores, const Tensor& bool_mask, const Tensor& float_mask)> mask;
  bool causal = false, uses_bool = false, uses_float = false;
};

std::vector<Form> Forms(Device d) {
  return {
      {"masked_fill tril(ones) == 0",
       [d](const Tensor& s, const Tensor&, const Tensor&) {
         const int64_t t = s.size(-1);
         return masked_fill(s, eq(tril(ones({t, t}, d)), 0.0), -kInf);
       },
       true},
      {"masked_fill triu(ones bool, 1)",
       [d](const Tensor& s, const Tensor&, const Tensor&) {
         const int64_t t = s.size(-1);
         return masked_fill(s, triu(ones({t, t}, d, DType::kBool), 1), -kInf);
       },
       true},
      {"where(tril(ones(64, 64))[:T, :T] != 0, s, -inf)",
       [d](const Tensor& s, const Tensor&, const Tensor&) {
         const int64_t t = s.size(-1);
         const Tensor buffer = tril(ones({64, 64}, d));
         return where(ne(buffer.narrow(0, 0, t).narrow(1, 0, t), 0.0), s, -kInf);
       },
       true},
      {"masked_fill bool mask",
       [](const Tensor& s, const Tensor& m, const Tensor&) { return masked_fill(s, m, -kInf); }, false, true},
      {"additive float mask", [](const Tensor& s, const Tensor&, const Tensor& f) { return s + f; }, false, false,
       true},
      {"no mask", [](const Tensor& s, const Tensor&, const Tensor&) { return s; }},
  };
}

TEST_P(AttentionRecognitionTest, HandWrittenFormsMatchFloat64AsTheFusedKernel) {
  const int64_t batch = 2, heads = 3, t = 37;
  for (DType dtype : {kBF16, kF16, DType::kFloat32}) {
    for (int64_t e : {64, 128}) {
      if (dtype == DType::kFloat32 && e == 128) continue;  // f32's kernel at E 128: flash_attention_test
      const Tensor q = Random({batch, heads, t, e}, dtype, 0.3), k = Random({batch, heads, t, e}, dtype, 0.3),
                   v = Random({batch, heads, t, e}, dtype);
      // A random bool mask (true: masked_fill drops the key) keeping the diagonal, and a float one.
      std::vector<double> drop_v(t * t);
      for (int64_t i = 0; i < t; ++i) {
        for (int64_t j = 0; j < t; ++j) drop_v[i * t + j] = i != j && (i * 7 + j * 13) % 3 == 0;
      }
      const Tensor drop = Tensor::from_vector(drop_v, {t, t}, DType::kBool, device());
      const Tensor bias = Random({t, t}, dtype);
      const std::vector<double> bias_v = bias.to_double_vector();
      for (const Form& form : Forms(device())) {
        for (bool divide : {false, true}) {
          SCOPED_TRACE(testing::Message() << DTypeName(dtype) << " E " << e << " " << form.name
                                          << (divide ? " / sqrt(E)" : " * 1/sqrt(E)"));
          const double scale = 1 / std::sqrt(static_cast<double>(e));
          auto f = compile([&](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& m, const Tensor& fm) {
            const Tensor s = matmul(a, b.transpose(-2, -1));
            const Tensor scaled = divide ? s / std::sqrt(static_cast<double>(e)) : s * scale;
            return matmul(softmax(form.mask(scaled, m, fm), -1), c);
          });
          const Tensor got = f(q, k, v, drop, bias);
          auto allowed = [&](int64_t, int64_t i, int64_t j) {
            if (form.causal) return j <= i;
            return !form.uses_bool || drop_v[i * t + j] == 0;
          };
          auto added = [&](int64_t, int64_t i, int64_t j) { return form.uses_float ? bias_v[i * t + j] : 0.0; };
          EXPECT_TRUE(CloseToAttention(got, AttentionRef(q, k, v, scale, allowed, added), "compiled"));
          // One kernel, as scaled_dot_product_attention's (k^T, a strided
          // input, is read where it lies); a masked_fill mask is negated first.
          const std::vector<std::string> want =
              form.uses_bool ? std::vector<std::string>{"poi", "attention"} : std::vector<std::string>{"attention"};
          EXPECT_EQ(Kinds(f.kernels()), want) << f.explain();
          EXPECT_THAT(f.explain(), HasSubstr("hand-written attention"));
          EXPECT_THAT(f.explain(), HasSubstr(form.causal ? "causal" : form.uses_bool || form.uses_float ? "a mask"
                                                                                                         : "no mask"));
        }
      }
    }
  }
}

// nanoGPT's slow path (q, k, v as transposed head views of one projection)
// compiles to the kernels of its flash path: no copies, no softmax kernel.
TEST_P(AttentionRecognitionTest, NanoGptManualAttentionHasTheKernelsOfScaledDotProductAttention) {
  const int64_t batch = 2, heads = 3, t = 70, hd = 64, c = heads * hd;
  const Tensor x = Random({batch, t, c}, kBF16), w = Random({3 * c, c}, kBF16, 0.05);
  auto attend = [&](bool manual) {
    return [=, this](const Tensor& in, const Tensor& weight) {
      const std::vector<Tensor> qkv = split(linear(in, weight), c, 2);
      auto heads_of = [&](const Tensor& y) { return y.view({batch, t, heads, hd}).transpose(1, 2); };
      const Tensor q = heads_of(qkv[0]), k = heads_of(qkv[1]), v = heads_of(qkv[2]);
      Tensor y;
      if (manual) {
        Tensor att = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(hd)));
        const Tensor causal = tril(ones({t, t}, device()));
        y = matmul(softmax(masked_fill(att, eq(causal, 0.0), -kInf), -1), v);
      } else {
        y = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, /*is_causal=*/true);
      }
      return y.transpose(1, 2).contiguous().view({batch, t, c});
    };
  };
  auto manual = compile(attend(true)), sdpa = compile(attend(false));
  const Tensor got = manual(x, w), want = sdpa(x, w);
  std::vector<std::string> manual_names, sdpa_names;
  for (const KernelInfo& k : manual.kernels()) manual_names.push_back(k.name);
  for (const KernelInfo& k : sdpa.kernels()) sdpa_names.push_back(k.name);
  EXPECT_EQ(manual_names, sdpa_names) << manual.explain();
  EXPECT_THAT(manual.explain(), HasSubstr("recognized: runs as scaled_dot_product_attention's fused kernel"));
  EXPECT_EQ(got.to_double_vector(), want.to_double_vector());  // the same node on the same operands
}

// The softmax written out (exp(s - amax) / sum, in the scores' dtype) and
// the scores widened with .to(f32) before the softmax are the same attention.
TEST_P(AttentionRecognitionTest, SoftmaxWrittenOutAndFloat32ScoresAreRecognized) {
  const int64_t t = 45, e = 64;
  const Tensor q = Random({2, 2, t, e}, kBF16, 0.3), k = Random({2, 2, t, e}, kBF16, 0.3),
               v = Random({2, 2, t, e}, kBF16);
  auto written_out = [](const Tensor& x) {
    const Tensor ex = exp(x - amax(x, {-1}, /*keepdim=*/true));
    return ex / sum(ex, -1, /*keepdim=*/true);
  };
  for (bool widen : {false, true}) {
    SCOPED_TRACE(widen ? "scores.to(f32), softmax(), .to(bf16)" : "softmax written out in bf16");
    auto f = compile([&](const Tensor& a, const Tensor& b, const Tensor& c) {
      const Tensor s = matmul(a, b.transpose(-2, -1));
      const Tensor causal = tril(ones({t, t}, device()));
      const Tensor p = widen ? softmax(masked_fill(s.to(DType::kFloat32) * 0.125, eq(causal, 0.0), -kInf), -1).to(kBF16)
                             : written_out(masked_fill(s * 0.125, eq(causal, 0.0), -kInf));
      return matmul(p, c);
    });
    const Tensor got = f(q, k, v);
    EXPECT_TRUE(CloseToAttention(got, AttentionRef(q, k, v, 0.125, kCausal, kNoBias), "compiled"));
    EXPECT_THAT(Kinds(f.kernels()), ::testing::Contains("attention")) << f.explain();
    EXPECT_THAT(f.explain(), HasSubstr("causal) @ v over bfloat16"));
  }
}

// Attentions in one graph, the first's result returned and read as the
// others' queries (scaled, and as it is): each is recognized and right.
TEST_P(AttentionRecognitionTest, StackedAttentionsAreEachRecognized) {
  const int64_t t = 33, e = 64;
  const Tensor q = Random({2, 2, t, e}, kF16, 0.3), k = Random({2, 2, t, e}, kF16, 0.3), v = Random({2, 2, t, e}, kF16);
  auto attend = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
    return matmul(softmax(masked_fill(matmul(a, b.transpose(-2, -1)) * 0.125,
                                      eq(tril(ones({t, t}, device())), 0.0), -kInf),
                          -1),
                  c);
  };
  // A mask of the same shape and ops, one diagonal further: the judgement
  // of the layers' equal masks (made once, CausalMaskMemo) is not its.
  auto attend_next = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
    return matmul(softmax(masked_fill(matmul(a, b.transpose(-2, -1)) * 0.125,
                                      eq(tril(ones({t, t}, device()), 1), 0.0), -kInf),
                          -1),
                  c);
  };
  auto f = compile([&](const Tensor& a, const Tensor& b, const Tensor& c) {
    const Tensor y = attend(a, b, c);
    return std::vector<Tensor>{y, attend(y * 2.0, b, c), attend(y, b, c), attend_next(y, b, c)};
  });
  const std::vector<Tensor> got = f(q, k, v);
  const test_util::Expected first = AttentionRef(q, k, v, 0.125, kCausal, kNoBias);
  const Tensor y = Tensor::from_vector(first.values, first.shape, kF16, device());
  EXPECT_TRUE(CloseToAttention(got[0], first, "first"));
  EXPECT_TRUE(CloseToAttention(got[1], AttentionRef(y * 2.0, k, v, 0.125, kCausal, kNoBias), "second"));
  EXPECT_TRUE(CloseToAttention(got[2], AttentionRef(y, k, v, 0.125, kCausal, kNoBias), "third"));
  auto next_diagonal = [](int64_t, int64_t i, int64_t j) { return j <= i + 1; };
  EXPECT_TRUE(CloseToAttention(got[3], AttentionRef(y, k, v, 0.125, next_diagonal, kNoBias), "one diagonal further"));
  int attentions = 0;
  for (const std::string& kind : Kinds(f.kernels())) attentions += kind == "attention";
  EXPECT_EQ(attentions, 4) << f.explain();
}

// A sequence length that changes from call to call (automatic dynamic
// sizes) keeps the recognized attention right at every length.
TEST_P(AttentionRecognitionTest, ChangingSequenceLengthsStayRight) {
  const int64_t e = 64;
  auto f = compile([&](const Tensor& a, const Tensor& b, const Tensor& c) {
    const int64_t t = a.size(-2);
    const Tensor s = matmul(a, b.transpose(-2, -1)) / 8.0;
    return matmul(softmax(masked_fill(s, eq(tril(ones({t, t}, device())), 0.0), -kInf), -1), c);
  });
  for (int64_t t : {33, 50, 71, 20}) {
    SCOPED_TRACE(t);
    const Tensor q = Random({3, t, e}, kF16, 0.3), k = Random({3, t, e}, kF16, 0.3), v = Random({3, t, e}, kF16);
    EXPECT_TRUE(CloseToAttention(f(q, k, v), AttentionRef(q, k, v, 0.125, kCausal, kNoBias), "compiled"));
    EXPECT_THAT(Kinds(f.kernels()), ::testing::Contains("attention")) << f.explain();
  }
}

// check_numerics compares the recognized node with its f32 run, as it does
// scaled_dot_product_attention's (a graph of other nodes would not be
// compared at all): on CUDA the f32 flash kernel, reading f32 copies of the
// bf16 inputs.
TEST_P(AttentionRecognitionTest, TheNumericsCheckComparesTheRecognizedNode) {
  const int64_t t = 24, e = 64;
  const Tensor q = Random({2, t, e}, kBF16, 0.3), k = Random({2, t, e}, kBF16, 0.3), v = Random({2, t, e}, kBF16);
  auto f = compile(
      [&](const Tensor& a, const Tensor& b, const Tensor& c) {
        return matmul(softmax(matmul(a, b.transpose(-2, -1)) * 0.125, -1), c);
      },
      CompileOptions{.check_numerics = true});
  f(q, k, v);
  ASSERT_EQ(f.numerics().size(), f.kernels().size()) << f.explain();
  for (const KernelNumerics& n : f.numerics()) EXPECT_FALSE(n.flagged) << n.kernel << ": " << n.worst;
  EXPECT_THAT(Kinds(f.kernels()), ::testing::Contains("attention")) << f.explain();
}

// A mask made in the graph that is not the causal triangle (its diagonal
// dropped too, a window) is read as a bool mask, not taken for causal.
TEST_P(AttentionRecognitionTest, MasksThatAreNotCausalAreReadAsMasks) {
  const int64_t t = 29, e = 64;
  const Tensor q = Random({2, t, e}, kBF16, 0.3), k = Random({2, t, e}, kBF16, 0.3), v = Random({2, t, e}, kBF16);
  struct Case {
    const char* name;
    int64_t below, above;  // key j of query i kept where i - below <= j <= i + above
  };
  for (Case c : {Case{"tril(ones, -1)", t, -1}, Case{"tril(ones) - tril(ones, -4)", 3, 0}, Case{"tril(ones, 1)", t, 1}}) {
    SCOPED_TRACE(c.name);
    auto f = compile([&](const Tensor& a, const Tensor& b, const Tensor& cv) {
      const Tensor one = ones({t, t}, device());
      const Tensor kept = tril(one, c.above) - tril(one, -c.below - 1);
      return matmul(softmax(masked_fill(matmul(a, b.transpose(-2, -1)) * 0.125, eq(kept, 0.0), -kInf), -1), cv);
    });
    const Tensor got = f(q, k, v);
    auto allowed = [&](int64_t, int64_t i, int64_t j) { return i - c.below <= j && j <= i + c.above; };
    EXPECT_TRUE(CloseToAttention(got, AttentionRef(q, k, v, 0.125, allowed, kNoBias), "compiled"));
    EXPECT_THAT(f.explain(), HasSubstr("a mask) @ v"));
  }
}

// A mask passed in as a tensor (an argument, int64 0/1 here) is judged on
// its values: the triangle runs causal; another tensor with other values
// (a window) plans again, reading the mask, and that plan then serves the
// graph's other values (fresh masks, the triangle's memory written): the
// results follow. A plan that read an argument's values does not replay.
TEST_P(AttentionRecognitionTest, AMaskTensorIsJudgedOnItsValues) {
  const int64_t t = 23, e = 64;
  const Tensor q = Random({2, t, e}, kBF16, 0.3), k = Random({2, t, e}, kBF16, 0.3), v = Random({2, t, e}, kBF16);
  auto f = compile(
      [](const Tensor& a, const Tensor& b, const Tensor& cv, const Tensor& keep) {
        return matmul(softmax(masked_fill(matmul(a, b.transpose(-2, -1)) * 0.125, eq(keep, 0.0), -kInf), -1), cv);
      },
      CompileOptions{.replay = true});
  auto mask_of = [&](auto kept) {
    std::vector<double> values;
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < t; ++j) values.push_back(kept(0, i, j) ? 1.0 : 0.0);
    }
    return Tensor::from_vector(values, {t, t}, DType::kInt64, device());
  };
  auto window = [](int64_t, int64_t i, int64_t j) { return i - 3 <= j && j <= i; };
  const Tensor causal = mask_of(kCausal), windowed = mask_of(window);
  for (int call = 0; call < 3; ++call) {
    EXPECT_TRUE(CloseToAttention(f(q, k, v, causal), AttentionRef(q, k, v, 0.125, kCausal, kNoBias), "causal"));
    EXPECT_THAT(f.explain(), HasSubstr("causal as the values of graph input"));
  }
  EXPECT_EQ(f.stats().replays, 0) << f.explain();
  EXPECT_THAT(f.explain(), HasSubstr("assumed the values of an argument"));
  EXPECT_TRUE(CloseToAttention(f(q, k, v, windowed), AttentionRef(q, k, v, 0.125, window, kNoBias), "window"));
  EXPECT_THAT(f.explain(), HasSubstr("a mask) @ v"));
  // The numerics check judges the mask as the plan did (same nodes).
  auto checked = compile(
      [](const Tensor& a, const Tensor& b, const Tensor& cv, const Tensor& keep) {
        return matmul(softmax(masked_fill(matmul(a, b.transpose(-2, -1)) * 0.125, eq(keep, 0.0), -kInf), -1), cv);
      },
      CompileOptions{.check_numerics = true});
  checked(q, k, v, causal);
  EXPECT_EQ(checked.numerics().size(), checked.kernels().size());
  for (const KernelNumerics& n : checked.numerics()) EXPECT_FALSE(n.flagged) << n.kernel << ": " << n.worst;
  causal.copy_(windowed);  // the triangle's memory, written: a window now
  EXPECT_TRUE(CloseToAttention(f(q, k, v, causal), AttentionRef(q, k, v, 0.125, window, kNoBias), "written"));
  // A fresh mask tensor every call: the plan that reads the mask, no plan
  // per call (results right throughout).
  const int64_t plans_before = f.stats().plan_compiles;
  for (int call = 0; call < 14; ++call) {
    const Tensor fresh = mask_of(kCausal);
    ASSERT_TRUE(CloseToAttention(f(q, k, v, fresh), AttentionRef(q, k, v, 0.125, kCausal, kNoBias), "fresh"));
  }
  EXPECT_EQ(f.stats().plan_compiles - plans_before, 0);
  EXPECT_THAT(f.explain(), HasSubstr("a mask) @ v"));
}

// Memory written through a raw pointer bumps no version: once data_ptr()
// hands one out, plans no longer assume that mask's values (the first call
// counts as a write, so the plan that judged it causal checks again), and
// every later write through the held pointer is seen. const_data_ptr() reads
// and assumes nothing: a mask read that way is still judged.
TEST_P(AttentionRecognitionTest, AMaskWrittenThroughItsPointerIsReadNotAssumed) {
  const int64_t t = 19, e = 64;
  const Tensor q = Random({2, t, e}, kBF16, 0.3), k = Random({2, t, e}, kBF16, 0.3), v = Random({2, t, e}, kBF16);
  auto f = compile([](const Tensor& a, const Tensor& b, const Tensor& cv, const Tensor& keep) {
    return matmul(softmax(masked_fill(matmul(a, b.transpose(-2, -1)) * 0.125, eq(keep, 0.0), -kInf), -1), cv);
  });
  auto values_of = [&](auto kept) {
    std::vector<int64_t> values;
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < t; ++j) values.push_back(kept(0, i, j) ? 1 : 0);
    }
    return values;
  };
  auto write = [&](void* to, const std::vector<int64_t>& values) {
    const size_t bytes = values.size() * sizeof(int64_t);
    if (device().is_cpu()) {
      std::memcpy(to, values.data(), bytes);
    } else {
      ASSERT_TRUE(cuda::Driver::Get()
                      .CopyHostToDevice(device().index, reinterpret_cast<CUdeviceptr>(to), values.data(), bytes)
                      .ok());
    }
  };
  auto window = [](int64_t, int64_t i, int64_t j) { return i - 3 <= j && j <= i; };
  std::vector<double> causal_values;
  for (int64_t x : values_of(kCausal)) causal_values.push_back(static_cast<double>(x));
  const Tensor mask = Tensor::from_vector(causal_values, {t, t}, DType::kInt64, device());
  // Reading through const_data_ptr() and to_vector() keeps it judged.
  EXPECT_NE(mask.const_data_ptr(), nullptr);
  EXPECT_EQ(mask.to_vector().size(), static_cast<size_t>(t * t));
  EXPECT_TRUE(CloseToAttention(f(q, k, v, mask), AttentionRef(q, k, v, 0.125, kCausal, kNoBias), "judged"));
  EXPECT_THAT(f.explain(), HasSubstr("causal as the values of graph input"));
  const uint64_t version = mask.version();
  void* held = mask.data_ptr();
  EXPECT_EQ(mask.version(), version + 1);
  EXPECT_EQ(mask.data_ptr(), held);
  EXPECT_EQ(mask.version(), version + 1);  // only the first hand-out counts
  EXPECT_TRUE(CloseToAttention(f(q, k, v, mask), AttentionRef(q, k, v, 0.125, kCausal, kNoBias), "escaped"));
  EXPECT_THAT(f.explain(), HasSubstr("a mask) @ v"));
  EXPECT_THAT(f.explain(), HasSubstr("had a writable pointer handed out by data_ptr()"));
  write(held, values_of(window));  // no version bump: a plan that judged it would not see this
  EXPECT_TRUE(CloseToAttention(f(q, k, v, mask), AttentionRef(q, k, v, 0.125, window, kNoBias), "window"));
  write(held, values_of(kCausal));  // through the held pointer, no call between
  EXPECT_TRUE(CloseToAttention(f(q, k, v, mask), AttentionRef(q, k, v, 0.125, kCausal, kNoBias), "causal again"));
  write(held, values_of(kAll));
  EXPECT_TRUE(CloseToAttention(f(q, k, v, mask), AttentionRef(q, k, v, 0.125, kAll, kNoBias), "all"));
  // A view of the escaped memory is not judged either.
  write(held, values_of(kCausal));
  const Tensor view = mask.view({t, t});
  EXPECT_TRUE(CloseToAttention(f(q, k, v, view), AttentionRef(q, k, v, 0.125, kCausal, kNoBias), "view"));
  write(held, values_of(window));
  EXPECT_TRUE(CloseToAttention(f(q, k, v, view), AttentionRef(q, k, v, 0.125, window, kNoBias), "view, window"));
  // scaled_dot_product_attention's own mask, escaped: read, and said so.
  write(held, values_of(kCausal));
  auto sdpa = compile([](const Tensor& a, const Tensor& b, const Tensor& cv, const Tensor& keep) {
    return scaled_dot_product_attention(a, b, cv, ne(keep, 0.0));
  });
  EXPECT_TRUE(CloseToAttention(sdpa(q, k, v, mask), AttentionRef(q, k, v, 0.125, kCausal, kNoBias), "sdpa"));
  EXPECT_THAT(sdpa.explain(), HasSubstr("mask is read by the kernel (the mask's values are not assumed"));
  EXPECT_THAT(sdpa.explain(), Not(HasSubstr("is causal")));
}

// scaled_dot_product_attention's own mask is judged the same way, bool or
// additive: the triangle runs the causal kernel, all-true (all-zero) the
// unmasked one, and a window or a bias stays a mask read by the kernel.
TEST_P(AttentionRecognitionTest, AScaledDotProductAttentionMaskIsJudgedOnItsValues) {
  const int64_t t = 21, e = 64;
  const Tensor q = Random({2, 3, t, e}, kBF16, 0.3), k = Random({2, 3, t, e}, kBF16, 0.3);
  const Tensor v = Random({2, 3, t, e}, kBF16);
  auto window = [](int64_t, int64_t i, int64_t j) { return i - 2 <= j && j <= i; };
  struct Case {
    const char* name;
    std::function<bool(int64_t, int64_t, int64_t)> kept;
    const char* said;
  };
  for (const Case& c : {Case{"causal", kCausal, "is causal"}, Case{"all", kAll, "keeps every key"},
                        Case{"window", window, "stays"}}) {
    SCOPED_TRACE(c.name);
    std::vector<double> values;
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < t; ++j) values.push_back(c.kept(0, i, j) ? 1.0 : 0.0);
    }
    const Tensor mask = Tensor::from_vector(values, {t, t}, DType::kBool, device());
    auto f = compile([](const Tensor& a, const Tensor& b, const Tensor& cv, const Tensor& m) {
      return scaled_dot_product_attention(a, b, cv, m);
    });
    const Tensor got = f(q, k, v, mask);
    EXPECT_TRUE(CloseToAttention(got, AttentionRef(q, k, v, 0.125, c.kept, kNoBias), "compiled"));
    if (std::string(c.said) == "stays") {
      EXPECT_THAT(f.explain(), Not(HasSubstr("'s bool mask")));
    } else {
      EXPECT_THAT(f.explain(), HasSubstr(std::string("'s bool mask ") + c.said));
    }
  }
  // Additive masks (0 keeps, -inf drops) in q's dtype, as LLaMA's reference
  // builds them: the triangle and all-zero are judged, a window or a bias
  // is added by the kernel.
  struct AdditiveCase {
    const char* name;
    std::function<double(int64_t, int64_t)> value;  // (i, j)
    std::function<bool(int64_t, int64_t, int64_t)> kept;
    const char* said;  // null: added by the kernel
  };
  for (const AdditiveCase& c :
       {AdditiveCase{"triu(full(-inf), 1)", [](int64_t i, int64_t j) { return j > i ? -kInf : 0.0; }, kCausal,
                     "additive mask is causal"},
        AdditiveCase{"zeros", [](int64_t, int64_t) { return 0.0; }, kAll, "additive mask keeps every key"},
        AdditiveCase{"window", [](int64_t i, int64_t j) { return j > i || j < i - 2 ? -kInf : 0.0; }, window, nullptr},
        AdditiveCase{"triangle plus a bias", [](int64_t i, int64_t j) { return j > i ? -kInf : 0.25; }, kCausal,
                     nullptr}}) {
    SCOPED_TRACE(c.name);
    std::vector<double> values;
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < t; ++j) values.push_back(c.value(i, j));
    }
    const Tensor mask = Tensor::from_vector(values, {t, t}, kBF16, device());
    auto f = compile([](const Tensor& a, const Tensor& b, const Tensor& cv, const Tensor& m) {
      return scaled_dot_product_attention(a, b, cv, m);
    });
    auto bias = [&](int64_t, int64_t i, int64_t j) { return std::isinf(c.value(i, j)) ? 0.0 : c.value(i, j); };
    EXPECT_TRUE(CloseToAttention(f(q, k, v, mask), AttentionRef(q, k, v, 0.125, c.kept, bias), "additive"));
    if (c.said != nullptr) {
      EXPECT_THAT(f.explain(), HasSubstr(c.said));
    } else {
      EXPECT_THAT(f.explain(), Not(HasSubstr("additive mask")));
    }
  }
  // Written by hand as LLaMA's reference does, the mask built in the graph:
  // scores + triu(full(-inf), 1) is the causal kernel.
  auto llama = compile([&](const Tensor& a, const Tensor& b, const Tensor& cv) {
    const Tensor causal_mask = triu(full({t, t}, -kInf, device(), kBF16), 1);
    return matmul(softmax(matmul(a, b.transpose(-2, -1)) * 0.125 + causal_mask, -1), cv);
  });
  EXPECT_TRUE(CloseToAttention(llama(q, k, v), AttentionRef(q, k, v, 0.125, kCausal, kNoBias), "llama"));
  EXPECT_THAT(llama.explain(), HasSubstr("causal) @ v"));
  // A mask per batch, [2, 1, L, S]: the first batch's triangle, the second's
  // every key. Neither holds for every batch: the kernel reads the mask.
  std::vector<double> values;
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < t; ++j) values.push_back(b == 1 || j <= i ? 1.0 : 0.0);
    }
  }
  const Tensor per_batch = Tensor::from_vector(values, {2, 1, t, t}, DType::kBool, device());
  auto f = compile([](const Tensor& a, const Tensor& b, const Tensor& cv, const Tensor& m) {
    return scaled_dot_product_attention(a, b, cv, m);
  });
  auto kept = [](int64_t b, int64_t i, int64_t j) { return b / 3 == 1 || j <= i; };  // b: batch * 3 heads + head
  EXPECT_TRUE(CloseToAttention(f(q, k, v, per_batch), AttentionRef(q, k, v, 0.125, kept, kNoBias), "per batch"));
  EXPECT_THAT(f.explain(), Not(HasSubstr("'s bool mask")));
}

// Masks read from tensors, whatever their values do between calls: each
// trial draws sizes (L = S, S > L, S < L), a dtype, a spelling (masked_fill of a float buffer ==
// 0, where() of a bool mask, SDPA's attn_mask), whether the mask is an
// argument or a tensor read from outside, traced or replayed; each call
// draws what the mask keeps (the triangle, every key, a window, the
// triangle with one key flipped, random keys) and how it changes (written in
// place, or another tensor). Every call matches the float64 reference of
// the mask as it is at that call: a plan judged on earlier values never runs
// on later ones.
TEST_P(AttentionRecognitionTest, MasksFromTensorsStayRightWhateverTheirValuesDo) {
  std::mt19937_64& rng = test_util::Rng();
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 8; ++trial) {
    const int64_t l = uniform(3, 34), e = 64;
    const int64_t shape = uniform(0, 2), s = shape == 0 ? l : shape == 1 ? l + uniform(1, 9) : uniform(1, l);
    const DType dtype = trial % 2 ? kBF16 : DType::kFloat32;
    const int spelling = static_cast<int>(uniform(0, 2));
    const bool global = uniform(0, 1) != 0, replay = uniform(0, 1) != 0;
    SCOPED_TRACE(absl::StrCat("trial ", trial, ": L ", l, " S ", s, " ", DTypeName(dtype), " spelling ", spelling,
                              global ? " global" : " argument", replay ? " replay" : "", " (seed ",
                              test_util::Seed(), ")"));
    const Tensor q = Random({2, 2, l, e}, dtype, 0.3), k = Random({2, 2, s, e}, dtype, 0.3);
    const Tensor v = Random({2, 2, s, e}, dtype);
    // What the mask keeps: 0 the triangle (top-left, as is_causal: rows
    // past S keep every key), 1 every key, 2 a window, 3 the triangle with
    // one key flipped, 4 random keys; every row keeps key min(i, S - 1) (no
    // row without keys).
    auto draw = [&](int kind) {
      std::vector<double> keep(static_cast<size_t>(l * s));
      for (int64_t i = 0; i < l; ++i) {
        const int64_t diagonal = std::min(i, s - 1);
        for (int64_t j = 0; j < s; ++j) {
          const bool below = j <= i;
          keep[i * s + j] = kind == 1 || (kind == 0 && below) || (kind == 2 && below && j >= diagonal - 3) ||
                            (kind == 3 && below) || (kind == 4 && (j == diagonal || uniform(0, 9) < 7));
        }
      }
      if (kind == 3) {
        const int64_t i = uniform(0, l - 1), j = uniform(0, s - 1);
        if (j != std::min(i, s - 1)) keep[i * s + j] = 1 - keep[i * s + j];
      }
      return keep;
    };
    auto as_tensor = [&](const std::vector<double>& keep) {
      return Tensor::from_vector(keep, {l, s}, spelling == 0 ? DType::kFloat32 : DType::kBool, device());
    };
    auto attend = [spelling](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& m) {
      if (spelling == 2) return scaled_dot_product_attention(a, b, c, m, 0.0, false, 0.125);
      const Tensor scores = matmul(a, b.transpose(-2, -1)) * 0.125;
      const Tensor p = spelling == 0 ? softmax(masked_fill(scores, eq(m, 0.0), -kInf), -1)
                                     : softmax(where(m, scores, -kInf), -1);
      return matmul(p, c);
    };
    std::vector<double> keep = draw(0);
    Tensor buffer = as_tensor(keep);
    auto f = compile([&](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& m) {
      return attend(a, b, c, global ? buffer : m);
    }, CompileOptions{.replay = replay});
    for (int call = 0; call < 7; ++call) {
      if (call > 0) {
        keep = draw(static_cast<int>(uniform(0, 4)));
        if (uniform(0, 1)) {
          buffer.copy_(as_tensor(keep));  // the same memory, written
        } else {
          buffer = as_tensor(keep);  // another tensor (a global one rebound)
        }
      }
      const Tensor got = f(q, k, v, buffer);
      auto allowed = [&](int64_t, int64_t i, int64_t j) { return keep[i * s + j] != 0; };
      ASSERT_TRUE(CloseToAttention(got, AttentionRef(q, k, v, 0.125, allowed, kNoBias), absl::StrCat("call ", call)))
          << f.explain().substr(0, 2000);
    }
  }
}

// Dropout between the softmax and the second GEMM is not the fused kernel's
// (it has none): the decomposition stays, as scaled_dot_product_attention's
// with dropout_p > 0.
TEST_P(AttentionRecognitionTest, DropoutOnTheProbabilitiesStaysAsWritten) {
  const int64_t t = 16, e = 64;
  const Tensor q = Random({2, t, e}, kBF16, 0.3), k = Random({2, t, e}, kBF16, 0.3), v = Random({2, t, e}, kBF16);
  auto f = compile([&](const Tensor& a, const Tensor& b, const Tensor& c) {
    const Tensor p = softmax(matmul(a, b.transpose(-2, -1)) * 0.125, -1);
    return matmul(dropout(p, 0.5, /*training=*/true), c);
  });
  f(q, k, v);
  EXPECT_THAT(Kinds(f.kernels()), Not(::testing::Contains("attention"))) << f.explain();
  EXPECT_THAT(f.explain(), Not(HasSubstr("hand-written attention")));
}

// Probabilities that are also returned keep the decomposition (the rewrite
// would have to compute them anyway); the values stay right.
TEST_P(AttentionRecognitionTest, ProbabilitiesUsedElsewhereAreNotRewritten) {
  const int64_t t = 19, e = 64;
  const Tensor q = Random({2, t, e}, kBF16, 0.3), k = Random({2, t, e}, kBF16, 0.3), v = Random({2, t, e}, kBF16);
  const double scale = 0.125;
  auto f = compile([&](const Tensor& a, const Tensor& b, const Tensor& c) {
    const Tensor p = softmax(matmul(a, b.transpose(-2, -1)) * scale, -1);
    return std::vector<Tensor>{matmul(p, c), sum(p, -1)};
  });
  const std::vector<Tensor> got = f(q, k, v);
  EXPECT_TRUE(CloseToAttention(got[0], AttentionRef(q, k, v, scale, kAll, kNoBias), "compiled"));
  EXPECT_THAT(Kinds(f.kernels()), Not(::testing::Contains("attention"))) << f.explain();
  EXPECT_THAT(f.explain(), HasSubstr("stays as written: its scores or probabilities are also used elsewhere"));
}

// A head dim the fused kernel does not take (and f32) stays the
// decomposition, as scaled_dot_product_attention's does, and says why.
TEST_P(AttentionRecognitionTest, HeadDimsTheKernelDoesNotTakeStayAsWritten) {
  for (auto [dtype, e] : {std::pair{kBF16, int64_t{32}}, std::pair{DType::kFloat32, int64_t{96}}}) {
    SCOPED_TRACE(DTypeName(dtype));
    const int64_t t = 21;
    const Tensor q = Random({3, t, e}, dtype, 0.3), k = Random({3, t, e}, dtype, 0.3), v = Random({3, t, e}, dtype);
    auto f = compile([&](const Tensor& a, const Tensor& b, const Tensor& c) {
      return matmul(softmax(masked_fill(matmul(a, b.permute({0, 2, 1})) / 4.0, triu(ones({t, t}, device(), DType::kBool), 1),
                                        -kInf),
                            -1),
                    c);
    });
    const Tensor got = f(q, k, v);
    EXPECT_TRUE(CloseToAttention(got, AttentionRef(q, k, v, 0.25, kCausal, kNoBias), "compiled"));
    EXPECT_THAT(Kinds(f.kernels()), Not(::testing::Contains("attention"))) << f.explain();
    EXPECT_THAT(f.explain(), HasSubstr("stays as written: the fused kernel takes bf16, f16 or f32 with head dim 64"));
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, AttentionRecognitionTest, ::testing::Bool(), test_util::OnEachDevice::Name);

}  // namespace
}  // namespace fusebox
