// Reductions (sum, prod, mean, max, min, amax, amin, var, logsumexp) through
// the public API, eager and compiled, against float64 references computed here
// from the inputs' stored values: dims (first, middle, last, negative, several,
// all), keepdim, row lengths around vector widths and block sizes, one and many
// rows, non-contiguous inputs, dtypes, NaN/inf, zero-size dims and errors. A GPU
// variant reruns a subset on Device::cuda() and skips without a device.
// Softmax and the norms are in normalization_test.cc (same helpers).
//
// Each distinct (op, shape, dtype) is a kernel compile, so the cases cover each
// dimension of the problem once rather than their product.
#include "tests/frontend/reduction_test_util.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using namespace reduction_test;  // NOLINT
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

const std::vector<double>& SpecialRows() {
  static const std::vector<double> v = {1, NAN, 3, -INFINITY, 2, 5, INFINITY, 0, 1, -INFINITY, -INFINITY, -INFINITY};
  return v;
}

// -------------------------------------------------------------- dims, keepdim

TEST(ReductionDimsTest, EveryDimSpellingAndKeepdim) {
  const Tensor x = RandomTensor({4, 5, 6}, kF32);
  const std::vector<std::vector<int64_t>> dim_sets = {{0}, {1}, {2}, {-1}, {-2}, {0, 2}, {2, 0}, {-1, -2}, {0, 1, 2}};
  for (const auto& dims : dim_sets) {
    for (bool keep : {false, true}) {
      const std::string tag = absl::StrCat("[", absl::StrJoin(dims, ","), "] keepdim=", keep);
      SCOPED_TRACE(tag);
      Check("sum" + tag, [&](const Tensor& t) { return sum(t, dims, keep); }, x, RefSum(x, dims, keep));
      Check("mean" + tag, [&](const Tensor& t) { return mean(t, dims, keep); }, x, RefMean(x, dims, keep));
      Check("amax" + tag, [&](const Tensor& t) { return amax(t, dims, keep); }, x,
            RefReduce(x, dims, keep, kF32, MaxOf));
      Check("amin" + tag, [&](const Tensor& t) { return amin(t, dims, keep); }, x,
            RefReduce(x, dims, keep, kF32, MinOf));
      if (dims.size() == 1) {
        const int64_t d = dims[0];
        Check("sum(dim)" + tag, [&](const Tensor& t) { return sum(t, d, keep); }, x, RefSum(x, dims, keep));
        Check("mean(dim)" + tag, [&](const Tensor& t) { return mean(t, d, keep); }, x, RefMean(x, dims, keep));
        Check("max(dim)" + tag, [&](const Tensor& t) { return max(t, d, keep); }, x,
              RefReduce(x, dims, keep, kF32, MaxOf));
        Check("min(dim)" + tag, [&](const Tensor& t) { return min(t, d, keep); }, x,
              RefReduce(x, dims, keep, kF32, MinOf));
      }
    }
  }
}

TEST(ReductionDimsTest, FullReductions) {
  for (const Shape& shape : std::vector<Shape>{{}, {1}, {3, 5}, {1000, 7}, {65536}}) {
    SCOPED_TRACE(ShapeToString(shape));
    const Tensor x = RandomTensor(shape, kF32);
    Check("sum()", [](const Tensor& t) { return sum(t); }, x, RefSum(x, {}, false));
    Check("mean()", [](const Tensor& t) { return mean(t); }, x, RefMean(x, {}, false));
    Check("max()", [](const Tensor& t) { return max(t); }, x, RefReduce(x, {}, false, kF32, MaxOf));
    Check("min()", [](const Tensor& t) { return min(t); }, x, RefReduce(x, {}, false, kF32, MinOf));
    Check("amax()", [](const Tensor& t) { return amax(t); }, x, RefReduce(x, {}, false, kF32, MaxOf));
    Check("amax({}, keepdim)", [](const Tensor& t) { return amax(t, {}, true); }, x,
          RefReduce(x, {}, true, kF32, MaxOf));
    EXPECT_EQ(sum(x).dim(), 0);
    EXPECT_EQ(sum(x, std::vector<int64_t>{}, true).shape(), Shape(shape.size(), 1));
  }
}

