// The CPU GEMM through OpenBLAS against a float64 triple loop: odd and tiny
// shapes, transposed and padded views, broadcast batches, every epilogue, a
// residual (C with beta = 1), in f32, bf16 and f16; fresh random inputs each run (seed printed on failure).
// Elements of C outside the m x n blocks must keep their sentinel.
#include "backend/cpu/blas_gemm.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace fusebox::backend::cpu {
namespace {

using test_util::Seed;

struct Strides {
  int64_t batch, row, col;
};

Strides Dense(int64_t rows, int64_t cols) { return {rows * cols, cols, 1}; }
Strides Transposed(int64_t rows, int64_t cols) { return {rows * cols, 1, rows}; }
Strides Padded(int64_t rows, int64_t cols) { return {rows * (cols + 3), cols + 3, 1}; }
Strides PaddedTransposed(int64_t rows, int64_t cols) { return {(rows + 2) * cols, 1, rows + 2}; }
Strides Broadcast(Strides s) { return {0, s.row, s.col}; }

struct Case {
  std::string name;
  int64_t batch, m, n, k;
  Strides a, b;
  int64_t c_row;
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  bool residual = false;  // a residual in C's layout is added (GemmProblem::residual)
};

Case Plain(int64_t m, int64_t n, int64_t k, GemmEpilogue e = GemmEpilogue::kNone) {
  return {absl::StrCat(m, "x", n, "x", k, " ", GemmEpilogueName(e)), 1, m, n, k, Dense(m, k), Dense(k, n), n, e};
}

std::vector<Case> Cases() {
  const int64_t m = 33, n = 17, k = 65;
  std::vector<Case> cases = {
      Plain(1, 1, 1),
      Plain(7, 13, 5),
      Plain(m, n, k),
      {"A transposed", 1, m, n, k, Transposed(m, k), Dense(k, n), n},
      {"B transposed", 1, 7, 13, 5, Dense(7, 5), Transposed(5, 13), 13},
      {"A and B transposed", 1, m, n, k, Transposed(m, k), Transposed(k, n), n},
      {"padded rows of A, B and C", 2, 7, 13, 5, Padded(7, 5), PaddedTransposed(5, 13), 13 + 4},
      {"batched, A broadcast", 3, 7, 13, 5, Broadcast(Dense(7, 5)), Dense(5, 13), 13},
      {"batched, B broadcast, A transposed", 3, m, n, k, Transposed(m, k), Broadcast(Transposed(k, n)), n + 1},
      // A vector of extent 1 may have any stride along the other dim; these have none BLAS takes.
      {"row A and column B with stride 0 along k", 2, 1, 1, 9, {1, 0, 0}, {0, 0, 4}, 1},
      {"k = 0 with bias", 1, 4, 3, 0, Dense(4, 0), Dense(0, 3), 3, GemmEpilogue::kBias},
  };
  for (GemmEpilogue e : {GemmEpilogue::kBias, GemmEpilogue::kBiasRelu, GemmEpilogue::kBiasGelu, GemmEpilogue::kRelu,
                         GemmEpilogue::kGelu}) {
    cases.push_back(Plain(m, n, k, e));
    cases.push_back({absl::StrCat("batched, B transposed, ", GemmEpilogueName(e)), 2, 7, 13, 5, Dense(7, 5),
                     Transposed(5, 13), 13, e});
  }
  for (GemmEpilogue e : {GemmEpilogue::kNone, GemmEpilogue::kBias, GemmEpilogue::kBiasGelu}) {
    cases.push_back({absl::StrCat("residual, ", GemmEpilogueName(e)), 1, m, n, k, Dense(m, k), Dense(k, n), n, e, true});
    cases.push_back({absl::StrCat("residual, batched, padded C, ", GemmEpilogueName(e)), 2, 7, 13, 5,
                     Transposed(7, 5), Dense(5, 13), 13 + 2, e, true});
  }
  cases.push_back({"residual, k = 0", 1, 4, 3, 0, Dense(4, 0), Dense(0, 3), 3, GemmEpilogue::kBias, true});
  return cases;
}

// Elements a view with these sizes and strides spans in its buffer.
int64_t Span(int64_t batch, int64_t rows, int64_t cols, Strides s) {
  if (batch == 0 || rows == 0 || cols == 0) return 1;
  return (batch - 1) * s.batch + (rows - 1) * s.row + (cols - 1) * s.col + 1;
}

struct Buffer {
  DType dtype;
  std::vector<unsigned char> bytes;
  Buffer(DType d, int64_t n) : dtype(d), bytes(n * DTypeSize(d)) {}
  double at(int64_t i) const { return ReadElement(bytes.data(), dtype, i); }
  void set(int64_t i, double v) { WriteElement(bytes.data(), dtype, i, v); }
};

Buffer RandomBuffer(DType dtype, int64_t n) {
  Buffer buf(dtype, n);
  const std::vector<double> values = test_util::RandomValues(n, dtype, test_util::Domain::kAny);
  for (int64_t i = 0; i < n; ++i) buf.set(i, values[i]);
  return buf;
}

double EpilogueRef(GemmEpilogue e, double v) {
  if (e == GemmEpilogue::kRelu || e == GemmEpilogue::kBiasRelu) return std::max(v, 0.0);
  if (e == GemmEpilogue::kGelu || e == GemmEpilogue::kBiasGelu) {
    return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
  }
  return v;
}

// Runs `c` and compares every element of C with the float64 product of the
// stored inputs: one rounding of the dtype (test_util::Tolerance, relative to
// max(1, |want|)) plus f32 accumulation, bounded by 4 sqrt(k) f32 epsilons of
// the sum of |a * b| (and |bias|) the element came from.
void ExpectMatchesReference(DType dtype, const Case& c) {
  SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " ", c.name, " (seed ", Seed(), ")"));
  const GemmProblem p{.batch = c.batch, .m = c.m, .n = c.n, .k = c.k, .dtype = dtype,
                      .a_batch = c.a.batch, .a_row = c.a.row, .a_col = c.a.col,
                      .b_batch = c.b.batch, .b_row = c.b.row, .b_col = c.b.col,
                      .c_batch = c.m * c.c_row, .c_row = c.c_row, .epilogue = c.epilogue, .residual = c.residual};
  const Buffer a = RandomBuffer(dtype, Span(c.batch, c.m, c.k, c.a));
  const Buffer b = RandomBuffer(dtype, Span(c.batch, c.k, c.n, c.b));
  const Buffer bias = RandomBuffer(dtype, c.n);
  constexpr double kSentinel = 1000;  // exact in every float dtype
  const Strides c_strides{p.c_batch, p.c_row, 1};
  Buffer out(dtype, Span(c.batch, c.m, c.n, c_strides));
  for (int64_t i = 0; i * DTypeSize(dtype) < static_cast<int64_t>(out.bytes.size()); ++i) out.set(i, kSentinel);
  const Buffer residual = RandomBuffer(dtype, Span(c.batch, c.m, c.n, c_strides));

  const absl::Status status = BlasGemm(p, a.bytes.data(), b.bytes.data(), out.bytes.data(), bias.bytes.data(),
                                       c.residual ? residual.bytes.data() : nullptr);
  ASSERT_TRUE(status.ok()) << status;

  const bool has_bias = GemmEpilogueHasBias(c.epilogue);
  const double tol = test_util::Tolerance(dtype);
  const double kAccumulation = 4 * std::sqrt(std::max<double>(1, c.k)) * std::ldexp(1.0, -24);
  std::vector<bool> written(out.bytes.size() / DTypeSize(dtype), false);
  int bad = 0;
  for (int64_t t = 0; t < c.batch; ++t) {
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        const int64_t at = t * p.c_batch + i * p.c_row + j;
        double sum = has_bias ? bias.at(j) : 0.0, scale = has_bias ? std::fabs(bias.at(j)) : 0.0;
        if (c.residual) sum += residual.at(at), scale += std::fabs(residual.at(at));
        for (int64_t q = 0; q < c.k; ++q) {
          const double x = a.at(t * c.a.batch + i * c.a.row + q * c.a.col) * b.at(t * c.b.batch + q * c.b.row + j * c.b.col);
          sum += x;
          scale += std::fabs(x);
        }
        const double want = EpilogueRef(c.epilogue, sum);
        written[at] = true;
        const double got = out.at(at);
        const double allowed = tol * std::max(1.0, std::fabs(want)) + kAccumulation * scale;
        if (!(std::fabs(got - want) <= allowed) && bad++ < 3) {
          ADD_FAILURE() << "C[" << t << ", " << i << ", " << j << "] = " << got << ", expected " << want
                        << " (error " << std::fabs(got - want) << ", allowed " << allowed << ")";
        }
      }
    }
  }
  for (size_t at = 0; at < written.size(); ++at) {
    if (!written[at] && out.at(at) != kSentinel) {
      ADD_FAILURE() << "element " << at << " of C's buffer lies outside the result but was written";
      break;
    }
  }
}

