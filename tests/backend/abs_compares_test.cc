// RewriteAbsCompares (backend/abs_compares.h): `abs(x) >= c` for a constant
// c <= 0 and `abs(x) > c` for c < 0 read `x == x` in the kernel IR (ptxas
// folded them to true, NaN or not); other compares of an abs, of a tensor
// and of integers stay; the compiled values match float64 with NaNs (the
// CPU here, the H200 in CudaTest.ComparesOfFusedAbsKeepNaNFalse).
#include "backend/abs_compares.h"

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

TEST(AbsComparesTest, ComparesAgainstConstantsAtMostZeroReadXEqualsX) {
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
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const backend::Kernel k = testing_backend::LowerOnly([&c](auto& in) { return c.fn(in[0]); }, {x});
    EXPECT_EQ(Compares(k), std::vector<graph::Op>{c.want});
    if (c.want == graph::Op::kEq) {
      // x == x on x itself: the compare reads no abs.
      for (const Stmt& s : k.body) {
        if (s.kind == StmtKind::kCompute && s.op == graph::Op::kEq) EXPECT_EQ(s.args[0], s.args[1]);
      }
    }
  }
}

TEST(AbsComparesTest, CompiledValuesKeepNaNFalse) {
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