// ------------------------------------------------------------- row lengths

TEST(ReductionRowLengthTest, SumAndMaxOverLastDim) {
  for (int64_t len : {1, 7, 31, 32, 33, 1000, 1024, 1025, 4097, 65536}) {
    for (int64_t rows : {3, 1}) {
      if (rows == 1 && len != 7 && len != 1025 && len != 65536) continue;
      SCOPED_TRACE(absl::StrCat(rows, " rows of ", len));
      const Tensor x = RandomTensor({rows, len}, kF32);
      Check("sum(-1)", [](const Tensor& t) { return sum(t, -1); }, x, RefSum(x, {-1}, false));
      Check("max(-1)", [](const Tensor& t) { return max(t, -1); }, x, RefReduce(x, {-1}, false, kF32, MaxOf));
      if (len == 33 || len == 4097) {
        Check("mean(-1, keepdim)", [](const Tensor& t) { return mean(t, -1, true); }, x, RefMean(x, {-1}, true));
        Check("min(-1)", [](const Tensor& t) { return min(t, -1); }, x, RefReduce(x, {-1}, false, kF32, MinOf));
      }
    }
  }
}

TEST(ReductionRowLengthTest, ColumnSums) {
  for (int64_t len : {33, 1025}) {
    SCOPED_TRACE(len);
    const Tensor x = RandomTensor({len, 3}, kF32);
    Check("sum(0)", [](const Tensor& t) { return sum(t, 0); }, x, RefSum(x, {0}, false));
    Check("amax({0}, keepdim)", [](const Tensor& t) { return amax(t, {0}, true); }, x,
          RefReduce(x, {0}, true, kF32, MaxOf));
  }
}

// --------------------------------------------------------- non-contiguous

TEST(ReductionLayoutTest, TransposedAndNarrowed) {
  const Tensor xs[] = {test_util::RandomTransposed(7, 33, kF32), test_util::RandomNarrowed(7, 33, kF32),
                       RandomTensor({6, 5, 4}, kF32).permute({2, 0, 1})};
  for (const Tensor& x : xs) {
    ASSERT_FALSE(x.is_contiguous());
    Check("sum(-1)", [](const Tensor& t) { return sum(t, -1); }, x, RefSum(x, {-1}, false));
    Check("sum(0, keepdim)", [](const Tensor& t) { return sum(t, 0, true); }, x, RefSum(x, {0}, true));
    Check("sum()", [](const Tensor& t) { return sum(t); }, x, RefSum(x, {}, false));
    Check("amax(0)", [](const Tensor& t) { return amax(t, {0}); }, x, RefReduce(x, {0}, false, kF32, MaxOf));
    Check("mean({0, 1})", [](const Tensor& t) { return mean(t, {0, 1}); }, x, RefMean(x, {0, 1}, false));
    Check("var(-1)", [](const Tensor& t) { return var(t, {-1}); }, x, RefVar(x, {-1}, 1, false));
  }
}

// ------------------------------------------------------------ column sums

