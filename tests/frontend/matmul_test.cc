// matmul and linear (frontend/matmul.h): one extern GEMM kernel in the plan
// (OpenBLAS on the CPU, cuBLASLt on CUDA), transposed operands read through
// strides, a broadcast batch, the pointwise ops after it fused into one
// kernel, operands computed in the graph stored first; numerics against
// float64 over odd shapes; errors. GPU tests skip without a device.
#include <cmath>
#include <vector>

#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// C = A @ B in float64 for row-major [batch, m, k] and [batch, k, n] (a
// batch of 1 broadcasts).
std::vector<double> MatmulRef(const std::vector<double>& a, const std::vector<double>& b, int64_t batch_a,
                              int64_t batch_b, int64_t m, int64_t k, int64_t n) {
  const int64_t batch = std::max(batch_a, batch_b);
  std::vector<double> c(batch * m * n, 0.0);
  for (int64_t z = 0; z < batch; ++z) {
    const double* pa = a.data() + (batch_a == 1 ? 0 : z) * m * k;
    const double* pb = b.data() + (batch_b == 1 ? 0 : z) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t p = 0; p < k; ++p) {
        for (int64_t j = 0; j < n; ++j) c[(z * m + i) * n + j] += pa[i * k + p] * pb[p * n + j];
      }
    }
  }
  return c;
}

// Tolerance for a k-long dot product of unit normals in `dtype`.
// (relative to 1 + |want|): f32 accumulates rounding over k terms; a
// 16-bit result is rounded once at the end (accumulation is in f32).
double Tol(DType dtype, int64_t k) {
  if (dtype == DType::kBFloat16 || dtype == DType::kFloat16) return dtype == DType::kBFloat16 ? 1e-2 : 2e-3;
  return 4e-6 * std::sqrt(static_cast<double>(k) + 1);
}

std::vector<float> AsFloat(const Tensor& t) {
  const std::vector<double> d = t.to(Device::cpu()).to_double_vector();
  return std::vector<float>(d.begin(), d.end());
}

void CheckShapes(Device device, DType dtype) {
  struct Case { int64_t m, k, n; };
  for (const Case& c : {Case{1, 1, 1}, Case{7, 13, 5}, Case{33, 17, 65}, Case{64, 128, 48}}) {
    SCOPED_TRACE(testing::Message() << c.m << "x" << c.k << "x" << c.n << " " << DTypeName(dtype));
    Tensor a = randn({c.m, c.k}, Device::cpu(), FreshSeed()).to(dtype);
    Tensor b = randn({c.k, c.n}, Device::cpu(), FreshSeed()).to(dtype);
    const std::vector<double> want = MatmulRef(a.to_double_vector(), b.to_double_vector(), 1, 1, c.m, c.k, c.n);
    ExpectClose(AsFloat(matmul(a.to(device), b.to(device))), want, Tol(dtype, c.k));
    auto fn = compile([](const Tensor& x, const Tensor& y) { return matmul(x, y); });
    ExpectClose(AsFloat(fn(a.to(device), b.to(device))), want, Tol(dtype, c.k));
    EXPECT_THAT(Names(fn.kernels()),
                ElementsAre(device.is_cuda() ? "extern_cublaslt_gemm_0" : "extern_openblas_gemm_0"));
    // kernels() shows what an extern kernel calls instead of generated code.
    EXPECT_THAT(fn.kernels()[0].source, HasSubstr(device.is_cuda() ? "one cuBLASLt GEMM" : "one OpenBLAS GEMM"));
  }
}

// Transposes are strides: x.t() of a contiguous tensor, inside and outside
// compile(); no copy kernel appears.
void CheckTransposes(Device device) {
  const int64_t m = 19, k = 23, n = 11;
  Tensor at = randn({k, m}, Device::cpu(), FreshSeed());  // A^T stored
  Tensor bt = randn({n, k}, Device::cpu(), FreshSeed());  // B^T stored
  const std::vector<double> a = at.transpose(0, 1).contiguous().to_double_vector();
  const std::vector<double> b = bt.transpose(0, 1).contiguous().to_double_vector();
  const std::vector<double> want = MatmulRef(a, b, 1, 1, m, k, n);
  Tensor atd = at.to(device), btd = bt.to(device);
  ExpectClose(AsFloat(matmul(atd.transpose(0, 1), btd.transpose(0, 1))), want, Tol(DType::kFloat32, k));
  auto fn = compile([](const Tensor& x, const Tensor& y) { return matmul(x.transpose(0, 1), y.transpose(0, 1)); });
  ExpectClose(AsFloat(fn(atd, btd)), want, Tol(DType::kFloat32, k));
  EXPECT_EQ(fn.kernels().size(), 1u) << "a transpose is a GEMM flag, not a copy";
}

