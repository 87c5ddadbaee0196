// matmul over any number of batch dims (torch.matmul: 1-D operands, batch
// broadcasting) and linear on x of any rank, against float64 references
// computed here, eager and compiled, float32 and bfloat16; operands that are
// views (transposed, narrowed, permuted, expanded) and computed in the graph;
// zero-size dims; the kernels a 4-D attention product compiles to; errors.
// GPU tests skip without a device.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Fixed seeds, a new one per input, so a failure reproduces.
uint64_t NextSeed() {
  static uint64_t seed = 24000;
  return ++seed;
}

struct Ref {
  Shape shape;
  std::vector<double> values;  // row-major
};

int64_t Product(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// torch.matmul in float64, written out from its definition: 1-D operands
// become a row / a column (dropped from the result), batch dims broadcast
// aligned from the right.
Ref MatmulRef(const Tensor& a, const Tensor& b) {
  const std::vector<double> av = a.to(Device::cpu()).to_double_vector();
  const std::vector<double> bv = b.to(Device::cpu()).to_double_vector();
  Shape as = a.shape(), bs = b.shape();
  if (a.dim() == 1) as.insert(as.begin(), 1);
  if (b.dim() == 1) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  const Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const size_t rank = std::max(ab.size(), bb.size());
  auto size_at = [&](const Shape& s, size_t i) { return i < rank - s.size() ? int64_t{1} : s[i - (rank - s.size())]; };
  Shape batch(rank);
  for (size_t i = 0; i < rank; ++i) batch[i] = size_at(ab, i) == 1 ? size_at(bb, i) : size_at(ab, i);
  Ref out{.shape = batch};
  if (a.dim() > 1) out.shape.push_back(m);
  if (b.dim() > 1) out.shape.push_back(n);
  const int64_t count = Product(batch);
  out.values.assign(count * m * n, 0.0);
  for (int64_t z = 0; z < count; ++z) {
    // z's batch index, and the matrix it picks from each operand (row-major
    // over that operand's own batch dims, a size-1 dim always at 0).
    int64_t rest = z, za = 0, zb = 0, step_a = 1, step_b = 1;
    for (size_t i = rank; i-- > 0;) {
      const int64_t idx = rest % batch[i];
      rest /= batch[i];
      const int64_t sa = size_at(ab, i), sb = size_at(bb, i);
      za += (sa == 1 ? 0 : idx) * step_a;
      zb += (sb == 1 ? 0 : idx) * step_b;
      step_a *= sa;
      step_b *= sb;
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += av[(za * m + i) * k + p] * bv[(zb * k + p) * n + j];
        out.values[(z * m + i) * n + j] = acc;
      }
    }
  }
  return out;
}

// allclose: |got - want| <= atol + rtol * |want| for a k-long dot product of
// unit normals. float32 accumulates rounding over k terms; a bfloat16 result
// (operands exact in bf16, f32 accumulation) is rounded once at the end.
void ExpectAllClose(const Tensor& got, const Ref& want, DType dtype, int64_t k, double scale = 1) {
  ASSERT_EQ(got.dtype(), dtype);
  ASSERT_EQ(got.shape(), want.shape);
  const double rtol = dtype == DType::kFloat32 ? 1e-5 : 8e-3;
  const double atol = (dtype == DType::kFloat32 ? 2e-6 : 4e-3) * std::sqrt(static_cast<double>(k) + 1);
  const std::vector<double> g = got.to(Device::cpu()).to_double_vector();
  ASSERT_EQ(g.size(), want.values.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const double w = scale * want.values[i];
    ASSERT_LE(std::fabs(g[i] - w), scale * atol + rtol * std::fabs(w))
        << "element " << i << " of " << ShapeToString(want.shape) << ": got " << g[i] << ", want " << w;
  }
}

using View = std::function<Tensor(const Tensor&)>;
Tensor Same(const Tensor& t) { return t; }

struct Side {
  Shape stored;      // the fresh tensor's shape
  View view = Same;  // the operand matmul gets: a view of it
};

// a @ b eager, compiled on the stored tensors (views taken inside), and
// compiled on operands computed in the graph (2 * x: exact, so the result
// is exactly twice as large), all against float64.
void CheckMatmul(Device device, DType dtype, const Side& a, const Side& b) {
  const Tensor as = randn(a.stored, Device::cpu(), NextSeed()).to(dtype).to(device);
  const Tensor bs = randn(b.stored, Device::cpu(), NextSeed()).to(dtype).to(device);
  const Tensor av = a.view(as), bv = b.view(bs);
  SCOPED_TRACE(testing::Message() << DTypeName(dtype) << " " << ShapeToString(av.shape()) << " (strides "
                                  << ShapeToString(av.strides()) << ") @ " << ShapeToString(bv.shape())
                                  << " (strides " << ShapeToString(bv.strides()) << ") on " << device.str());
  const Ref want = MatmulRef(av, bv);
  const int64_t k = av.shape().back();
  ExpectAllClose(matmul(av, bv), want, dtype, k);
  auto fn = compile([&](const Tensor& x, const Tensor& y) { return matmul(a.view(x), b.view(y)); });
  ExpectAllClose(fn(as, bs), want, dtype, k);
  ExpectAllClose(fn(as, bs), want, dtype, k);  // the cached plan
  auto computed = compile([&](const Tensor& x, const Tensor& y) { return matmul(a.view(x * 2.0), b.view(y)); });
  ExpectAllClose(computed(as, bs), want, dtype, k, 2.0);
}