// Reductions whose reduced dim is not the innermost. On the GPU, few columns
// split each column into chunks (CudaRowSpread::split: a partial and a combine
// kernel); one row, short columns and two-pass ops (var) do not split. Fresh
// random inputs every run.
void CheckColumnReductions(const Device& device) {
  struct Case {
    Shape shape;
    int64_t dim;
  };
  const std::vector<Case> cases = {{{1, 37}, 0},      {{129, 3}, 0},       {{1031, 257}, 0},
                                   {{8192, 1000}, 0}, {{7, 1500, 33}, 1}, {{64, 300}, 0}};
  for (const auto& [shape, dim] : cases) {
    SCOPED_TRACE(absl::StrCat(ShapeToString(shape), " over dim ", dim));
    const Tensor x = RandomTensor(shape, kF32, Domain::kAny, device);
    const int64_t d = dim;
    Check("sum", [d](const Tensor& t) { return sum(t, d); }, x, RefSum(x, {d}, false));
    Check("mean(keepdim)", [d](const Tensor& t) { return mean(t, d, true); }, x, RefMean(x, {d}, true));
    Check("max", [d](const Tensor& t) { return max(t, d); }, x, RefReduce(x, {d}, false, kF32, MaxOf));
    Check("argmax", [d](const Tensor& t) { return argmax(t, d); }, x, RefReduce(x, {d}, false, kI64, [](const Row& r) {
            return static_cast<double>(std::max_element(r.begin(), r.end()) - r.begin());
          }),
          1);  // over a size-1 dim every index is 0: a constant, stored by a fill kernel (no reduction)
    // Two accumulators in one pass, combined per column.
    Check("sum + amax", [d](const Tensor& t) { return sum(t, d) + amax(t, {d}); }, x,
          RefReduce(x, {d}, false, kF32, [](const Row& r) { return SumOf(r) + MaxOf(r); },
                    [](const Row& r) { return 1e-6 * AbsSumOf(r); }));
    Check("var", [d](const Tensor& t) { return var(t, {d}); }, x, RefVar(x, {d}, 1, false));
    if (shape[0] == 1031) {
      const Tensor h = x.to(kBF16);
      Check("sum bf16", [d](const Tensor& t) { return sum(t, d); }, h, RefSum(h, {d}, false));
    }
  }
}

TEST(ReductionColumnTest, OddWideMiddleAndKeepdim) { CheckColumnReductions(Device::cpu()); }

// ------------------------------------------------------------------ dtypes

TEST(ReductionDTypeTest, HalfTypesAccumulateInFloat32) {
  for (DType dtype : {kBF16, kF16}) {
    for (const Shape& shape : std::vector<Shape>{{3, 33}, {3, 1000}}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), ShapeToString(shape)));
      const Tensor x = RandomTensor(shape, dtype);
      Check("sum(-1)", [](const Tensor& t) { return sum(t, -1); }, x, RefSum(x, {-1}, false));
      Check("mean(-1)", [](const Tensor& t) { return mean(t, -1); }, x, RefMean(x, {-1}, false));
      Check("max(-1)", [](const Tensor& t) { return max(t, -1); }, x, RefReduce(x, {-1}, false, dtype, MaxOf));
      Check("sum(0)", [](const Tensor& t) { return sum(t, 0); }, x, RefSum(x, {0}, false));
      Check("sum()", [](const Tensor& t) { return sum(t); }, x, RefSum(x, {}, false));
    }
  }
  // 4096 ones: a bfloat16 accumulator would stop at 256.
  const Tensor ones_bf16 = Tensor::from_vector(std::vector<double>(4096, 1.0), {4096}, kBF16);
  EXPECT_EQ(sum(ones_bf16).item(), 4096);
  EXPECT_EQ(compile([](const Tensor& t) { return sum(t); })(ones_bf16).item(), 4096);
}

