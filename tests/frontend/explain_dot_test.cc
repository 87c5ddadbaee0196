// explain_dot(): valid DOT with a cluster per graph, each kernel's name once
// as a cluster label, and graph breaks marked with reason and line. Parsed by
// Graphviz when `dot` is installed.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Braces nest outside string literals, and every literal is closed.
void ExpectWellFormed(const std::string& dot) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < dot.size(); ++i) {
    const char c = dot[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{') ++depth;
    if (c == '}') ASSERT_GT(depth--, 0) << "unbalanced '}' at " << i;
  }
  EXPECT_FALSE(in_string);
  EXPECT_EQ(depth, 0);
}

TEST(ExplainDotTest, GraphsKernelsAndBreaksWithReasonsAndLines) {
  // A name with a quote and a backslash: labels must escape both.
  const CustomOp weird("dot_test\"op\\", [](const std::vector<Tensor>& in) { return in; });
  const int break_line = __LINE__ + 4;
  auto compiled = compile([&](const Tensor& x) {
    Tensor x2 = weird({x})[0];  // nothing captured yet: a break that ends no graph
    Tensor y = exp(x2);
    const double first = y.to_vector()[0];
    Tensor z = ManualSoftmax(y * (first > 0 ? 2.0 : 0.5));
    return std::make_tuple(z, sum(x2, 0));
  });
  compiled(randn({8, 32}, Device::cpu(), FreshSeed()));
  const std::string dot = compiled.explain_dot();
  ASSERT_EQ(compiled.stats().graphs, 2);
  ExpectWellFormed(dot);
  EXPECT_EQ(dot.rfind("digraph fusebox {", 0), 0u);
  EXPECT_THAT(dot, HasSubstr("subgraph cluster_g0 {"));
  EXPECT_THAT(dot, HasSubstr("subgraph cluster_g1 {"));
  EXPECT_THAT(dot, Not(HasSubstr("cluster_g2")));
  ASSERT_GE(compiled.kernels().size(), 3u);
  for (const KernelInfo& k : compiled.kernels()) {
    EXPECT_EQ(Count(dot, k.name), 1) << k.name;
    EXPECT_EQ(Count(dot, absl::StrCat("label=\"", k.name, "\";")), 1) << k.name;
  }
  // Both breaks, in order, with their reasons and the user's line.
  EXPECT_THAT(dot, HasSubstr(R"(graph break (no ops captured before it)\nop 'dot_test\"op\\' has no codegen (custom op))"));
  EXPECT_THAT(dot, HasSubstr(absl::StrCat(R"(graph break\nto_vector() called\nat explain_dot_test.cc:)", break_line)));
  EXPECT_THAT(dot, HasSubstr("break0 -> g0_n0 [color=red, style=dashed, lhead=cluster_g0];"));
  EXPECT_THAT(dot, HasSubstr("-> break1 [color=red, style=dashed, ltail=cluster_g0];"));
  EXPECT_THAT(dot, HasSubstr("break1 -> g1_n0 [color=red, style=dashed, lhead=cluster_g1];"));
  EXPECT_THAT(dot, HasSubstr(R"(%1 exp\nfloat32[8, 32])"));

  if (std::system("command -v dot > /dev/null 2>&1") == 0) {
    const auto path = std::filesystem::temp_directory_path() / absl::StrCat("fusebox_explain_", FreshSeed(), ".dot");
    std::ofstream(path) << dot;
    EXPECT_EQ(std::system(absl::StrCat("dot -Tsvg '", path.string(), "' -o /dev/null").c_str()), 0) << dot;
    std::filesystem::remove(path);
  }
}

TEST(ExplainDotTest, OneGraphWithoutBreaksHasNoBreakNodes) {
  auto compiled = compile([](const Tensor& x) { return ManualGelu(x) + sum(x, -1, /*keepdim=*/true); });
  compiled(randn({4, 16}, Device::cpu(), FreshSeed()));
  const std::string dot = compiled.explain_dot();
  ExpectWellFormed(dot);
  EXPECT_THAT(dot, Not(HasSubstr("break")));
  for (const KernelInfo& k : compiled.kernels()) EXPECT_EQ(Count(dot, k.name), 1) << k.name;
}

}  // namespace
}  // namespace fusebox
