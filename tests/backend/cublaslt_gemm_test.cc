// cuBLASLt GEMM (backend/cuda/cublaslt_gemm.h): the row-major to column-major
// mapping runs everywhere; the GEMMs (dtypes, odd shapes, transposed views,
// broadcast batches, unaligned pointers, epilogues) run against a float64
// host reference and skip without a device.
#include "backend/cuda/cublaslt_gemm.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/driver.h"
#include "frontend/fusebox.h"
#include "tests/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fusebox::backend::cuda {
namespace {

using ::testing::HasSubstr;

GemmProblem RowMajor(int64_t m, int64_t n, int64_t k) {
  GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  p.a_row = k, p.b_row = n, p.c_row = n;
  p.a_batch = m * k, p.b_batch = k * n, p.c_batch = m * n;
  return p;
}

// ---------------------------------------------------------------- mapping (no GPU)

TEST(CublasLtShapeTest, RowMajorIsTransposedProductWithoutFlags) {
  absl::StatusOr<CublasLtShape> s = CublasLtShapeFor(RowMajor(7, 13, 5));
  ASSERT_TRUE(s.ok()) << s.status();
  // cuBLASLt's A is B^T: B (5 x 13, row stride 13) is B^T stored column-major.
  EXPECT_EQ(s->a, (CublasLtOperand{false, 13, 5, 13, 65}));
  EXPECT_EQ(s->b, (CublasLtOperand{false, 5, 7, 5, 35}));
  EXPECT_EQ(s->d, (CublasLtOperand{false, 13, 7, 13, 91}));
  EXPECT_EQ(s->batch, 1);
}

TEST(CublasLtShapeTest, TransposedViewsBecomeFlags) {
  GemmProblem p = RowMajor(7, 13, 5);
  p.a_row = 1, p.a_col = 7;   // A = (k x m storage)^T
  p.b_row = 1, p.b_col = 5;   // B = (n x k storage)^T
  absl::StatusOr<CublasLtShape> s = CublasLtShapeFor(p);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->a, (CublasLtOperand{true, 5, 13, 5, 65}));
  EXPECT_EQ(s->b, (CublasLtOperand{true, 7, 5, 7, 35}));
}

TEST(CublasLtShapeTest, PaddedRowsKeepTheirLeadingDimension) {
  GemmProblem p = RowMajor(4, 6, 8);
  p.a_row = 11, p.b_row = 9, p.c_row = 10;
  absl::StatusOr<CublasLtShape> s = CublasLtShapeFor(p);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->a.ld, 9);
  EXPECT_EQ(s->b.ld, 11);
  EXPECT_EQ(s->d.ld, 10);
}

TEST(CublasLtShapeTest, ExtentOneDimsGetALegalLeadingDimension) {
  GemmProblem p = RowMajor(1, 6, 1);  // A is 1 x 1, B a row of a wider matrix
  p.a_row = 0, p.a_col = 3;
  p.b_row = 0, p.b_col = 1;
  absl::StatusOr<CublasLtShape> s = CublasLtShapeFor(p);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->a, (CublasLtOperand{false, 6, 1, 6, 6}));
  EXPECT_EQ(s->b.ld, 1);
  // A column of a 5-wide matrix as the m x 1 A: B^T's single row, ld 5.
  GemmProblem col = RowMajor(9, 4, 1);
  col.a_row = 5, col.a_col = 7;
  s = CublasLtShapeFor(col);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->b, (CublasLtOperand{false, 1, 9, 5, 9}));
}

TEST(CublasLtShapeTest, BroadcastOperandHasBatchStrideZero) {
  GemmProblem p = RowMajor(3, 4, 5);
  p.batch = 6, p.b_batch = 0;
  absl::StatusOr<CublasLtShape> s = CublasLtShapeFor(p);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->batch, 6);
  EXPECT_EQ(s->a.batch_stride, 0);
  EXPECT_EQ(s->b.batch_stride, 15);
  EXPECT_EQ(s->d.batch_stride, 12);
}

TEST(CublasLtShapeTest, RefusesWhatNoLayoutExpresses) {
  GemmProblem strided = RowMajor(4, 4, 4);
  strided.a_row = 8, strided.a_col = 2;
  EXPECT_THAT(CublasLtShapeFor(strided).status().message(), HasSubstr("operand A"));
  GemmProblem shared_c = RowMajor(4, 4, 4);
  shared_c.batch = 2, shared_c.c_batch = 0;
  EXPECT_THAT(CublasLtShapeFor(shared_c).status().message(), HasSubstr("batch stride"));
  GemmProblem narrow_c = RowMajor(4, 4, 4);
  narrow_c.c_row = 3;
  EXPECT_THAT(CublasLtShapeFor(narrow_c).status().message(), HasSubstr("row-major"));
  GemmProblem ints = RowMajor(4, 4, 4);
  ints.dtype = DType::kInt32;
  absl::Status s = CublasLtShapeFor(ints).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("int32"));
}