TEST(ReductionDTypeTest, IntegersAndBool) {
  for (DType dtype : {kI32, kI64}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor x = RandomTensor({5, 33}, dtype);
    Check("sum(-1)", [](const Tensor& t) { return sum(t, -1); }, x, RefSum(x, {-1}, false));
    Check("sum(0)", [](const Tensor& t) { return sum(t, 0); }, x, RefSum(x, {0}, false));
    Check("sum()", [](const Tensor& t) { return sum(t); }, x, RefSum(x, {}, false));
    Check("max(-1)", [](const Tensor& t) { return max(t, -1); }, x, RefReduce(x, {-1}, false, dtype, MaxOf));
    Check("amin({0, 1})", [](const Tensor& t) { return amin(t, {0, 1}); }, x,
          RefReduce(x, {0, 1}, false, dtype, MinOf));
    // Products of 40 values in {-1, 1, 2}: up to 2^40, so int32 input must accumulate in int64.
    std::vector<double> v = test_util::RandomValues(3 * 40, kI32, Domain::kCoarse);
    for (double& e : v) e = e >= 1 ? 2 : (e < 0 ? -1 : 1);
    for (int k = 0; k < 40; ++k) v[k] = 2;  // row 0 is exactly 2^40
    const Tensor p = Tensor::from_vector(v, {3, 40}, dtype);
    Check("prod(-1)", [](const Tensor& t) { return prod(t, -1); }, p, RefReduce(p, {-1}, false, kI64, ProdOf));
    Check("prod(0, keepdim)", [](const Tensor& t) { return prod(t, 0, true); }, p,
          RefReduce(p, {0}, true, kI64, ProdOf));
  }
  // int32 sums past 2^31.
  std::vector<int32_t> big(2 * 7);
  for (int32_t& e : big) e = (1 << 30) + static_cast<int32_t>(test_util::RandomValue(kI32, Domain::kAny));
  const Tensor b = Tensor::from_vector(big, {2, 7});
  Check("sum(-1) of int32 near 2^30", [](const Tensor& t) { return sum(t, -1); }, b, RefSum(b, {-1}, false));
  // bool sums count the trues, as int64.
  const Tensor flags = RandomTensor({4, 1025}, kBool);
  Check("sum(-1) of bool", [](const Tensor& t) { return sum(t, -1); }, flags, RefSum(flags, {-1}, false));
  Check("sum() of bool", [](const Tensor& t) { return sum(t); }, flags, RefSum(flags, {}, false));
  EXPECT_EQ(sum(flags).dtype(), kI64);
  EXPECT_EQ(sum(RandomTensor({3}, kI32)).dtype(), kI64);
  EXPECT_EQ(max(RandomTensor({3}, kI32)).dtype(), kI32);
}

TEST(ReductionDTypeTest, FloatProducts) {
  const Tensor x = RandomTensor({4, 33}, kF32, Domain::kNonZero);  // ±[0.5, 3]
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{-1}, {0}}) {
    Want want = RefReduce(x, dims, false, kF32, ProdOf);
    want.floor = 0;  // products span many magnitudes: relative error
    Check("prod", [&](const Tensor& t) { return prod(t, dims[0]); }, x, want);
  }
  const Tensor small = RandomTensor({3, 5}, kF32, Domain::kNonZero);
  Want want = RefReduce(small, {}, false, kF32, ProdOf);
  want.floor = 0;
  Check("prod()", [](const Tensor& t) { return prod(t); }, small, want);
}

// --------------------------------------------------------- var, logsumexp

TEST(ReductionVarTest, CorrectionsDimsAndKeepdim) {
  const Tensor x = RandomTensor({5, 33}, kF32);
  for (double c : {0.0, 1.0}) {
    for (bool keep : {false, true}) {
      for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{-1}, {0}, {0, 1}, {}}) {
        SCOPED_TRACE(absl::StrCat("correction ", c, " keepdim ", keep, " dims [", absl::StrJoin(dims, ","), "]"));
        Check("var", [&](const Tensor& t) { return var(t, dims, c, keep); }, x, RefVar(x, dims, c, keep));
      }
    }
  }
  // One element per slice: correction 1 divides 0 by 0.
  const Tensor col = RandomTensor({4, 1}, kF32);
  Check("var(-1) of length 1", [](const Tensor& t) { return var(t, {-1}); }, col, RefVar(col, {-1}, 1, false));
  EXPECT_TRUE(std::isnan(var(col, {-1}).to_double_vector()[0]));
  EXPECT_EQ(var(col, {-1}, 0).to_double_vector()[0], 0.0);
}

TEST(ReductionLogSumExpTest, DimsAndKeepdim) {
  const Tensor x = RandomTensor({4, 1025}, kF32);
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{-1}, {0}, {0, 1}}) {
    for (bool keep : {false, true}) {
      SCOPED_TRACE(absl::StrCat("[", absl::StrJoin(dims, ","), "] keepdim ", keep));
      Check("logsumexp", [&](const Tensor& t) { return logsumexp(t, dims, keep); }, x,
            RefReduce(x, dims, keep, kF32, LogSumExpOf));
    }
  }
  // Large values: the max shift keeps exp from overflowing.
  const Tensor big = RandomTensor({3, 7}, kF32) * 100.0 + 200.0;
  Check("logsumexp of ~200", [](const Tensor& t) { return logsumexp(t, {-1}); }, big,
        RefReduce(big, {-1}, false, kF32, LogSumExpOf));
}

