// Fusion across GEMMs (issue 24): a norm or a softmax feeding a GEMM is one
// kernel that stores its result once, read by the GEMM; views between a GEMM
// and its epilogue do not keep the bias and gelu out of it; a residual add
// after a GEMM is its C (beta = 1), and what the epilogue cannot take stays
// a kernel. Kernel counts and values against float64,
// on the CPU and on CUDA (skipped without a device).
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

using testing_workloads::ExpectClose;
using testing_workloads::GeluRef;
using testing_workloads::Names;
using test_util::RoundTo;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr DType kF32 = DType::kFloat32, kBF16 = DType::kBFloat16;

std::vector<float> AsFloat(const Tensor& t) {
  const std::vector<double> d = t.to(Device::cpu()).to_double_vector();
  return std::vector<float>(d.begin(), d.end());
}

// Relative tolerance (of 1 + |want|) for values that went through a k-long
// dot product in `dtype`: 16-bit operands are rounded once before the GEMM.
double Tol(DType dtype, int64_t k) { return dtype == kBF16 ? 1.5e-2 : 5e-6 * std::sqrt(k + 1.0); }

// Row-major [rows, k] @ [k, n] in float64, a batch of `batch` such products.
std::vector<double> MatmulRef(const std::vector<double>& a, const std::vector<double>& b, int64_t batch, int64_t rows,
                              int64_t k, int64_t n) {
  std::vector<double> c(batch * rows * n, 0.0);
  for (int64_t z = 0; z < batch; ++z) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t p = 0; p < k; ++p) {
        const double x = a[(z * rows + i) * k + p];
        for (int64_t j = 0; j < n; ++j) c[(z * rows + i) * n + j] += x * b[(z * k + p) * n + j];
      }
    }
  }
  return c;
}

// linear(x, w, b) in float64 for x of `rows` rows of `in` values, w [out, in].
std::vector<double> LinearRef(const std::vector<double>& x, const Tensor& w, const Tensor& b, int64_t rows) {
  const int64_t out = w.shape()[0], in = w.shape()[1];
  const std::vector<double> wt = w.to(Device::cpu()).transpose(0, 1).contiguous().to_double_vector();
  std::vector<double> y = MatmulRef(x, wt, 1, rows, in, out);
  if (b.defined()) {
    const std::vector<double> bv = b.to_double_vector();
    for (int64_t i = 0; i < rows * out; ++i) y[i] += bv[i % out];
  }
  return y;
}

// layer_norm over rows of `c` values in float64, rounded to `dtype` as the
// stored normalized value is.
std::vector<double> LayerNormRef(const std::vector<double>& x, const Tensor& w, const Tensor& b, int64_t c,
                                 DType dtype) {
  const std::vector<double> wv = w.to_double_vector(), bv = b.to_double_vector();
  std::vector<double> out(x.size());
  for (size_t r = 0; r * c < x.size(); ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < c; ++j) mean += x[r * c + j] / c;
    for (int64_t j = 0; j < c; ++j) var += (x[r * c + j] - mean) * (x[r * c + j] - mean) / c;
    for (int64_t j = 0; j < c; ++j) {
      out[r * c + j] = RoundTo(dtype, (x[r * c + j] - mean) / std::sqrt(var + 1e-5) * wv[j] + bv[j]);
    }
  }
  return out;
}

class GemmFusionTest : public test_util::OnEachDevice {
 protected:
  Tensor Random(const Shape& shape, DType dtype = kF32, double scale = 1.0) const {
    return (test_util::RandomTensor(shape, kF32, test_util::Domain::kAny, Device::cpu()) * scale).to(dtype).to(device());
  }
};

// linear(layer_norm(x)) on [B*T, C] and [B, T, C]: the norm's kernel stores
// the normalized value once, the GEMM (bias in its epilogue) reads it.
TEST_P(GemmFusionTest, LayerNormFeedingLinearIsOneKernelThenTheGemm) {
  const int64_t c = 48, out = 24;
  for (DType dtype : {kF32, kBF16}) {
    for (const Shape& shape : {Shape{15, c}, Shape{3, 5, c}}) {
      SCOPED_TRACE(testing::Message() << DTypeName(dtype) << ShapeToString(shape));
      const Tensor x = Random(shape, dtype), lw = Random({c}, dtype), lb = Random({c}, dtype);
      const Tensor w = Random({out, c}, dtype, 0.2), b = Random({out}, dtype);
      auto f = compile([&](const Tensor& t) { return linear(layer_norm(t, {c}, lw, lb), w, b); });
      const Tensor got = f(x);
      Shape want_shape = shape;
      want_shape.back() = out;
      EXPECT_EQ(got.shape(), want_shape);
      const int64_t rows = x.numel() / c;
      ExpectClose(AsFloat(got), LinearRef(LayerNormRef(x.to_double_vector(), lw, lb, c, dtype), w, b, rows),
                  Tol(dtype, c));
      EXPECT_THAT(Names(f.kernels()), ElementsAre(StartsWith("per_"), StartsWith("extern_"))) << f.explain();
    }
  }
}

