// MultiplyByRowReciprocals (backend/row_reciprocals.h): a division by a row's
// reduction result becomes a multiplication by its reciprocal; other
// divisions stay, and the kernels' numbers stay within float tolerance of
// float64 (checked through compile() on the CPU).
#include "backend/row_reciprocals.h"

#include <algorithm>
#include <cmath>

#include "frontend/fusebox.h"
#include "gtest/gtest.h"
#include "tests/backend/lower_for_test.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers
using backend::Stmt;
using backend::StmtKind;

int CountOps(const std::vector<Stmt>& block, graph::Op op) {
  int n = 0;
  for (const Stmt& s : block) n += s.kind == StmtKind::kCompute && s.op == op;
  return n;
}

TEST(RowReciprocalsTest, SoftmaxDividesOncePerRow) {
  // Lowering applies the pass: the element loop multiplies by 1 / sum.
  const backend::Kernel k = testing_backend::LowerOnly([](auto& in) { return ManualSoftmax(in[0]); }, {randn({4, 300})});
  ASSERT_EQ(k.passes.size(), 2u);
  const int sum = k.passes[1].accumulators.at(0).temp;
  for (const Stmt& s : k.elementwise) {
    if (s.kind == StmtKind::kCompute && s.op == graph::Op::kDiv) {
      // The only division left computes the reciprocal: 1 / sum.
      EXPECT_EQ(s.args.at(1), sum);
      const auto one = std::find_if(k.elementwise.begin(), k.elementwise.end(), [&](const Stmt& c) { return c.result == s.args[0]; });
      ASSERT_NE(one, k.elementwise.end());
      EXPECT_EQ(one->kind, StmtKind::kConstant);
      EXPECT_EQ(one->constant, 1.0);
    }
  }
  EXPECT_EQ(CountOps(k.elementwise, graph::Op::kDiv), 1);
  EXPECT_GE(CountOps(k.elementwise, graph::Op::kMul), 1);
  // Applying it again changes nothing (1 / sum already runs once per row).
  const backend::Kernel again = backend::MultiplyByRowReciprocals(k);
  EXPECT_EQ(again.ToString(), k.ToString());
}

TEST(RowReciprocalsTest, OtherDivisionsStay) {
  // x / y element by element, and a row sum divided by a constant: no row
  // value is a divisor, so the kernels come back as they were.
  const backend::Kernel pointwise = testing_backend::LowerOnly([](auto& in) { return in[0] / in[1]; }, {randn({8, 8}), randn({8, 8})});
  EXPECT_EQ(backend::MultiplyByRowReciprocals(pointwise).ToString(), pointwise.ToString());
  const backend::Kernel mean_row = testing_backend::LowerOnly([](auto& in) { return sum(in[0], -1) / 7.0; }, {randn({8, 64})});
  EXPECT_EQ(backend::MultiplyByRowReciprocals(mean_row).ToString(), mean_row.ToString());
  // A row value divided by an element (the divisor varies along j) stays.
  const backend::Kernel by_element = testing_backend::LowerOnly(
      [](auto& in) { return sum(in[0], -1, /*keepdim=*/true) / in[0]; }, {randn({8, 64})});
  EXPECT_EQ(CountOps(by_element.elementwise, graph::Op::kMul), 0) << by_element.ToString();
}

TEST(RowReciprocalsTest, SoftmaxAndNormalizedRowsMatchFloat64) {
  // Fresh random rows with logits up to ~30 apart: x * (1 / s) stays within
  // float32 tolerance of x / s in float64.
  auto fn = compile([](const Tensor& x) { return ManualSoftmax(x); });
  Tensor x = randn({16, 777}) * 8.0 - 3.0;
  const std::vector<float> in = x.to_vector(), out = fn(x).to_vector();
  for (int r = 0; r < 16; ++r) {
    double m = -INFINITY, s = 0;
    for (int j = 0; j < 777; ++j) m = std::max(m, static_cast<double>(in[r * 777 + j]));
    for (int j = 0; j < 777; ++j) s += std::exp(in[r * 777 + j] - m);
    for (int j = 0; j < 777; ++j) {
      const double want = std::exp(in[r * 777 + j] - m) / s;
      ASSERT_NEAR(out[r * 777 + j], want, 1e-5 * want + 1e-12) << r << "," << j;
    }
  }
  auto normalize = compile([](const Tensor& v) { return v / sum(v * v, -1, /*keepdim=*/true); });
  Tensor v = randn({8, 513});
  const std::vector<float> vin = v.to_vector(), vout = normalize(v).to_vector();
  for (int r = 0; r < 8; ++r) {
    double ss = 0;
    for (int j = 0; j < 513; ++j) ss += static_cast<double>(vin[r * 513 + j]) * vin[r * 513 + j];
    for (int j = 0; j < 513; ++j) ASSERT_NEAR(vout[r * 513 + j], vin[r * 513 + j] / ss, 1e-5 * std::fabs(vin[r * 513 + j] / ss) + 1e-9);
  }
}

}  // namespace
}  // namespace fusebox