// ----------------------------------------------------------------- NaN, inf

TEST(ReductionSpecialValuesTest, NanPropagatesAndInfinitiesAreKept) {
  // Rows: [1, NaN, 3], [-inf, 2, 5], [inf, 0, 1], [-inf, -inf, -inf].
  const Tensor x = Tensor::from_vector(SpecialRows(), {4, 3}, kF32);
  for (auto [name, fn] : std::vector<std::pair<const char*, RowFn>>{
           {"max", MaxOf}, {"min", MinOf}, {"sum", SumOf}, {"logsumexp", LogSumExpOf}}) {
    SCOPED_TRACE(name);
    const Want want = RefReduce(x, {-1}, false, kF32, fn);
    const Fn call = [n = std::string(name)](const Tensor& t) {
      return n == "max" ? max(t, -1) : n == "min" ? min(t, -1) : n == "sum" ? sum(t, -1) : logsumexp(t, {-1});
    };
    Check(name, call, x, want);
  }
  EXPECT_TRUE(std::isnan(max(x, -1).to_double_vector()[0]));
  EXPECT_EQ(logsumexp(x, {-1}).to_double_vector()[3], -INFINITY);
  // A NaN first, in the middle or last of rows long enough to be vectorized.
  std::vector<double> v = test_util::RandomValues(4 * 33, kF32, Domain::kAny);
  v[0] = v[33 + 16] = v[2 * 33 + 32] = NAN;
  for (DType dtype : {kF32, kBF16}) {
    const Tensor y = Tensor::from_vector(v, {4, 33}, dtype);
    Check("max(-1) with NaNs", [](const Tensor& t) { return max(t, -1); }, y, RefReduce(y, {-1}, false, dtype, MaxOf));
    Check("amin({0, 1}) with NaNs", [](const Tensor& t) { return amin(t, {0, 1}); }, y,
          RefReduce(y, {0, 1}, false, dtype, MinOf));
  }
  EXPECT_TRUE(std::isnan(max(Tensor::from_vector(v, {4, 33}, kF32)).item()));
}

// ------------------------------------------------------------ zero-size dims

TEST(ReductionEmptyTest, SumIsZeroMeanIsNanProdIsOne) {
  const Tensor x = RandomTensor({3, 0}, kF32);
  Check("sum(1)", [](const Tensor& t) { return sum(t, 1); }, x, RefSum(x, {1}, false), -1);
  Check("sum()", [](const Tensor& t) { return sum(t); }, x, RefSum(x, {}, false), -1);
  Check("mean(1)", [](const Tensor& t) { return mean(t, 1); }, x, RefMean(x, {1}, false), -1);
  Check("prod(1)", [](const Tensor& t) { return prod(t, 1); }, x, RefReduce(x, {1}, false, kF32, ProdOf), -1);
  EXPECT_EQ(sum(x, 1).to_double_vector(), std::vector<double>(3, 0.0));
  EXPECT_TRUE(std::isnan(mean(x).item()));
  const Tensor ints = RandomTensor({3, 0}, kI32);
  Check("sum(1) of int32", [](const Tensor& t) { return sum(t, 1); }, ints, RefSum(ints, {1}, false), -1);
  // Reducing a non-empty dim of an empty tensor is fine, even for max.
  const Tensor rows0 = RandomTensor({0, 4}, kF32);
  Check("max(1) of [0, 4]", [](const Tensor& t) { return max(t, 1); }, rows0,
        RefReduce(rows0, {1}, false, kF32, MaxOf), -1);
  Check("sum(0) of [0, 4]", [](const Tensor& t) { return sum(t, 0); }, rows0, RefSum(rows0, {0}, false), -1);
}

// ------------------------------------------------------------------- errors

