// check_numerics: correct fused kernels agree with their ops run unfused (f32
// and bf16), and a kernel made wrong on purpose (its source rewritten before
// compiling) is flagged in numerics(), explain() and explain_dot().
#include <regex>
#include <tuple>

#include "absl/cleanup/cleanup.h"
#include "backend/source_hooks.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

auto GeluSoftmaxColumnSums(const Tensor& x) {
  return std::make_tuple(ManualGelu(x), ManualSoftmax(x), sum(exp(x), 0), layer_norm(x, {x.size(-1)}));
}

TEST(NumericsCheckTest, CorrectKernelsAreNotFlagged) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    SCOPED_TRACE(DTypeName(dtype));
    auto compiled = compile(GeluSoftmaxColumnSums, CompileOptions{.check_numerics = true});
    compiled(randn({64, 300}, Device::cpu(), FreshSeed()).to(dtype));
    ASSERT_EQ(compiled.numerics().size(), compiled.kernels().size());
    ASSERT_GE(compiled.numerics().size(), 3u);
    for (size_t k = 0; k < compiled.numerics().size(); ++k) {
      const KernelNumerics n = compiled.numerics()[k];
      EXPECT_EQ(n.kernel, compiled.kernels()[k].name);
      EXPECT_FALSE(n.flagged) << n.kernel << ": " << n.worst;
      // float32: the same operations in the same order, up to contractions.
      if (dtype == DType::kFloat32) EXPECT_LT(n.max_abs, 1e-5) << n.kernel;
    }
    EXPECT_THAT(compiled.explain(), HasSubstr(absl::StrCat("  numerics: ", compiled.kernels()[0].name, ": max abs error ")));
    EXPECT_THAT(compiled.explain(), Not(HasSubstr("FLAGGED")));
  }
}

// 16-bit inputs are read by the reference as float32 copies: a transposed
// and a sliced bf16 input (strides the copies do not keep) still compare,
// and a wrong answer would be flagged against the same values.
TEST(NumericsCheckTest, StridedHalfInputsAreWidenedForTheReference) {
  const Tensor base = randn({96, 80}, Device::cpu(), FreshSeed()).to(DType::kBFloat16);
  const Tensor t = base.transpose(0, 1);                   // [80, 96], strides (1, 80)
  const Tensor sliced = split(base, 40, 1)[1];             // [96, 40], strides (80, 1), offset 40
  auto compiled = compile([](const Tensor& a, const Tensor& b) { return std::make_tuple(ManualSoftmax(a), exp(b) * 2); },
                          CompileOptions{.check_numerics = true});
  const auto [y, z] = compiled(t, sliced);
  ASSERT_EQ(compiled.numerics().size(), compiled.kernels().size()) << compiled.explain();
  ASSERT_GE(compiled.numerics().size(), 2u);
  for (const KernelNumerics& n : compiled.numerics()) EXPECT_FALSE(n.flagged) << n.kernel << ": " << n.worst;
  EXPECT_EQ(z.dtype(), DType::kBFloat16);
}

TEST(NumericsCheckTest, OffByDefault) {
  auto compiled = compile(ManualGelu);
  compiled(randn({8, 8}, Device::cpu(), FreshSeed()));
  EXPECT_THAT(compiled.numerics(), IsEmpty());
  EXPECT_THAT(compiled.explain(), Not(HasSubstr("numerics:")));
}

// The first `tA + tB` of kernel `name`'s body becomes `tA - tB`.
std::string FlipFirstAddition(const std::string& name, const std::string& source) {
  const size_t body = source.find(absl::StrCat("// ", name, ":"));
  std::smatch m;
  const std::string tail = source.substr(body);
  if (body == std::string::npos || !std::regex_search(tail, m, std::regex(R"(\((t\d+) \+ (t\d+)\))"))) return source;
  return absl::StrCat(source.substr(0, body), m.prefix().str(), "(", m[1].str(), " - ", m[2].str(), ")",
                      m.suffix().str());
}

TEST(NumericsCheckTest, ADeliberatelyWrongKernelIsFlagged) {
  const std::string broken = "poi_fused_add_mul_pow_tanh_1";  // after the sum's kernel
  backend::SetSourceRewriteForTesting([&](const std::string& name, const std::string& source) {
    return name == broken ? FlipFirstAddition(name, source) : source;
  });
  absl::Cleanup restore = [] { backend::SetSourceRewriteForTesting(nullptr); };
  // A graph no other test builds: the broken executable stays in the plan
  // cache for it. The unfused reference names its kernels after single ops.
  auto compiled = compile([](const Tensor& x) { return std::make_tuple(ManualGelu(x), sum(x, -1)); },
                          CompileOptions{.check_numerics = true});
  compiled(randn({3, 37}, Device::cpu(), FreshSeed()));
  ASSERT_EQ(compiled.kernels().size(), 2u);
  ASSERT_EQ(compiled.kernels()[1].name, broken);
  EXPECT_THAT(compiled.kernels()[1].source, HasSubstr("(t1 - t8)"));
  const std::vector<KernelNumerics>& numerics = compiled.numerics();
  ASSERT_EQ(numerics.size(), 2u);
  EXPECT_FALSE(numerics[0].flagged) << numerics[0].worst;  // the sum is right
  EXPECT_EQ(numerics[1].kernel, broken);
  EXPECT_TRUE(numerics[1].flagged);
  EXPECT_GT(numerics[1].max_abs, 1e-2);
  EXPECT_THAT(numerics[1].worst, HasSubstr("(float32)"));
  EXPECT_THAT(compiled.explain(), HasSubstr(absl::StrCat("numerics: ", broken, ": max abs error ")));
  EXPECT_THAT(compiled.explain(), HasSubstr("FLAGGED: %"));
  EXPECT_THAT(compiled.explain_dot(), HasSubstr("FLAGGED"));
}

}  // namespace
}  // namespace fusebox
