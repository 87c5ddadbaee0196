// cross_entropy (frontend/loss.h) against a float64 reference written out
// from torch.nn.functional.cross_entropy's definition: each reduction,
// ignore_index, label smoothing, [N, C], [N, C, d1, d2] and [C] logits,
// int64 and int32 targets, float32 and bfloat16 logits, eager and compiled;
// out-of-range targets and bad arguments are errors. GPU tests skip without
// a device.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

std::mt19937_64& Rng() {
  static std::mt19937_64 rng(2424);  // fixed: a failure reproduces
  return rng;
}

// Logits [N, C, rest...] (or [C]) as float64, row-major, and their shape.
struct Problem {
  Shape logits_shape;
  std::vector<double> logits;
  std::vector<int64_t> target;  // one per position: logits' shape without dim 1
};

int64_t Product(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Classes drawn uniformly; each position is ignore_index with probability `ignored`.
Problem Draw(const Shape& logits_shape, int64_t ignore_index, double ignored) {
  Problem p{.logits_shape = logits_shape};
  std::normal_distribution<double> normal(0.0, 2.0);
  for (int64_t i = 0; i < Product(logits_shape); ++i) p.logits.push_back(normal(Rng()));
  const int64_t classes = logits_shape.size() == 1 ? logits_shape[0] : logits_shape[1];
  const int64_t positions = classes == 0 ? 0 : Product(logits_shape) / classes;
  std::uniform_int_distribution<int64_t> cls(0, classes - 1);
  std::bernoulli_distribution skip(ignored);
  for (int64_t i = 0; i < positions; ++i) p.target.push_back(skip(Rng()) ? ignore_index : cls(Rng()));
  return p;
}

Shape TargetShape(const Shape& logits_shape) {
  Shape t = logits_shape;
  t.erase(t.begin() + (logits_shape.size() == 1 ? 0 : 1));
  return t;
}

// F.cross_entropy in float64: per position (n, r) with target y not ignored,
// (1 - eps) * (lse - x[y]) + eps * mean_c (lse - x[c]); ignored positions 0;
// "mean" divides the sum by the number not ignored.
std::vector<double> CrossEntropyRef(const Problem& p, const std::vector<double>& logits, int64_t ignore_index,
                                    const std::string& reduction, double eps) {
  const Shape& s = p.logits_shape;
  const int64_t classes = s.size() == 1 ? s[0] : s[1];
  const int64_t n = s.size() == 1 ? 1 : s[0];
  const int64_t rest = classes == 0 || n == 0 ? 0 : Product(s) / (n * classes);
  std::vector<double> loss;
  double total = 0, count = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t r = 0; r < rest; ++r) {
      auto x = [&](int64_t c) { return logits[(i * classes + c) * rest + r]; };
      const int64_t y = p.target[i * rest + r];
      if (y == ignore_index) {
        loss.push_back(0);
        continue;
      }
      double m = -INFINITY, sum = 0, mean_nll = 0;
      for (int64_t c = 0; c < classes; ++c) m = std::max(m, x(c));
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(x(c) - m);
      const double lse = m + std::log(sum);
      for (int64_t c = 0; c < classes; ++c) mean_nll += (lse - x(c)) / static_cast<double>(classes);
      loss.push_back((1 - eps) * (lse - x(y)) + eps * mean_nll);
      total += loss.back();
      count += 1;
    }
  }
  if (reduction == "none") return loss;
  if (reduction == "sum") return {total};
  return {total / count};  // 0 / 0: NaN
}

struct Args {
  int64_t ignore_index = -100;
  std::string reduction = "mean";
  double eps = 0;
};

// allclose, NaN matching only NaN: rtol one rounding of the result's dtype
// (bfloat16 logits compute in float32), atol for sums of ~N terms.
void ExpectAllClose(const Tensor& got, const std::vector<double>& want, const Shape& shape, DType dtype) {
  ASSERT_EQ(got.dtype(), dtype);
  ASSERT_EQ(got.shape(), shape);
  const double rtol = dtype == DType::kFloat32 ? 2e-6 : 8e-3, atol = dtype == DType::kFloat32 ? 1e-5 : 1e-3;
  const std::vector<double> g = got.to(Device::cpu()).to_double_vector();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << "element " << i << ": got " << g[i] << ", want NaN";
      continue;
    }
    ASSERT_LE(std::fabs(g[i] - want[i]), atol + rtol * std::fabs(want[i]))
        << "element " << i << ": got " << g[i] << ", want " << want[i];
  }
}