// ---------------------------------------------------------------- GEMMs (GPU)

#define SKIP_WITHOUT_GPU()                                                   \
  do {                                                                       \
    if (!::fusebox::cuda::Driver::Get().available()) {                       \
      GTEST_SKIP() << ::fusebox::cuda::Driver::Get().unavailable_reason();   \
    }                                                                        \
  } while (0)

struct Case {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  DType dtype = DType::kFloat32;
  bool a_t = false, b_t = false;          // stored transposed (swapped strides)
  bool a_bcast = false, b_bcast = false;  // batch stride 0
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  bool tf32 = false;
  bool unaligned = false;  // every pointer one element past the allocation
  bool residual = false;   // a residual in C's layout added (C with beta = 1)
};

double Gelu(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

// Random values of `dtype` (rounded on the host) as a device tensor with
// `lead` spare elements in front, and the rounded values.
struct Operand {
  Tensor t;
  std::vector<double> v;
  const void* ptr(int64_t lead) const { return static_cast<const char*>(t.data_ptr()) + lead * DTypeSize(t.dtype()); }
};
Operand RandomOperand(int64_t count, int64_t lead, DType dtype, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<double> v(count + lead);
  for (double& x : v) x = dist(rng);
  Tensor host = Tensor::from_vector(v, {count + lead}, dtype);
  std::vector<double> rounded = host.to_double_vector();
  return {host.to(Device::cuda()), std::vector<double>(rounded.begin() + lead, rounded.end())};
}

GemmProblem ProblemFor(const Case& c) {
  GemmProblem p = RowMajor(c.m, c.n, c.k);
  p.batch = c.batch, p.dtype = c.dtype, p.epilogue = c.epilogue, p.allow_tf32 = c.tf32, p.residual = c.residual;
  if (c.a_t) p.a_row = 1, p.a_col = c.m;  // stored k x m
  if (c.b_t) p.b_row = 1, p.b_col = c.k;  // stored n x k
  if (c.a_bcast) p.a_batch = 0;
  if (c.b_bcast) p.b_batch = 0;
  return p;
}

// `out` (from element `lead` on) against the float64 product of a and b
// with c's residual and epilogue.
void ExpectProduct(const Case& c, const GemmProblem& p, const Operand& a, const Operand& b, const Operand& bias,
                   const Tensor& out, int64_t lead, const Operand* residual = nullptr) {
  const std::vector<double> got = out.to_double_vector();
  const double rel = c.dtype == DType::kBFloat16 ? 1e-2 : c.dtype == DType::kFloat16 || c.tf32 ? 3e-3 : 1e-4;
  const double scale = std::sqrt(static_cast<double>(c.k));  // |C| of uniform(-1, 1) products
  for (int64_t bi = 0; bi < c.batch; ++bi) {
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double want = 0;
        for (int64_t q = 0; q < c.k; ++q) {
          want += a.v[bi * p.a_batch + i * p.a_row + q * p.a_col] * b.v[bi * p.b_batch + q * p.b_row + j * p.b_col];
        }
        if (c.residual) want += residual->v[(bi * c.m + i) * c.n + j];
        if (GemmEpilogueHasBias(c.epilogue)) want += bias.v[j];
        if (c.epilogue == GemmEpilogue::kRelu || c.epilogue == GemmEpilogue::kBiasRelu) want = std::max(want, 0.0);
        if (c.epilogue == GemmEpilogue::kGelu || c.epilogue == GemmEpilogue::kBiasGelu) want = Gelu(want);
        const double g = got[lead + (bi * c.m + i) * c.n + j];
        ASSERT_NEAR(g, want, rel * (scale + std::fabs(want))) << "at batch " << bi << " row " << i << " col " << j;
      }
    }
  }
}