TEST(ReductionErrorsTest, MessagesNameTheOp) {
  const Tensor empty = RandomTensor({3, 0}, kF32);
  EXPECT_THAT([&] { (void)max(empty, 1); },
              ThrowsMessage<Error>(AllOf(HasSubstr("max"), HasSubstr("zero-size"), HasSubstr("[3, 0]"))));
  EXPECT_THAT([&] { (void)amin(empty, {-1}); }, ThrowsMessage<Error>(AllOf(HasSubstr("min"), HasSubstr("zero-size"))));
  EXPECT_THAT([&] { (void)max(empty); }, ThrowsMessage<Error>(HasSubstr("max")));
  const Tensor ints = RandomTensor({3, 4}, kI32);
  EXPECT_THAT([&] { (void)mean(ints, 1); }, ThrowsMessage<Error>(AllOf(HasSubstr("mean"), HasSubstr("int32"))));
  EXPECT_THAT([&] { (void)var(ints); }, ThrowsMessage<Error>(AllOf(HasSubstr("var"), HasSubstr("int32"))));
  EXPECT_THAT([&] { (void)max(RandomTensor({4}, kBool)); },
              ThrowsMessage<Error>(AllOf(HasSubstr("max"), HasSubstr("bool"))));
  const Tensor x = RandomTensor({2, 3, 4}, kF32);
  EXPECT_THAT([&] { (void)sum(x, {1, -2}); }, ThrowsMessage<Error>(AllOf(HasSubstr("sum"), HasSubstr("repeated"))));
  EXPECT_THAT([&] { (void)amax(x, {0, 0}); }, ThrowsMessage<Error>(AllOf(HasSubstr("max"), HasSubstr("repeated"))));
  EXPECT_THAT([&] { (void)mean(x, {2, -1}); }, ThrowsMessage<Error>(AllOf(HasSubstr("mean"), HasSubstr("repeated"))));
  EXPECT_THAT([&] { (void)sum(x, 3); }, ThrowsMessage<Error>(HasSubstr("sum")));
  EXPECT_THAT([&] { (void)var(x, {1, 1}); }, ThrowsMessage<Error>(AllOf(HasSubstr("var"), HasSubstr("repeated"))));
  EXPECT_THAT([&] { (void)logsumexp(x, {-1, 2}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("logsumexp"), HasSubstr("repeated"))));
  // Inside a compiled function too, and the function still works afterwards.
  auto f = compile([](const Tensor& t) { return max(exp(t), 1); });
  EXPECT_THAT([&] { (void)f(empty); }, ThrowsMessage<Error>(AllOf(HasSubstr("max"), HasSubstr("zero-size"))));
  const Tensor ok = RandomTensor({2, 5}, kF32);
  EXPECT_TRUE(Close(f(ok), RefReduce(exp(ok), {1}, false, kF32, MaxOf), "max(exp(x), 1) after an error"));
}

// ---------------------------------------------------------------------- GPU

TEST(ReductionCudaTest, SumMaxAndFullSum) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda();
  for (const Shape& shape : std::vector<Shape>{{3, 1}, {5, 33}, {4, 1025}, {2, 65536}, {1000, 7}}) {
    SCOPED_TRACE(ShapeToString(shape));
    const Tensor x = RandomTensor(shape, kF32, Domain::kAny, gpu);
    Check("sum(-1, keepdim)", [](const Tensor& t) { return sum(t, -1, true); }, x, RefSum(x, {-1}, true));
    Check("max(-1, keepdim)", [](const Tensor& t) { return max(t, -1, true); }, x,
          RefReduce(x, {-1}, true, kF32, MaxOf));
    Check("sum(0)", [](const Tensor& t) { return sum(t, 0); }, x, RefSum(x, {0}, false));
    Check("amin({0, 1})", [](const Tensor& t) { return amin(t, {0, 1}); }, x, RefReduce(x, {0, 1}, false, kF32, MinOf));
    const Tensor h = x.to(kBF16);
    Check("sum(-1) bf16", [](const Tensor& t) { return sum(t, -1); }, h, RefSum(h, {-1}, false));
  }
  for (DType dtype : {kF32, kBF16, kI32}) {
    const Tensor big = RandomTensor({1 << 20}, dtype, Domain::kAny, gpu);
    Check("sum() of 2^20", [](const Tensor& t) { return sum(t); }, big, RefSum(big, {}, false));
    Check("max() of 2^20", [](const Tensor& t) { return max(t); }, big, RefReduce(big, {}, false, dtype, MaxOf));
  }
  const Tensor t = test_util::RandomTransposed(33, 1025, kF32, Domain::kAny, gpu);
  Check("sum(-1) transposed", [](const Tensor& a) { return sum(a, -1); }, t, RefSum(t, {-1}, false));
  const Tensor s = Tensor::from_vector(SpecialRows(), {4, 3}, kF32, gpu);
  Check("max(-1) specials", [](const Tensor& a) { return max(a, -1); }, s, RefReduce(s, {-1}, false, kF32, MaxOf));
  Check("logsumexp specials", [](const Tensor& a) { return logsumexp(a, {-1}); }, s,
        RefReduce(s, {-1}, false, kF32, LogSumExpOf));
}

