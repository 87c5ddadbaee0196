// RewriteOnePlusTanh (backend/one_plus_tanh.h): `1 + tanh(z)` becomes
// `2 * sigmoid(2 * z)` in the kernel IR (the tanh and the 1 dropped where
// nothing else reads them), kernel names keep the graph's tanh, other sums
// stay, and the compiled gelu stays within float tolerance of float64 (the
// CPU here; the GPU's fb_sigmoid in tests/frontend/ops_test.cc).
#include "backend/one_plus_tanh.h"

#include <cmath>

#include "backend/cuda/cuda_printer.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/lower_for_test.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers
using backend::Stmt;
using backend::StmtKind;
using ::testing::HasSubstr;
using ::testing::Not;

int CountOps(const std::vector<Stmt>& block, graph::Op op) {
  int n = 0;
  for (const Stmt& s : block) n += s.kind == StmtKind::kCompute && s.op == op;
  return n;
}

int CountConstants(const std::vector<Stmt>& block, double value) {
  int n = 0;
  for (const Stmt& s : block) n += s.kind == StmtKind::kConstant && s.constant == value;
  return n;
}

TEST(OnePlusTanhTest, ManualGeluComputesTwiceASigmoid) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const backend::Kernel k = testing_backend::LowerOnly([](auto& in) { return ManualGelu(in[0]); },
                                                         {randn({64, 64}).to(dtype)});
    EXPECT_EQ(k.name, "poi_fused_add_mul_pow_tanh_0") << "named after the graph's ops";
    EXPECT_EQ(CountOps(k.body, graph::Op::kTanh), 0);
    EXPECT_EQ(CountOps(k.body, graph::Op::kSigmoid), 1);
    EXPECT_EQ(CountOps(k.body, graph::Op::kAdd), 1) << "x + 0.044715 x^3 only";
    EXPECT_EQ(CountConstants(k.body, 1.0), 0) << "the 1 is dropped with the add";
    EXPECT_EQ(CountConstants(k.body, 2.0), 1);
    const std::string source = backend::PrintCuda(k, backend::CurrentTuning());
    EXPECT_THAT(source, HasSubstr("fb_sigmoid("));
    EXPECT_THAT(source, Not(HasSubstr("tanhf(")));
  }
  // The rewritten gelu against float64 on the CPU (accurate expf there).
  const Tensor x = randn({1000}) * 4.0;
  const Tensor got = compile([](const Tensor& t) { return ManualGelu(t); })(x);
  const std::vector<double> xs = x.to_double_vector(), ys = got.to_double_vector();
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(ys[i], GeluRef(xs[i]), 1e-5 * std::max(1.0, std::fabs(GeluRef(xs[i])))) << xs[i];
}

TEST(OnePlusTanhTest, OtherTanhUsesAndSumsStay) {
  // The tanh is read again: it stays beside the sigmoid.
  const backend::Kernel kept =
      testing_backend::LowerOnly([](auto& in) { return (1.0 + tanh(in[0])) * tanh(in[0]); }, {randn({256})});
  EXPECT_EQ(CountOps(kept.body, graph::Op::kTanh), 1);
  EXPECT_EQ(CountOps(kept.body, graph::Op::kSigmoid), 1);
  // 2 + tanh, tanh - 1 (a sub), and 1 + exp are not 1 + tanh.
  for (const backend::Kernel& k :
       {testing_backend::LowerOnly([](auto& in) { return 2.0 + tanh(in[0]); }, {randn({256})}),
        testing_backend::LowerOnly([](auto& in) { return tanh(in[0]) - 1.0; }, {randn({256})}),
        testing_backend::LowerOnly([](auto& in) { return 1.0 + exp(in[0]); }, {randn({256})})}) {
    SCOPED_TRACE(k.name);
    EXPECT_EQ(CountOps(k.body, graph::Op::kSigmoid), 0);
  }
  // tanh(x) + 1 (the 1 second) is rewritten too.
  const backend::Kernel swapped = testing_backend::LowerOnly([](auto& in) { return tanh(in[0]) + 1.0; }, {randn({256})});
  EXPECT_EQ(CountOps(swapped.body, graph::Op::kTanh), 0);
  EXPECT_EQ(CountOps(swapped.body, graph::Op::kSigmoid), 1);
}

}  // namespace
}  // namespace fusebox