void RunCase(const Case& c) {
  SCOPED_TRACE(::testing::Message() << c.batch << "x" << c.m << "x" << c.n << "x" << c.k << " " << DTypeName(c.dtype)
                                    << " a_t=" << c.a_t << " b_t=" << c.b_t << " bcast=" << c.a_bcast << c.b_bcast
                                    << " " << GemmEpilogueName(c.epilogue) << (c.unaligned ? " unaligned" : ""));
  std::mt19937 rng(static_cast<uint32_t>(c.m * 131 + c.n * 17 + c.k + c.batch));
  const int64_t lead = c.unaligned ? 1 : 0;
  const int64_t a_count = (c.a_bcast ? 1 : c.batch) * c.m * c.k, b_count = (c.b_bcast ? 1 : c.batch) * c.k * c.n;
  Operand a = RandomOperand(a_count, lead, c.dtype, rng), b = RandomOperand(b_count, lead, c.dtype, rng);
  Operand bias = RandomOperand(c.n, lead, c.dtype, rng);
  Operand residual = RandomOperand(c.batch * c.m * c.n, lead, c.dtype, rng);
  Tensor out = Tensor::empty({c.batch * c.m * c.n + lead}, c.dtype, Device::cuda());

  const GemmProblem p = ProblemFor(c);
  ASSERT_TRUE(::fusebox::cuda::Driver::Get().SetDevice(0).ok());
  void* c_ptr = static_cast<char*>(out.data_ptr()) + lead * DTypeSize(c.dtype);
  absl::Status status =
      CublasLtGemm(0, p, a.ptr(lead), b.ptr(lead), c_ptr, bias.ptr(lead), c.residual ? residual.ptr(lead) : nullptr);
  ASSERT_TRUE(status.ok()) << status;
  ExpectProduct(c, p, a, b, bias, out, lead, &residual);
}

TEST(CublasLtGemmTest, Float32Shapes) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::array<int64_t, 3>> shapes = {{1, 1, 1}, {7, 13, 5}, {33, 17, 65}, {64, 64, 64}, {1, 300, 70}};
  for (auto [m, n, k] : shapes) {
    RunCase({.m = m, .n = n, .k = k});
  }
}

TEST(CublasLtGemmTest, TransposedViews) {
  SKIP_WITHOUT_GPU();
  for (bool a_t : {false, true}) {
    for (bool b_t : {false, true}) RunCase({.m = 33, .n = 17, .k = 65, .a_t = a_t, .b_t = b_t});
  }
}

TEST(CublasLtGemmTest, BatchedWithBroadcastOperand) {
  SKIP_WITHOUT_GPU();
  RunCase({.batch = 3, .m = 7, .n = 13, .k = 5});
  RunCase({.batch = 3, .m = 33, .n = 17, .k = 65, .b_bcast = true});
  RunCase({.batch = 4, .m = 9, .n = 20, .k = 11, .a_t = true, .a_bcast = true});
}

TEST(CublasLtGemmTest, Epilogues) {
  SKIP_WITHOUT_GPU();
  for (GemmEpilogue e : {GemmEpilogue::kBias, GemmEpilogue::kBiasRelu, GemmEpilogue::kBiasGelu, GemmEpilogue::kRelu,
                         GemmEpilogue::kGelu}) {
    RunCase({.m = 33, .n = 17, .k = 65, .epilogue = e});
    RunCase({.batch = 2, .m = 8, .n = 24, .k = 16, .dtype = DType::kBFloat16, .epilogue = e});
  }
}

// A residual is cuBLASLt's C with beta = 1 (D our fresh C): with and
// without a bias, batched, unaligned; the same problem without a residual
// first, so a kept choice without one is not reused (the key has it).
TEST(CublasLtGemmTest, ResidualIsCWithBetaOne) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (GemmEpilogue e : {GemmEpilogue::kNone, GemmEpilogue::kBias}) {
      RunCase({.m = 33, .n = 17, .k = 65, .dtype = dtype, .epilogue = e});
      RunCase({.m = 33, .n = 17, .k = 65, .dtype = dtype, .epilogue = e, .residual = true});
      RunCase({.batch = 3, .m = 8, .n = 24, .k = 16, .dtype = dtype, .b_t = true, .epilogue = e, .residual = true});
      RunCase({.m = 9, .n = 20, .k = 11, .dtype = dtype, .epilogue = e, .unaligned = true, .residual = true});
    }
  }
}

TEST(CublasLtGemmTest, HalfTypesAndTf32) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    RunCase({.m = 1, .n = 1, .k = 1, .dtype = dtype});
    RunCase({.m = 7, .n = 13, .k = 5, .dtype = dtype, .b_t = true});
    RunCase({.m = 64, .n = 128, .k = 256, .dtype = dtype, .a_t = true});
    RunCase({.batch = 3, .m = 33, .n = 17, .k = 65, .dtype = dtype, .a_bcast = true});
  }
  RunCase({.m = 64, .n = 96, .k = 128, .tf32 = true});
}