// [b, m, k] @ [k, n] and [1, m, k] @ [b, k, n]: the 2-D or batch-1 side is
// read with batch stride 0.
void CheckBatched(Device device) {
  const int64_t batch = 3, m = 5, k = 9, n = 6;
  Tensor a = randn({batch, m, k}, Device::cpu(), FreshSeed()), w = randn({k, n}, Device::cpu(), FreshSeed());
  ExpectClose(AsFloat(matmul(a.to(device), w.to(device))),
              MatmulRef(a.to_double_vector(), w.to_double_vector(), batch, 1, m, k, n), Tol(DType::kFloat32, k));
  Tensor one = randn({1, m, k}, Device::cpu(), FreshSeed()), many = randn({batch, k, n}, Device::cpu(), FreshSeed());
  auto fn = compile([](const Tensor& x, const Tensor& y) { return matmul(x, y); });
  Tensor got = fn(one.to(device), many.to(device));
  EXPECT_EQ(got.shape(), (Shape{batch, m, n}));
  ExpectClose(AsFloat(got), MatmulRef(one.to_double_vector(), many.to_double_vector(), 1, batch, m, k, n),
              Tol(DType::kFloat32, k));
}

// Without epilogue fusion, gelu(linear(x, W, b)): the GEMM, then one
// pointwise kernel for the bias and the gelu; an operand computed in the
// graph is stored by a kernel first.
void CheckFusionAround(Device device) {
  MatmulEpilogueFusionScope off(false);
  const int64_t m = 31, k = 40, n = 24;
  Tensor x = randn({m, k}, Device::cpu(), FreshSeed()), w = randn({n, k}, Device::cpu(), FreshSeed());
  Tensor bias = randn({n}, Device::cpu(), FreshSeed());
  std::vector<double> want = MatmulRef(x.to_double_vector(), w.transpose(0, 1).contiguous().to_double_vector(), 1, 1,
                                       m, k, n);
  const std::vector<double> bv = bias.to_double_vector();
  for (int64_t i = 0; i < m * n; ++i) want[i] = GeluRef(want[i] + bv[i % n]);
  auto mlp = compile([](const Tensor& x, const Tensor& w, const Tensor& b) { return gelu(linear(x, w, b), "tanh"); });
  ExpectClose(AsFloat(mlp(x.to(device), w.to(device), bias.to(device))), want, Tol(DType::kFloat32, k));
  const std::vector<std::string> names = Names(mlp.kernels());
  ASSERT_EQ(names.size(), 2u) << ::testing::PrintToString(names);
  EXPECT_THAT(names[0], StartsWith("extern_"));
  EXPECT_EQ(names[1], "poi_fused_add_gelu_1");

  auto scaled = compile([](const Tensor& x, const Tensor& w) { return matmul(x * 2.0, w.transpose(0, 1)); });
  std::vector<double> want2 = MatmulRef(x.to_double_vector(), w.transpose(0, 1).contiguous().to_double_vector(), 1, 1,
                                        m, k, n);
  for (double& v : want2) v *= 2;
  ExpectClose(AsFloat(scaled(x.to(device), w.to(device))), want2, Tol(DType::kFloat32, k));
  EXPECT_THAT(Names(scaled.kernels()), ElementsAre("poi_mul_0", StartsWith("extern_")));

  // A reduction after the GEMM: softmax over its rows.
  auto soft = compile([](const Tensor& x, const Tensor& w) { return ManualSoftmax(matmul(x, w.transpose(0, 1))); });
  const std::vector<double> logits = MatmulRef(x.to_double_vector(), w.transpose(0, 1).contiguous().to_double_vector(),
                                               1, 1, m, k, n);
  ExpectClose(AsFloat(soft(x.to(device), w.to(device))), SoftmaxRef(logits, m, n), 1e-4);
  EXPECT_EQ(soft.kernels().size(), 2u);
}