// softmax(s, -1) @ v over 3-D and 4-D batches: one kernel stores the
// probabilities, then the batched GEMM.
TEST_P(GemmFusionTest, SoftmaxFeedingMatmulIsOneKernelThenTheGemm) {
  const int64_t l = 7, s = 9, e = 5;
  for (const Shape& batch : {Shape{2}, Shape{2, 3}}) {
    SCOPED_TRACE(ShapeToString(batch));
    Shape ss = batch, vs = batch;
    ss.insert(ss.end(), {l, s});
    vs.insert(vs.end(), {s, e});
    const Tensor scores = Random(ss), v = Random(vs);
    auto f = compile([](const Tensor& a, const Tensor& b) { return matmul(softmax(a, -1), b); });
    const Tensor got = f(scores, v);
    const int64_t nb = scores.numel() / (l * s);
    const std::vector<double> p = testing_workloads::SoftmaxRef(scores.to_double_vector(), nb * l, s);
    ExpectClose(AsFloat(got), MatmulRef(p, v.to_double_vector(), nb, l, s, e), Tol(kF32, s));
    EXPECT_THAT(Names(f.kernels()), ElementsAre(StartsWith("per_"), StartsWith("extern_"))) << f.explain();
  }
}

// An operand that reads its reductions through a reshape into other rows
// is not of their rows' layout: a pointwise kernel stores it from the stored
// row statistics. (A transpose of the normalized value fuses: the GEMM
// reads it transposed.)
TEST_P(GemmFusionTest, AnOperandNotOfTheRowsLayoutKeepsItsOwnKernel) {
  const int64_t r = 6, c = 11, n = 4;
  const Tensor x = Random({r, c}), y = Random({c, r}), w = Random({r, n});
  auto f = compile([&](const Tensor& a, const Tensor& b, const Tensor& d) {
    return matmul(softmax(a, -1).reshape({c, r}) + b, d);
  });
  const Tensor got = f(x, y, w);
  const std::vector<double> p = testing_workloads::SoftmaxRef(x.to_double_vector(), r, c), yv = y.to_double_vector();
  std::vector<double> operand(c * r);
  for (int64_t i = 0; i < c * r; ++i) operand[i] = p[i] + yv[i];
  ExpectClose(AsFloat(got), MatmulRef(operand, w.to_double_vector(), 1, c, r, n), Tol(kF32, r));
  EXPECT_THAT(Names(f.kernels()), ElementsAre(StartsWith("per_"), StartsWith("poi_"), StartsWith("extern_")))
      << f.explain();
  EXPECT_THAT(f.explain(), HasSubstr("separate kernel computes it from the stored reductions"));

  // The transposed probabilities alone: the GEMM reads them transposed.
  auto g = compile([](const Tensor& a, const Tensor& d) { return matmul(softmax(a, -1).transpose(0, 1), d); });
  std::vector<double> pt(c * r);
  for (int64_t i = 0; i < r; ++i) {
    for (int64_t j = 0; j < c; ++j) pt[j * r + i] = p[i * c + j];
  }
  ExpectClose(AsFloat(g(x, w)), MatmulRef(pt, w.to_double_vector(), 1, c, r, n), Tol(kF32, r));
  EXPECT_THAT(Names(g.kernels()), ElementsAre(StartsWith("per_"), StartsWith("extern_"))) << g.explain();
}