TEST(ReductionCudaTest, ColumnReductionsSplitOrNot) {
  SKIP_WITHOUT_CUDA();
  CheckColumnReductions(Device::cuda());
  // 8192 x 1000 splits: a partial and a combine kernel under the plan's name.
  auto compiled = compile([](const Tensor& t) { return sum(t, 0); });
  compiled(RandomTensor({8192, 1000}, kF32, Domain::kAny, Device::cuda()));
  ASSERT_EQ(compiled.kernels().size(), 1u);
  EXPECT_EQ(compiled.kernels()[0].name, "red_sum_0");
  EXPECT_THAT(compiled.kernels()[0].source, HasSubstr("red_sum_0_partial("));
}

// Column tiles (backend/cuda/column_tiles.h) beyond CheckColumnReductions'
// 8192 x 1000: long columns (two tile steps per group, a ragged last group),
// a pointer off 16-byte alignment (the tile's scalar path), and an operand
// broadcast over the columns.
TEST(ReductionCudaTest, ColumnTilesLongMisalignedAndScaled) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda();
  const Tensor tall = RandomTensor({20000, 256}, kF32, Domain::kAny, gpu);
  Check("sum(0) of 20000 rows", [](const Tensor& t) { return sum(t, 0); }, tall, RefSum(tall, {0}, false));
  Check("amin(0) of 20000 rows", [](const Tensor& t) { return amin(t, {0}); }, tall,
        RefReduce(tall, {0}, false, kF32, MinOf));
  const Tensor base = RandomTensor({8192 * 1000 + 1}, kF32, Domain::kAny, gpu);
  const Tensor shifted = base.narrow(0, 1, 8192 * 1000).reshape({8192, 1000});
  ASSERT_EQ(shifted.storage_offset(), 1);
  Check("sum(0) 4 bytes off alignment", [](const Tensor& t) { return sum(t, 0); }, shifted, RefSum(shifted, {0}, false));
  Check("mean(0) 4 bytes off alignment", [](const Tensor& t) { return mean(t, 0); }, shifted,
        RefMean(shifted, {0}, false));

  // sum(x * x[:, :1], 0): the first column scales each row of every column.
  const Tensor x = RandomTensor({4096, 512}, kF32, Domain::kAny, gpu);
  const std::vector<double> v = x.to_double_vector();
  Want want{.shape = {512}};
  want.values.assign(512, 0);
  want.slack.assign(512, 0);
  for (int64_t j = 0; j < 4096; ++j) {
    for (int64_t c = 0; c < 512; ++c) {
      const double term = v[j * 512 + c] * v[j * 512];
      want.values[c] += term;
      want.slack[c] += 1e-6 * std::fabs(term);
    }
  }
  Check("sum(x * x[:, :1], 0)", [](const Tensor& t) { return sum(t * t.narrow(1, 0, 1), 0); }, x, want);
}

}  // namespace
}  // namespace fusebox