View T() {
  return [](const Tensor& t) { return t.transpose(-2, -1); };
}

// 1-D operands: the prepended / appended 1 is removed from the result.
void CheckVectors(Device device, DType dtype) {
  CheckMatmul(device, dtype, {{7}}, {{7, 5}});        // [n]
  CheckMatmul(device, dtype, {{6, 7}}, {{7}});        // [m]
  CheckMatmul(device, dtype, {{9}}, {{9}});           // 0-d
  CheckMatmul(device, dtype, {{1}}, {{1}});           // 0-d of one product
  CheckMatmul(device, dtype, {{5}}, {{3, 5, 4}});     // [3, 4]
  CheckMatmul(device, dtype, {{2, 3, 6, 5}}, {{5}});  // [2, 3, 6]
  CheckMatmul(device, dtype, {{5}}, {{2, 3, 5, 4}});  // [2, 3, 4]
  CheckMatmul(device, dtype, {{4, 6}}, {{5, 6}, T()});
}

// Batch dims broadcast as NumPy's, aligned from the right.
void CheckBroadcast(Device device, DType dtype) {
  CheckMatmul(device, dtype, {{2, 3, 5, 4}}, {{2, 3, 4, 6}});
  CheckMatmul(device, dtype, {{3, 5, 4}}, {{2, 1, 4, 6}});     // [H, T, D] @ [B, 1, D, T]
  CheckMatmul(device, dtype, {{2, 1, 5, 4}}, {{3, 4, 6}});     // [B, 1, ...] @ [H, ...]
  CheckMatmul(device, dtype, {{2, 3, 5, 4}}, {{4, 6}});        // a matrix over the batch: stride 0
  CheckMatmul(device, dtype, {{5, 4}}, {{2, 3, 4, 6}});
  CheckMatmul(device, dtype, {{2, 1, 3, 5, 4}}, {{1, 4, 1, 4, 6}});  // 5-D, each side broadcast
  CheckMatmul(device, dtype, {{1, 1, 5, 4}}, {{2, 3, 4, 6}});
}

// Views: q @ k^T of attention, transposed matrices over a batch, narrowed
// and permuted batch dims (which cannot fold as a view: copied), an
// expanded batch, a strided vector.
void CheckViews(Device device, DType dtype) {
  CheckMatmul(device, dtype, {{2, 3, 7, 8}}, {{2, 3, 7, 8}, T()});  // [B, H, T, D] @ [B, H, D, T]
  CheckMatmul(device, dtype, {{2, 3, 8, 7}, T()}, {{2, 3, 8, 5}});
  CheckMatmul(device, dtype, {{2, 3, 8, 7}, T()}, {{2, 3, 5, 8}, T()});
  CheckMatmul(device, dtype, {{2, 5, 6, 4}, [](const Tensor& t) { return t.narrow(1, 1, 3); }}, {{2, 3, 4, 6}});
  CheckMatmul(device, dtype, {{3, 2, 5, 4}, [](const Tensor& t) { return t.permute({1, 0, 2, 3}); }},
              {{2, 3, 4, 6}});
  CheckMatmul(device, dtype, {{5, 4}, [](const Tensor& t) { return t.expand({2, 3, 5, 4}); }}, {{2, 3, 4, 6}});
  CheckMatmul(device, dtype, {{1, 3, 5, 4}, [](const Tensor& t) { return t.expand({2, 3, 5, 4}); }},
              {{2, 3, 4, 6}, [](const Tensor& t) { return t.narrow(-1, 1, 4).narrow(-2, 0, 4); }});
  // Columns of matrices: strided 1-D operands.
  CheckMatmul(device, dtype, {{6, 3}, [](const Tensor& t) { return t.narrow(1, 1, 1).squeeze(1); }}, {{6, 4}});
  CheckMatmul(device, dtype, {{5, 6}}, {{6, 3}, [](const Tensor& t) { return t.narrow(1, 2, 1).squeeze(-1); }});
}