// A problem's descriptors are made by its first call and kept: later calls
// with other operands and another bias (all alive at once, so no address is
// reused) compute with their own.
TEST(CublasLtGemmTest, RepeatedProblemTakesEachCallsOperandsAndBias) {
  SKIP_WITHOUT_GPU();
  ASSERT_TRUE(::fusebox::cuda::Driver::Get().SetDevice(0).ok());
  const uint64_t seed = ::fusebox::test_util::Seed();  // fresh per run (FUSEBOX_TEST_SEED repeats one)
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  for (GemmEpilogue e : {GemmEpilogue::kBias, GemmEpilogue::kBiasGelu}) {
    const Case c{.m = 40, .n = 24, .k = 72, .epilogue = e};
    const GemmProblem p = ProblemFor(c);
    std::vector<Operand> as, bs, biases;
    std::vector<Tensor> outs;
    for (int call = 0; call < 3; ++call) {
      as.push_back(RandomOperand(c.m * c.k, 0, c.dtype, rng));
      bs.push_back(RandomOperand(c.k * c.n, 0, c.dtype, rng));
      biases.push_back(RandomOperand(c.n, 0, c.dtype, rng));
      outs.push_back(Tensor::empty({c.m * c.n}, c.dtype, Device::cuda()));
      ASSERT_TRUE(CublasLtGemm(0, p, as.back().ptr(0), bs.back().ptr(0), outs.back().data_ptr(), biases.back().ptr(0)).ok());
    }
    for (size_t call = 0; call < outs.size(); ++call) {
      SCOPED_TRACE(::testing::Message() << GemmEpilogueName(e) << " call " << call);
      ExpectProduct(c, p, as[call], bs[call], biases[call], outs[call], 0);
    }
  }
}

TEST(CublasLtGemmTest, UnalignedPointers) {
  SKIP_WITHOUT_GPU();
  RunCase({.m = 33, .n = 17, .k = 65, .unaligned = true});
  RunCase({.m = 32, .n = 64, .k = 64, .dtype = DType::kBFloat16, .epilogue = GemmEpilogue::kBias, .unaligned = true});
}

// With candidates timed, the first call of a problem times the heuristic's
// first eight (each runs on the call's own buffers) and keeps the fastest:
// that call's result, and a later call's with the kept choice, both match
// float64, and the choice is what CublasLtAlgorithm then reports.
TEST(CublasLtGemmTest, TimedChoiceIsRightAndKept) {
  SKIP_WITHOUT_GPU();
  SetCublasLtCandidates(8);
  struct Restore { ~Restore() { SetCublasLtCandidates(1); } } restore;
  const Case c{.m = 256, .n = 384, .k = 320, .dtype = DType::kBFloat16, .epilogue = GemmEpilogue::kBiasGelu};
  RunCase(c);
  RunCase(c);
  GemmProblem p = RowMajor(c.m, c.n, c.k);
  p.dtype = c.dtype, p.epilogue = c.epilogue;
  absl::StatusOr<std::string> algo = CublasLtAlgorithm(0, p);
  ASSERT_TRUE(algo.ok()) << algo.status();
  EXPECT_THAT(*algo, ::testing::StartsWith("algo "));
  EXPECT_EQ(*CublasLtAlgorithm(0, p), *algo);
}

TEST(CublasLtGemmTest, AlgorithmIsDescribedAndErrorsNameTheProblem) {
  SKIP_WITHOUT_GPU();
  ASSERT_TRUE(::fusebox::cuda::Driver::Get().SetDevice(0).ok());
  GemmProblem p = RowMajor(128, 256, 64);
  p.dtype = DType::kBFloat16, p.epilogue = GemmEpilogue::kBiasGelu;
  absl::StatusOr<std::string> algo = CublasLtAlgorithm(0, p);
  ASSERT_TRUE(algo.ok()) << algo.status();
  EXPECT_THAT(*algo, ::testing::StartsWith("algo "));
  EXPECT_EQ(*CublasLtAlgorithm(0, p), *algo);  // the heuristic's first, the same each time
  p.k = 0;
  EXPECT_THAT(CublasLtGemm(0, p, nullptr, nullptr, nullptr, nullptr).message(), HasSubstr(p.ToString()));
}

}  // namespace
}  // namespace fusebox::backend::cuda