// One problem, eager and compiled (twice: the cached plan), against float64.
void CheckCrossEntropy(Device device, DType dtype, DType target_dtype, const Shape& logits_shape, const Args& args,
                       double ignored = 0.25) {
  SCOPED_TRACE(testing::Message() << DTypeName(dtype) << ShapeToString(logits_shape) << " target "
                                  << DTypeName(target_dtype) << " ignore_index " << args.ignore_index << " "
                                  << args.reduction << " label_smoothing " << args.eps << " on " << device.str());
  const Problem p = Draw(logits_shape, args.ignore_index, ignored);
  const Tensor logits = Tensor::from_vector(p.logits, logits_shape, DType::kFloat32).to(dtype);
  const std::vector<double> want =
      CrossEntropyRef(p, logits.to_double_vector(), args.ignore_index, args.reduction, args.eps);  // as rounded
  const Shape want_shape = args.reduction == "none" ? TargetShape(logits_shape) : Shape{};
  const Tensor x = logits.to(device);
  const Tensor t = Tensor::from_vector(p.target, TargetShape(logits_shape)).to(target_dtype).to(device);
  ExpectAllClose(cross_entropy(x, t, args.ignore_index, args.reduction, args.eps), want, want_shape, dtype);
  auto fn = compile([&](const Tensor& x, const Tensor& t) {
    return cross_entropy(x, t, args.ignore_index, args.reduction, args.eps);
  });
  ExpectAllClose(fn(x, t), want, want_shape, dtype);
  ExpectAllClose(fn(x, t), want, want_shape, dtype);
}

void CheckReductionsAndSmoothing(Device device) {
  for (const std::string reduction : {"mean", "sum", "none"}) {
    for (double eps : {0.0, 0.1, 1.0}) {
      CheckCrossEntropy(device, DType::kFloat32, DType::kInt64, {13, 7}, {.reduction = reduction, .eps = eps});
      CheckCrossEntropy(device, DType::kFloat32, DType::kInt64, {3, 5, 4, 2}, {.reduction = reduction, .eps = eps});
    }
  }
}

void CheckLayoutsAndDtypes(Device device) {
  // [C] logits with a 0-d target, ignored or not.
  for (const std::string reduction : {"mean", "sum", "none"}) {
    CheckCrossEntropy(device, DType::kFloat32, DType::kInt64, {9}, {.reduction = reduction, .eps = 0.2}, 0.0);
    CheckCrossEntropy(device, DType::kFloat32, DType::kInt64, {9}, {.reduction = reduction}, 1.0);
  }
  // int32 targets, a custom ignore_index that is a class, bf16 logits.
  CheckCrossEntropy(device, DType::kFloat32, DType::kInt32, {11, 6, 3}, {.eps = 0.05});
  CheckCrossEntropy(device, DType::kFloat32, DType::kInt32, {11, 6}, {.ignore_index = 2, .reduction = "none"});
  CheckCrossEntropy(device, DType::kFloat32, DType::kInt64, {11, 6}, {.ignore_index = 2, .eps = 0.3});
  for (const std::string reduction : {"mean", "sum", "none"}) {
    CheckCrossEntropy(device, DType::kBFloat16, DType::kInt64, {17, 33}, {.reduction = reduction, .eps = 0.1});
    CheckCrossEntropy(device, DType::kBFloat16, DType::kInt32, {4, 10, 5}, {.reduction = reduction});
  }
  // Long rows (the reductions' looped kernels).
  CheckCrossEntropy(device, DType::kFloat32, DType::kInt64, {6, 5000}, {.eps = 0.1});
}

void CheckEdges(Device device) {
  // Every position ignored: "mean" is 0 / 0 = NaN as PyTorch, "sum" 0.
  CheckCrossEntropy(device, DType::kFloat32, DType::kInt64, {5, 4}, {}, 1.0);
  CheckCrossEntropy(device, DType::kFloat32, DType::kInt64, {5, 4}, {.reduction = "sum", .eps = 0.5}, 1.0);
  // No positions at all.
  CheckCrossEntropy(device, DType::kFloat32, DType::kInt64, {0, 4}, {});
  CheckCrossEntropy(device, DType::kFloat32, DType::kInt64, {0, 4}, {.reduction = "sum"});
  CheckCrossEntropy(device, DType::kFloat32, DType::kInt64, {3, 4, 0}, {.reduction = "none"});
}