// Zero-size dims give zero-size (or, for k = 0, zero) results of the right shape.
void CheckZeroSizes(Device device, DType dtype) {
  CheckMatmul(device, dtype, {{0, 3, 5, 4}}, {{3, 4, 6}});
  CheckMatmul(device, dtype, {{2, 3, 0, 4}}, {{2, 3, 4, 6}});
  CheckMatmul(device, dtype, {{2, 3, 5, 4}}, {{1, 3, 4, 0}});
  CheckMatmul(device, dtype, {{2, 3, 5, 0}}, {{3, 0, 6}});  // k = 0: zeros
  CheckMatmul(device, dtype, {{0}}, {{0}});                 // a 0-d zero
  CheckMatmul(device, dtype, {{2, 0, 5, 4}}, {{4}});
}

// Contiguous q and k.transpose(-2, -1) fold into one batched GEMM read in
// place: one extern kernel, no copy. A matrix over a batch too (stride 0).
void CheckAttentionKernels(Device device) {
  const std::string gemm = device.is_cuda() ? "extern_cublaslt_gemm_0" : "extern_openblas_gemm_0";
  const Tensor q = randn({2, 4, 16, 8}, Device::cpu(), NextSeed()).to(device);
  const Tensor k = randn({2, 4, 16, 8}, Device::cpu(), NextSeed()).to(device);
  auto scores = compile([](const Tensor& q, const Tensor& k) { return matmul(q, k.transpose(-2, -1)); });
  const Tensor got = scores(q, k);
  EXPECT_EQ(got.shape(), (Shape{2, 4, 16, 16}));
  ExpectAllClose(got, MatmulRef(q, k.transpose(-2, -1)), DType::kFloat32, 8);
  EXPECT_THAT(Names(scores.kernels()), ElementsAre(gemm));
  EXPECT_THAT(scores.kernels()[0].source, HasSubstr("[8, 8, 16]")) << "k^T as [B*H, D, T]";

  const Tensor w = randn({8, 5}, Device::cpu(), NextSeed()).to(device);
  auto project = compile([](const Tensor& q, const Tensor& w) { return matmul(q, w); });
  ExpectAllClose(project(q, w), MatmulRef(q, w), DType::kFloat32, 8);
  EXPECT_THAT(Names(project.kernels()), ElementsAre(gemm));

  // A permuted batch cannot fold as a view: it is copied first, then one GEMM.
  auto permuted = compile([](const Tensor& q, const Tensor& k) {
    return matmul(q.permute({1, 0, 2, 3}), k.permute({1, 0, 3, 2}));
  });
  ExpectAllClose(permuted(q, k), MatmulRef(q.permute({1, 0, 2, 3}), k.permute({1, 0, 3, 2})), DType::kFloat32, 8);
  const std::vector<std::string> names = Names(permuted.kernels());
  ASSERT_GE(names.size(), 2u) << ::testing::PrintToString(names);
  EXPECT_THAT(names.back(), HasSubstr("extern_"));
  EXPECT_THAT(names.front(), HasSubstr("copy"));
}

// Reference for linear: x [..., in] @ w^T + b.
Ref LinearRef(const Tensor& x, const Tensor& w, const Tensor& b) {
  Ref y = MatmulRef(x, w.transpose(0, 1));
  if (b.defined()) {
    const std::vector<double> bv = b.to(Device::cpu()).to_double_vector();
    for (size_t i = 0; i < y.values.size(); ++i) y.values[i] += bv[i % bv.size()];
  }
  return y;
}

// linear on x of rank 1 to 4: rows that fold into [rows, in] as a view are
// one 2-D GEMM (with the bias in its epilogue); x whose rows do not (a
// transposed batch) runs as a batched GEMM, still without a copy.
void CheckLinear(Device device, DType dtype) {
  SCOPED_TRACE(DTypeName(dtype));
  const std::string gemm = device.is_cuda() ? "extern_cublaslt_gemm_0" : "extern_openblas_gemm_0";
  const int64_t in = 12, out = 7;
  const Tensor w = randn({out, in}, Device::cpu(), NextSeed()).to(dtype).to(device);
  const Tensor b = randn({out}, Device::cpu(), NextSeed()).to(dtype).to(device);
  auto lin = compile([](const Tensor& x, const Tensor& w, const Tensor& b) { return linear(x, w, b); });
  for (const Shape& shape : {Shape{in}, Shape{5, in}, Shape{3, 5, in}, Shape{2, 3, 5, in}, Shape{2, 0, in}}) {
    SCOPED_TRACE(ShapeToString(shape));
    const Tensor x = randn(shape, Device::cpu(), NextSeed()).to(dtype).to(device);
    const Ref want = LinearRef(x, w, b);
    ExpectAllClose(linear(x, w, b), want, dtype, in);
    ExpectAllClose(linear(x, w), LinearRef(x, w, Tensor()), dtype, in);
    ExpectAllClose(lin(x, w, b), want, dtype, in);
    if (x.numel() > 0) {
      EXPECT_THAT(Names(lin.kernels()), ElementsAre(gemm)) << "one 2-D GEMM, the bias in its epilogue";
      EXPECT_THAT(lin.kernels()[0].source, HasSubstr("epilogue bias:"));
      // x's rows as one matrix: the GEMM's operand (the graph's input, sizes
      // of this call; the rows are a run-time size after the second shape).
      const Shape rows = {x.numel() / in, in};
      EXPECT_THAT(lin.explain(), HasSubstr(absl::StrCat("input 0 = argument 0: ", DTypeName(dtype), ShapeToString(rows))))
          << lin.explain();
      EXPECT_THAT(lin.kernels()[0].source, HasSubstr("matmul(%0 [")) << "a 2-D GEMM";
    }
  }
  // [T, B, in] transposed to [B, T, in]: B and T do not merge as a view.
  const Tensor tb = randn({5, 3, in}, Device::cpu(), NextSeed()).to(dtype).to(device);
  auto lin_t = compile([](const Tensor& x, const Tensor& w, const Tensor& b) { return linear(x.transpose(0, 1), w, b); });
  const Ref want = LinearRef(tb.transpose(0, 1), w, b);
  ExpectAllClose(linear(tb.transpose(0, 1), w, b), want, dtype, in);
  ExpectAllClose(lin_t(tb, w, b), want, dtype, in);
  const std::vector<std::string> names = Names(lin_t.kernels());
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names[0], gemm) << "x is read in place: " << ::testing::PrintToString(names);
}