TEST(BlasGemmTest, MatchesFloat64OverShapesLayoutsBatchesAndEpilogues) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    for (const Case& c : Cases()) ExpectMatchesReference(dtype, c);
  }
}

TEST(BlasGemmTest, EmptyProblemsWriteNothing) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    Case none = Plain(0, 5, 3);
    ExpectMatchesReference(dtype, none);
    none = Plain(4, 5, 3);
    none.batch = 0;
    ExpectMatchesReference(dtype, none);
  }
}

GemmProblem Small(DType dtype) {
  return {.m = 4, .n = 3, .k = 5, .dtype = dtype, .a_row = 5, .a_col = 1, .b_row = 3, .b_col = 1, .c_row = 3};
}

absl::Status RunSmall(const GemmProblem& p, const void* bias = nullptr) {
  std::vector<double> a(64), b(64), c(64);  // big enough for any dtype and the strides used here
  return BlasGemm(p, a.data(), b.data(), c.data(), bias);
}

TEST(BlasGemmTest, RejectsDTypesItCannotMultiply) {
  for (DType dtype : {DType::kInt32, DType::kInt64, DType::kBool}) {
    const absl::Status status = RunSmall(Small(dtype));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find(DTypeName(dtype)), std::string::npos) << status;
  }
}

TEST(BlasGemmTest, RejectsOperandsWithoutAUnitStride) {
  GemmProblem p = Small(DType::kFloat32);
  p.a_row = 10;
  p.a_col = 2;  // every other column of a wider matrix
  absl::Status status = RunSmall(p);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("operand A"), std::string::npos) << status;

  p = Small(DType::kBFloat16);
  p.b_row = 1;
  p.b_col = 2;  // transposed, but its columns overlap
  status = RunSmall(p);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("operand B"), std::string::npos) << status;

  p = Small(DType::kFloat32);
  p.c_row = 2;  // rows of C overlap
  EXPECT_EQ(RunSmall(p).code(), absl::StatusCode::kInvalidArgument);
}

TEST(BlasGemmTest, RejectsAResidualWithoutItsOwnPointer) {
  GemmProblem p = Small(DType::kFloat32);
  p.residual = true;
  absl::Status status = RunSmall(p);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("residual"), std::string::npos) << status;
  std::vector<float> a(64), b(64), c(64);
  status = BlasGemm(p, a.data(), b.data(), c.data(), nullptr, c.data());  // C in place over the residual
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

TEST(BlasGemmTest, RejectsABiasEpilogueWithoutBias) {
  GemmProblem p = Small(DType::kFloat16);
  p.epilogue = GemmEpilogue::kBiasGelu;
  const absl::Status status = RunSmall(p);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("bias"), std::string::npos) << status;
}

}  // namespace
}  // namespace fusebox::backend::cpu
