// FUSEBOX_DUMP_DIR: every generated source lands in the folder under its
// kernel's name, a different source under the same name beside it.
#include "backend/source_hooks.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "frontend/fusebox.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

std::string Slurp(const std::filesystem::path& path) {
  std::stringstream ss;
  ss << std::ifstream(path).rdbuf();
  return ss.str();
}

TEST(SourceHooksTest, DumpDirGetsEveryGeneratedSource) {
  const auto dir = std::filesystem::temp_directory_path() / absl::StrCat("fusebox-dump-", FreshSeed());
  ::setenv("FUSEBOX_DUMP_DIR", dir.c_str(), 1);
  // A graph no other test builds, so its plan is compiled here.
  auto compiled = compile([](const Tensor& x) { return exp(x) * 1.625 + x; });
  compiled(randn({7, 13}, Device::cpu(), FreshSeed()));
  ::unsetenv("FUSEBOX_DUMP_DIR");
  ASSERT_EQ(compiled.kernels().size(), 1u);
  const KernelInfo k = compiled.kernels()[0];
  EXPECT_EQ(Slurp(dir / (k.name + ".cc")), k.source);
  // The tests cross-compile CPU kernels for CUDA: that source is dumped too.
  EXPECT_NE(Slurp(dir / (k.name + ".cu")).find("__global__"), std::string::npos);

  ::setenv("FUSEBOX_DUMP_DIR", dir.c_str(), 1);
  backend::DumpKernelSource(k.name, ".cc", "another kernel of the same name\n");
  backend::DumpKernelSource(k.name, ".cc", "another kernel of the same name\n");  // already there
  ::unsetenv("FUSEBOX_DUMP_DIR");
  EXPECT_EQ(Slurp(dir / (k.name + ".cc")), k.source);
  EXPECT_EQ(Slurp(dir / (k.name + "-1.cc")), "another kernel of the same name\n");
  EXPECT_FALSE(std::filesystem::exists(dir / (k.name + "-2.cc")));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fusebox