// The seed's MLP (nn::MLP) without epilogue fusion: per layer one GEMM and
// one kernel for the bias and the gelu; against float64 layer by layer from
// the same weights.
void CheckMlp(Device device) {
  MatmulEpilogueFusionScope off(false);
  const int64_t batch = 9, dim = 24, layers = 3;
  nn::MLP mlp(dim, layers, device, DType::kFloat32, FreshSeed(), "tanh");
  Tensor x = randn({batch, dim}, Device::cpu(), FreshSeed());
  std::vector<double> want = x.to_double_vector();
  for (const nn::Linear& layer : mlp.layers) {
    const std::vector<double> wt = layer.weight.to(Device::cpu()).transpose(0, 1).contiguous().to_double_vector();
    const std::vector<double> bv = layer.bias.to(Device::cpu()).to_double_vector();
    want = MatmulRef(want, wt, 1, 1, batch, dim, dim);
    for (int64_t i = 0; i < batch * dim; ++i) want[i] = GeluRef(want[i] + bv[i % dim]);
  }
  auto fn = compile([&](const Tensor& t) { return mlp(t); });
  ExpectClose(AsFloat(fn(x.to(device))), want, 1e-5);
  const std::vector<std::string> names = Names(fn.kernels());
  ASSERT_EQ(names.size(), 2u * layers) << ::testing::PrintToString(names);
  for (int64_t l = 0; l < layers; ++l) {
    EXPECT_THAT(names[2 * l], StartsWith("extern_"));
    EXPECT_THAT(names[2 * l + 1], StartsWith("poi_fused_add_gelu_"));
  }
}

// With epilogue fusion on (set_matmul_epilogue_fusion, the default), a bias
// add and a tanh-gelu after the GEMM run in it: one kernel. An exact gelu, a
// relu (cuBLASLt's maps NaN to 0), or a value also used elsewhere, keeps the
// kernel after it.
void CheckEpilogues(Device device, DType dtype) {
  SCOPED_TRACE(DTypeName(dtype));
  ASSERT_TRUE(matmul_epilogue_fusion()) << "on by default";
  const int64_t m = 21, k = 33, n = 17;
  Tensor x = randn({m, k}, Device::cpu(), FreshSeed()).to(dtype), w = randn({n, k}, Device::cpu(), FreshSeed()).to(dtype);
  Tensor b = randn({n}, Device::cpu(), FreshSeed()).to(dtype);
  std::vector<double> lin = MatmulRef(x.to_double_vector(), w.transpose(0, 1).contiguous().to_double_vector(), 1, 1, m, k, n);
  const std::vector<double> bv = b.to_double_vector();
  for (int64_t i = 0; i < m * n; ++i) lin[i] += bv[i % n];
  auto map = [&](double (*f)(double)) {
    std::vector<double> out = lin;
    for (double& v : out) v = f(v);
    return out;
  };
  Tensor xd = x.to(device), wd = w.to(device), bd = b.to(device);
  const double tol = Tol(dtype, k);

  auto plain = compile([](const Tensor& x, const Tensor& w, const Tensor& b) { return linear(x, w, b); });
  ExpectClose(AsFloat(plain(xd, wd, bd)), lin, tol);
  EXPECT_EQ(plain.kernels().size(), 1u);
  EXPECT_THAT(plain.kernels()[0].source, HasSubstr("epilogue bias:"));

  auto with_relu = compile([](const Tensor& x, const Tensor& w, const Tensor& b) { return relu(linear(x, w, b)); });
  ExpectClose(AsFloat(with_relu(xd, wd, bd)), map([](double v) { return std::max(v, 0.0); }), tol);
  EXPECT_EQ(with_relu.kernels().size(), 2u) << "relu runs after the GEMM";
  // relu keeps NaN: a NaN in x's first row gives a NaN row.
  {
    Tensor nan_x = x.to(DType::kFloat32);
    std::vector<float> xv = nan_x.to_vector();
    xv[3] = NAN;
    Tensor xn = Tensor::from_vector(xv, {m, k}).to(dtype).to(device);
    const std::vector<float> got = AsFloat(with_relu(xn, wd, bd));
    for (int64_t c = 0; c < n; ++c) EXPECT_TRUE(std::isnan(got[c])) << "column " << c;
    EXPECT_FALSE(std::isnan(got[n])) << "the next row has no NaN";
  }

  auto with_gelu = compile([](const Tensor& x, const Tensor& w, const Tensor& b) { return gelu(linear(x, w, b), "tanh"); });
  ExpectClose(AsFloat(with_gelu(xd, wd, bd)), map(GeluRef), tol);
  ASSERT_EQ(with_gelu.kernels().size(), 1u);
  EXPECT_THAT(with_gelu.kernels()[0].source, HasSubstr("epilogue bias_gelu:"));

  auto exact = compile([](const Tensor& x, const Tensor& w, const Tensor& b) { return gelu(linear(x, w, b)); });
  ExpectClose(AsFloat(exact(xd, wd, bd)), map([](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }), tol);
  EXPECT_EQ(exact.kernels().size(), 2u) << "an exact gelu is not cuBLASLt's: a kernel after the GEMM";

  auto both = compile([](const Tensor& x, const Tensor& w, const Tensor& b) {
    Tensor y = linear(x, w, b);
    return std::make_pair(y, relu(y));
  });
  auto [y, r] = both(xd, wd, bd);
  ExpectClose(AsFloat(y), lin, tol);
  ExpectClose(AsFloat(r), map([](double v) { return std::max(v, 0.0); }), tol);
  EXPECT_EQ(both.kernels().size(), 2u) << "the biased value is returned too: the relu stays a kernel";

  nn::MLP mlp(k, 3, device, dtype, FreshSeed(), "tanh");
  auto fused_mlp = compile([&](const Tensor& t) { return mlp(t); });
  (void)fused_mlp(xd);
  EXPECT_THAT(Names(fused_mlp.kernels()), ElementsAre(StartsWith("extern_"), StartsWith("extern_"), StartsWith("extern_")));
}