// linear on a 3-D x is a 2-D GEMM plus a bias, viewed back: the view does
// not keep a tanh-gelu out of the epilogue (one extern kernel, storing the
// 3-D value). A 4-D matmul's bias added after its view back joins too.
TEST_P(GemmFusionTest, ViewsBetweenTheGemmAndItsEpilogueDoNotBlockIt) {
  const int64_t in = 20, out = 12;
  for (DType dtype : {kF32, kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor x = Random({3, 5, in}, dtype), w = Random({out, in}, dtype, 0.3), b = Random({out}, dtype);
    auto f = compile([&](const Tensor& t) { return gelu(linear(t, w, b), "tanh"); });
    const Tensor got = f(x);
    EXPECT_EQ(got.shape(), (Shape{3, 5, out}));
    std::vector<double> want = LinearRef(x.to_double_vector(), w, b, 15);
    for (double& v : want) v = GeluRef(v);
    ExpectClose(AsFloat(got), want, Tol(dtype, in));
    ASSERT_EQ(f.kernels().size(), 1u) << f.explain();
    EXPECT_THAT(f.kernels()[0].source, HasSubstr("epilogue bias_gelu:"));
    EXPECT_EQ(f(x).shape(), (Shape{3, 5, out})) << "a second call runs the cached plan";
  }
  const Tensor a = Random({2, 3, 4, 6}), m = Random({2, 3, 6, 5}), bias = Random({5});
  auto g = compile([&](const Tensor& p, const Tensor& q) { return gelu(matmul(p, q) + bias, "tanh"); });
  std::vector<double> want = MatmulRef(a.to_double_vector(), m.to_double_vector(), 6, 4, 6, 5);
  const std::vector<double> bv = bias.to_double_vector();
  for (size_t i = 0; i < want.size(); ++i) want[i] = GeluRef(want[i] + bv[i % 5]);
  ExpectClose(AsFloat(g(a, m)), want, Tol(kF32, 6));
  ASSERT_EQ(g.kernels().size(), 1u) << g.explain();
  EXPECT_THAT(g.kernels()[0].source, HasSubstr("epilogue bias_gelu:"));
}

// GPT-2's `x = x + attn(ln_1(x))` shape of residual: x + linear(h, W, b) on
// [B, T, C] is one extern kernel reading x as C (beta = 1); x is not written.
TEST_P(GemmFusionTest, AResidualAddIsTheGemmsC) {
  const int64_t c = 24;
  for (DType dtype : {kF32, kBF16}) {
    for (bool bias : {true, false}) {
      SCOPED_TRACE(testing::Message() << DTypeName(dtype) << (bias ? " bias" : ""));
      const Tensor x = Random({2, 7, c}, dtype), h = Random({2, 7, c}, dtype), w = Random({c, c}, dtype, 0.3);
      const Tensor b = bias ? Random({c}, dtype) : Tensor();
      const std::vector<double> before = x.to_double_vector();
      auto f = compile([&](const Tensor& r, const Tensor& t) { return r + linear(t, w, b); });
      const Tensor got = f(x, h);
      std::vector<double> want = LinearRef(h.to_double_vector(), w, b, 14);
      for (size_t i = 0; i < want.size(); ++i) want[i] += before[i];
      ExpectClose(AsFloat(got), want, Tol(dtype, c));
      EXPECT_EQ(got.shape(), x.shape());
      EXPECT_EQ(x.to_double_vector(), before) << "the residual is read, never written";
      ASSERT_EQ(f.kernels().size(), 1u) << f.explain();
      EXPECT_THAT(f.kernels()[0].source, HasSubstr(bias ? "epilogue bias +residual %" : "epilogue residual %"));
    }
  }
}

// A transformer block's two residual adds: the first GEMM's stored sum is the
// second's C. ln_1 (per_), proj + x (extern), ln_2 (per_), fc + bias + gelu
// (extern), fc2 + bias + x1 (extern): five kernels.
TEST_P(GemmFusionTest, ABlocksResidualsChainThroughStoredValues) {
  const int64_t c = 16, hidden = 32;
  const Tensor x = Random({2, 5, c}), g1 = Random({c}), g2 = Random({c}), shift = Random({c}, kF32, 0.1);
  const Tensor wp = Random({c, c}, kF32, 0.3), bp = Random({c}), w1 = Random({hidden, c}, kF32, 0.3),
               b1 = Random({hidden}), w2 = Random({c, hidden}, kF32, 0.2), b2 = Random({c});
  auto block = compile([&](const Tensor& t) {
    const Tensor x1 = t + linear(layer_norm(t, {c}, g1, shift), wp, bp);
    return x1 + linear(gelu(linear(layer_norm(x1, {c}, g2, shift), w1, b1), "tanh"), w2, b2);
  });
  const Tensor got = block(x);
  std::vector<double> x1 = LinearRef(LayerNormRef(x.to_double_vector(), g1, shift, c, kF32), wp, bp, 10);
  const std::vector<double> xv = x.to_double_vector();
  for (size_t i = 0; i < x1.size(); ++i) x1[i] += xv[i];
  std::vector<double> hid = LinearRef(LayerNormRef(x1, g2, shift, c, kF32), w1, b1, 10);
  for (double& v : hid) v = GeluRef(v);
  std::vector<double> want = LinearRef(hid, w2, b2, 10);
  for (size_t i = 0; i < want.size(); ++i) want[i] += x1[i];
  ExpectClose(AsFloat(got), want, 1e-4);
  EXPECT_THAT(Names(block.kernels()), ElementsAre(StartsWith("per_"), StartsWith("extern_"), StartsWith("per_"),
                                                  StartsWith("extern_"), StartsWith("extern_")))
      << block.explain();
}

// A residual stream that starts as a computed value (GPT-2's tok_emb +
// pos_emb): ln_1's kernel stores it beside its own result, the GEMM reads it
// as C, and ln_f reads the GEMM's sum alone instead of recomputing the stream
// from its inputs (its minimal bytes: x1, weight, shift in, its result out).
TEST_P(GemmFusionTest, AComputedResidualIsStoredOnceForTheGemm) {
  const int64_t c = 16, rows = 10;
  const Tensor a = Random({2, 5, c}), b = Random({2, 5, c}), g = Random({c}), shift = Random({c}, kF32, 0.1);
  const Tensor w = Random({c, c}, kF32, 0.3), bias = Random({c});
  auto f = compile([&](const Tensor& p, const Tensor& q) {
    const Tensor x = p + q * 2.0;
    const Tensor x1 = x + linear(layer_norm(x, {c}, g, shift), w, bias);
    return layer_norm(x1, {c}, g, shift);
  });
  const Tensor got = f(a, b);
  const std::vector<double> av = a.to_double_vector(), bv = b.to_double_vector();
  std::vector<double> x(av.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = av[i] + 2.0 * bv[i];
  std::vector<double> x1 = LinearRef(LayerNormRef(x, g, shift, c, kF32), w, bias, rows);
  for (size_t i = 0; i < x1.size(); ++i) x1[i] += x[i];
  ExpectClose(AsFloat(got), LayerNormRef(x1, g, shift, c, kF32), 1e-4);
  ASSERT_THAT(Names(f.kernels()), ElementsAre(StartsWith("per_"), StartsWith("extern_"), StartsWith("per_")))
      << f.explain();
  EXPECT_THAT(f.kernels()[1].source, HasSubstr("residual %"));
  EXPECT_EQ(f.kernels()[2].bytes, (2 * rows * c + 2 * c) * 4) << f.kernels()[2].source;
}

// What stays a kernel after the GEMM: a residual after the gelu (gelu(AB +
// bias) + C is no epilogue), a broadcast addend, a GEMM value also returned,
// and an add stored in place (x.add_(...)).
TEST_P(GemmFusionTest, AddsTheEpilogueCannotTakeStayAKernel) {
  const int64_t m = 9, k = 12, n = 8;
  const Tensor x = Random({m, n}), h = Random({m, k}), w = Random({n, k}, kF32, 0.3), b = Random({n});
  const Tensor col = Random({m, 1});
  const std::vector<double> lin = LinearRef(h.to_double_vector(), w, b, m), xv = x.to_double_vector();
  const std::vector<double> cv = col.to_double_vector();
  std::vector<double> after_gelu(m * n), broadcast(m * n), summed(m * n);
  for (int64_t i = 0; i < m * n; ++i) {
    after_gelu[i] = xv[i] + GeluRef(lin[i]);
    broadcast[i] = lin[i] + cv[i / n];
    summed[i] = lin[i] + xv[i];
  }
  auto gelu_first = compile([&](const Tensor& r, const Tensor& t) { return r + gelu(linear(t, w, b), "tanh"); });
  ExpectClose(AsFloat(gelu_first(x, h)), after_gelu, Tol(kF32, k));
  EXPECT_EQ(gelu_first.kernels().size(), 2u) << gelu_first.explain();

  auto by_column = compile([&](const Tensor& r, const Tensor& t) { return linear(t, w, b) + r; });
  ExpectClose(AsFloat(by_column(col, h)), broadcast, Tol(kF32, k));
  EXPECT_EQ(by_column.kernels().size(), 2u) << by_column.explain();

  auto both = compile([&](const Tensor& r, const Tensor& t) {
    const Tensor y = linear(t, w, b);
    return std::make_pair(y, y + r);
  });
  auto [y, z] = both(x, h);
  ExpectClose(AsFloat(y), lin, Tol(kF32, k));
  ExpectClose(AsFloat(z), summed, Tol(kF32, k));
  EXPECT_EQ(both.kernels().size(), 2u) << both.explain();

  Tensor acc = x.contiguous() * 1.0;  // a copy of x, added to in place
  acc.add_(linear(h, w, b));
  ExpectClose(AsFloat(acc), summed, Tol(kF32, k));
}

INSTANTIATE_TEST_SUITE_P(Devices, GemmFusionTest, ::testing::Values(false, true), test_util::OnEachDevice::Name);

}  // namespace
}  // namespace fusebox
