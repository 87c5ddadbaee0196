// RewriteNonNegativeCompares (backend/nonnegative_compares.h): `v >= c` for a
// constant c <= 0 and `v > c` for c < 0, v one of abs(x), x * x, exp(x),
// relu(x), sqrt(x), read a NaN test in the kernel IR (ptxas folded them to
// true, NaN or not); other compares of such values, of a tensor and of
// integers stay; the compiled values match float64 with NaNs (the CPU here,
// the H200 in CudaTest.ComparesOfFusedAbsKeepNaNFalse).
#include "backend/nonnegative_compares.h"

#include <cmath>
#include <functional>

#include "backend/cuda/cuda_printer.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/lower_for_test.h"

namespace fusebox {
namespace {

using backend::Stmt;
using backend::StmtKind;

// The compare ops of the kernel's pointwise body, in order.
std::vector<graph::Op> Compares(const backend::Kernel& k) {
  std::vector<graph::Op> ops;
  for (const Stmt& s : k.body) {
    if (s.kind == StmtKind::kCompute && graph::Info(s.op).dtype_rule == graph::DTypeRule::kCompare) ops.push_back(s.op);
  }
  return ops;
}

TEST(NonNegativeComparesTest, ComparesAgainstConstantsAtMostZeroReadXEqualsX) {
  using Fn = std::function<Tensor(const Tensor&)>;
  const Tensor x = randn({64});
  struct Case {
    const char* what;
    Fn fn;
    graph::Op want;
  };
  const std::vector<Case> cases = {
      {"abs(x) >= -0.5", [](const Tensor& a) { return ge(abs(a), -0.5); }, graph::Op::kEq},
      {"abs(x) >= 0", [](const Tensor& a) { return ge(abs(a), 0.0); }, graph::Op::kEq},
      {"abs(x) > -1", [](const Tensor& a) { return gt(abs(a), -1.0); }, graph::Op::kEq},
      {"abs(x) > 0 stays", [](const Tensor& a) { return gt(abs(a), 0.0); }, graph::Op::kGt},
      {"abs(x) >= 0.5 stays", [](const Tensor& a) { return ge(abs(a), 0.5); }, graph::Op::kGe},
      {"abs(x) < -1 stays", [](const Tensor& a) { return lt(abs(a), -1.0); }, graph::Op::kLt},
      {"x >= -1 stays", [](const Tensor& a) { return ge(a, -1.0); }, graph::Op::kGe},
      {"abs(int) >= -1 stays", [](const Tensor& a) { return ge(abs(a.to(DType::kInt32)), -1.0); }, graph::Op::kGe},
      {"x * x >= -1", [](const Tensor& a) { return ge(a * a, -1.0); }, graph::Op::kEq},
      {"exp(x) > -1", [](const Tensor& a) { return gt(exp(a), -1.0); }, graph::Op::kEq},
      {"relu(x) >= -1", [](const Tensor& a) { return ge(relu(a), -1.0); }, graph::Op::kEq},
      {"x * (x + 1) >= -1 stays", [](const Tensor& a) { return ge(a * (a + 1.0), -1.0); }, graph::Op::kGe},
      {"exp(x) >= 0.5 stays", [](const Tensor& a) { return ge(exp(a), 0.5); }, graph::Op::kGe},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const backend::Kernel k = testing_backend::LowerOnly([&c](auto& in) { return c.fn(in[0]); }, {x});
    EXPECT_EQ(Compares(k), std::vector<graph::Op>{c.want});
    if (c.want == graph::Op::kEq) {
      // x == x on x itself: the compare reads no abs, square, exp or relu.
      for (const Stmt& s : k.body) {
        if (s.kind == StmtKind::kCompute && s.op == graph::Op::kEq) EXPECT_EQ(s.args[0], s.args[1]);
      }
    }
  }
}

TEST(NonNegativeComparesTest, SqrtIsItsOwnNaNSource) {
  // sqrt(x) is NaN also for x < 0: the test reads the sqrt, not x.
  const backend::Kernel k =
      testing_backend::LowerOnly([](auto& in) { return ge(sqrt(in[0]), 0.0); }, {randn({64})});
  EXPECT_EQ(Compares(k), std::vector<graph::Op>{graph::Op::kEq});
  int sqrt_temp = -1;
  for (const Stmt& s : k.body) {
    if (s.kind == StmtKind::kCompute && s.op == graph::Op::kSqrt) sqrt_temp = s.result;
    if (s.kind == StmtKind::kCompute && s.op == graph::Op::kEq) EXPECT_EQ(s.args, (std::vector<int>{sqrt_temp, sqrt_temp}));
  }
  const std::vector<double> xv = {-2.0, -0.0, 0.0, 2.25, std::nan(""), INFINITY, -INFINITY};
  const Tensor x = Tensor::from_vector(xv, {static_cast<int64_t>(xv.size())}, DType::kFloat32, Device::cpu());
  const std::vector<double> got = compile([](const Tensor& a) { return ge(sqrt(a), 0.0); })(x).to_double_vector();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(got[i], std::sqrt(xv[i]) >= 0 ? 1.0 : 0.0) << xv[i];
}

TEST(NonNegativeComparesTest, CompiledValuesKeepNaNFalse) {
  const std::vector<double> xv = {-2.0, -0.0, 0.0, 1.5, std::nan(""), -INFINITY, INFINITY};
  const Tensor x = Tensor::from_vector(xv, {static_cast<int64_t>(xv.size())}, DType::kFloat32, Device::cpu());
  const std::vector<double> ge_got = compile([](const Tensor& a) { return ge(abs(a), -0.5); })(x).to_double_vector();
  const std::vector<double> gt_got = compile([](const Tensor& a) { return gt(abs(a), -1.0) * a; })(x).to_double_vector();
  for (size_t i = 0; i < xv.size(); ++i) {
    EXPECT_EQ(ge_got[i], std::isnan(xv[i]) ? 0.0 : 1.0) << xv[i];
    if (std::isnan(xv[i])) {
      EXPECT_TRUE(std::isnan(gt_got[i]));
    } else {
      EXPECT_EQ(gt_got[i], xv[i]);
    }
  }
}

}  // namespace
}  // namespace fusebox