// A target outside [0, C) that is not ignore_index raises, eager and when
// the compiled call returns; -100 (ignored) next to valid targets does not.
void CheckOutOfRangeTargets(Device device) {
  const Tensor x = randn({4, 5}, Device::cpu(), 7).to(device);
  auto fn = compile([](const Tensor& x, const Tensor& t) { return cross_entropy(x, t); });
  for (const std::vector<int64_t>& bad : {std::vector<int64_t>{0, 5, 1, 2}, std::vector<int64_t>{0, -1, 1, -100},
                                          std::vector<int64_t>{1000, 1, 1, 1}}) {
    for (DType target_dtype : {DType::kInt64, DType::kInt32}) {
      const Tensor t = Tensor::from_vector(bad, {4}).to(target_dtype).to(device);
      SCOPED_TRACE(t.str());
      EXPECT_THAT([&] { cross_entropy(x, t).item(); }, ThrowsMessage<Error>(HasSubstr("out of range")));
      EXPECT_THAT([&] { fn(x, t).item(); }, ThrowsMessage<Error>(HasSubstr("out of range")));
    }
  }
  const Tensor ok = Tensor::from_vector(std::vector<int64_t>{-100, 4, 0, -100}, {4}).to(device);
  EXPECT_TRUE(std::isfinite(cross_entropy(x, ok).item()));
  EXPECT_TRUE(std::isfinite(fn(x, ok).item()));
}

TEST(CrossEntropyTest, ReductionsAndLabelSmoothingOnTheCpu) { CheckReductionsAndSmoothing(Device::cpu()); }
TEST(CrossEntropyTest, LayoutsAndDtypesOnTheCpu) { CheckLayoutsAndDtypes(Device::cpu()); }
TEST(CrossEntropyTest, AllIgnoredAndEmptyOnTheCpu) { CheckEdges(Device::cpu()); }
TEST(CrossEntropyTest, OutOfRangeTargetsAreErrorsOnTheCpu) { CheckOutOfRangeTargets(Device::cpu()); }

// The mean loss over [N, C] is two kernels: the log_softmax rows, then the
// gather, the masks, the smoothing term and both sums fused after them.
TEST(CrossEntropyTest, CompiledMeanFuses) {
  const Tensor x = randn({64, 100}, Device::cpu(), 3);
  const Tensor t = Tensor::from_vector(std::vector<int64_t>(64, 3), {64});
  auto fn = compile([](const Tensor& x, const Tensor& t) { return cross_entropy(x, t, -100, "mean", 0.1); });
  (void)fn(x, t);
  EXPECT_EQ(fn.kernels().size(), 2u) << ::testing::PrintToString(testing_workloads::Names(fn.kernels()));
}

TEST(CrossEntropyTest, BadArgumentsAreClearErrors) {
  const Tensor x = randn({4, 5}), t = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3}, {4});
  auto error = [](const std::string& part) { return ThrowsMessage<Error>(HasSubstr(part)); };
  EXPECT_THAT([&] { cross_entropy(x, t, -100, "avg"); }, error("reduction must be \"mean\", \"sum\" or \"none\", got \"avg\""));
  EXPECT_THAT([&] { cross_entropy(x, t, -100, "mean", -0.1); }, error("label_smoothing must be in [0, 1]"));
  EXPECT_THAT([&] { cross_entropy(x, t, -100, "mean", 1.5); }, error("label_smoothing must be in [0, 1]"));
  EXPECT_THAT([&] { cross_entropy(x, t, -100, "mean", NAN); }, error("label_smoothing must be in [0, 1]"));
  EXPECT_THAT([&] { cross_entropy(x, t.to(DType::kFloat32)); }, error("target must be int64 or int32"));
  EXPECT_THAT([&] { cross_entropy(x.to(DType::kInt64), t); }, error("logits must be floating-point"));
  EXPECT_THAT([&] { cross_entropy(x, t.reshape({2, 2})); }, error("target must be [4]"));
  EXPECT_THAT([&] { cross_entropy(randn({4, 5, 3}), t); }, error("target must be [4, 3]"));
  EXPECT_THAT([&] { cross_entropy(randn({5}), t); }, error("target must be []"));
  EXPECT_THAT([&] { cross_entropy(randn({}), t.reshape({2, 2})); }, error("logits must be [C], [N, C]"));
  EXPECT_THAT([&] { cross_entropy(Tensor(), t); }, error("undefined"));
  EXPECT_THAT([&] { cross_entropy(randn({4, 0}), t); }, error("have no classes"));
}

TEST(CrossEntropyCudaTest, SameChecksOnCuda) {
  SKIP_WITHOUT_CUDA();
  CheckReductionsAndSmoothing(Device::cuda());
  CheckLayoutsAndDtypes(Device::cuda());
  CheckEdges(Device::cuda());
  CheckOutOfRangeTargets(Device::cuda());
  EXPECT_THAT([] { cross_entropy(randn({2, 3}).to(Device::cuda()), Tensor::from_vector(std::vector<int64_t>{0, 1}, {2})); },
              ThrowsMessage<Error>(HasSubstr("on one device")));
}

}  // namespace
}  // namespace fusebox