TEST(MatmulNdTest, VectorsOnTheCpu) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) CheckVectors(Device::cpu(), dtype);
}
TEST(MatmulNdTest, BroadcastBatchDimsOnTheCpu) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) CheckBroadcast(Device::cpu(), dtype);
}
TEST(MatmulNdTest, ViewsOnTheCpu) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) CheckViews(Device::cpu(), dtype);
}
TEST(MatmulNdTest, ZeroSizeDimsOnTheCpu) { CheckZeroSizes(Device::cpu(), DType::kFloat32); }
TEST(MatmulNdTest, AttentionScoresAreOneGemmOnTheCpu) { CheckAttentionKernels(Device::cpu()); }
TEST(MatmulNdTest, LinearOfAnyRankOnTheCpu) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) CheckLinear(Device::cpu(), dtype);
}

TEST(MatmulNdTest, BadShapesAreClearErrors) {
  auto error = [](const std::string& part) { return ThrowsMessage<Error>(HasSubstr(part)); };
  EXPECT_THAT([] { matmul(randn({}), randn({3})); }, error("at least 1 dim"));
  EXPECT_THAT([] { matmul(randn({3, 4}), randn({})); }, error("float32[]"));
  EXPECT_THAT([] { matmul(randn({4}), randn({5})); }, error("inner sizes differ: float32[4] on cpu @ float32[5]"));
  EXPECT_THAT([] { matmul(randn({2, 3, 4, 5}), randn({2, 3, 6, 5})); }, error("(5 != 6)"));
  EXPECT_THAT([] { matmul(randn({2, 3, 4, 5}), randn({4, 5, 6})); },
              error("batch sizes cannot be broadcast: float32[2, 3, 4, 5] on cpu @ float32[4, 5, 6]"));
  EXPECT_THAT([] { matmul(randn({2, 4, 5}).to(DType::kBFloat16), randn({1, 2, 5, 6})); }, error("expected one dtype"));
  EXPECT_THAT([] { linear(randn({2, 3, 4, 5}), randn({6, 4})); }, error("in_features"));
  EXPECT_THAT([] { linear(randn({}), randn({6, 4})); }, error("at least 1 dim"));
  EXPECT_THAT([] { linear(randn({2, 3, 4}), randn({6, 4}), randn({4})); }, error("bias must be [6]"));
  // Under compile() the same checks run while tracing.
  auto fn = compile([](const Tensor& x, const Tensor& y) { return matmul(x, y); });
  EXPECT_THAT([&] { fn(randn({2, 3, 4, 5}), randn({3, 3, 5, 4})); }, error("batch sizes cannot be broadcast"));
}

TEST(MatmulNdCudaTest, SameChecksOnCuda) {
  SKIP_WITHOUT_CUDA();
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    CheckVectors(Device::cuda(), dtype);
    CheckBroadcast(Device::cuda(), dtype);
    CheckViews(Device::cuda(), dtype);
    CheckLinear(Device::cuda(), dtype);
  }
  CheckZeroSizes(Device::cuda(), DType::kFloat32);
  CheckAttentionKernels(Device::cuda());
  EXPECT_THAT([] { matmul(randn({2, 3}).to(Device::cuda()), randn({3, 2})); },
              ThrowsMessage<Error>(HasSubstr("on one device")));
}

}  // namespace
}  // namespace fusebox