TEST(MatmulTest, ShapesMatchFloat64OnTheCpu) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) CheckShapes(Device::cpu(), dtype);
}
TEST(MatmulTest, TransposedOperandsOnTheCpu) { CheckTransposes(Device::cpu()); }
TEST(MatmulTest, BatchedAndBroadcastOnTheCpu) { CheckBatched(Device::cpu()); }
TEST(MatmulTest, PointwiseAroundTheGemmFusesOnTheCpu) { CheckFusionAround(Device::cpu()); }
TEST(MatmulTest, SeedMlpOnTheCpu) { CheckMlp(Device::cpu()); }
TEST(MatmulTest, EpiloguesOnTheCpu) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) CheckEpilogues(Device::cpu(), dtype);
}

TEST(MatmulTest, LinearMatchesItsDefinition) {
  Tensor x = randn({4, 6}, Device::cpu(), FreshSeed()), w = randn({3, 6}, Device::cpu(), FreshSeed());
  Tensor b = randn({3}, Device::cpu(), FreshSeed());
  const std::vector<double> want = (matmul(x, w.transpose(0, 1)) + b).to_double_vector();
  ExpectClose(AsFloat(linear(x, w, b)), want, 1e-6);
  Tensor v = randn({6}, Device::cpu(), FreshSeed());
  EXPECT_EQ(linear(v, w).shape(), (Shape{3}));
  EXPECT_EQ(linear(randn({2, 4, 6}), w, b).shape(), (Shape{2, 4, 3}));
}

TEST(MatmulTest, BadInputIsAClearError) {
  Tensor a = randn({4, 5}), b = randn({6, 7});
  EXPECT_THAT([&] { matmul(a, b); }, ::testing::ThrowsMessage<Error>(HasSubstr("inner sizes differ")));
  EXPECT_THAT([&] { matmul(a, randn({5, 3}).to(DType::kBFloat16)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("expected one dtype")));
  EXPECT_THAT([&] { matmul(a.to(DType::kInt32), randn({5, 3}).to(DType::kInt32)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("supports float32")));
  EXPECT_THAT([&] { matmul(randn({}), randn({5, 3})); },
              ::testing::ThrowsMessage<Error>(HasSubstr("at least 1 dim")));
  EXPECT_THAT([&] { matmul(randn({2, 4, 5}), randn({3, 5, 2})); },
              ::testing::ThrowsMessage<Error>(HasSubstr("batch sizes cannot be broadcast")));
  EXPECT_THAT([&] { linear(a, randn({3, 4})); }, ::testing::ThrowsMessage<Error>(HasSubstr("in_features")));
  // k == 0: zeros, as PyTorch.
  EXPECT_THAT(matmul(randn({3, 0}), randn({0, 2})).to_double_vector(), ElementsAre(0, 0, 0, 0, 0, 0));
}

TEST(MatmulCudaTest, ShapesDtypesTransposesAndBatches) {
  SKIP_WITHOUT_CUDA();
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) CheckShapes(Device::cuda(), dtype);
  CheckTransposes(Device::cuda());
  CheckBatched(Device::cuda());
  CheckFusionAround(Device::cuda());
  CheckMlp(Device::cuda());
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) CheckEpilogues(Device::cuda(), dtype);
}

}  // namespace
}  // namespace fusebox
