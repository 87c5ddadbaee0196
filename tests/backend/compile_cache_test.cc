// The compile cache: memory, then disk; corrupt entries are recompiled, never
// trusted; compiler failures carry the log and the source path.
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backend/compile_cache.h"
#include "backend/cpu/host_compiler.h"
#include "backend/executable.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fusebox::backend {
namespace {

using ::testing::HasSubstr;

// A kernel source no other test produces, so every test starts with a miss.
std::string UniqueKernel(const std::string& name, float scale) {
  return absl::StrCat("extern \"C\" void ", name, "(void* const* a, long long b, long long e) {\n",
                      "  const float* x = (const float*)a[0]; float* y = (float*)a[1];\n",
                      "  for (long long i = b; i < e; ++i) y[i] = x[i] * ", absl::StrFormat("%.9g", scale), "f;\n}\n");
}

float RandomScale() {
  std::mt19937 gen(std::random_device{}());
  return std::uniform_real_distribution<float>(2, 3)(gen);
}

void ExpectRuns(const cpu::LoadedCpuKernel& k, float scale) {
  float x[5] = {1, -2, 3.5f, 0.25f, 7}, y[5] = {};
  void* args[] = {x, y};
  k.fn(args, 0, 5);
  for (int i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(y[i], x[i] * scale);
}

TEST(CompileCacheTest, MemoryThenDiskThenRecompileOnCorruption) {
  CompileCache& cache = CompileCache::Get();
  const float scale = RandomScale();
  const std::string source = UniqueKernel("scale_kernel", scale);

  const auto s0 = cache.stats();
  auto first = cpu::CompileCpuKernel(source, "scale_kernel");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->compiled);
  ExpectRuns(*first, scale);
  EXPECT_EQ(cache.stats().compiles, s0.compiles + 1);

  auto second = cpu::CompileCpuKernel(source, "scale_kernel");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(cache.stats().memory_hits, s0.memory_hits + 1);
  EXPECT_EQ(cache.stats().compiles, s0.compiles + 1);

  cache.ClearMemory();
  auto third = cpu::CompileCpuKernel(source, "scale_kernel");
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(cache.stats().disk_hits, s0.disk_hits + 1);
  EXPECT_EQ(cache.stats().compiles, s0.compiles + 1);
  ExpectRuns(*third, scale);

  // Flip one byte of the entry: it must be recompiled, not trusted.
  const std::string entry = third->so_path.substr(0, third->so_path.size() - 3) + ".entry";
  ASSERT_TRUE(std::filesystem::exists(entry)) << entry;
  {
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('#');
  }
  cache.ClearMemory();
  auto fourth = cpu::CompileCpuKernel(source, "scale_kernel");
  ASSERT_TRUE(fourth.ok()) << fourth.status();
  EXPECT_EQ(cache.stats().compiles, s0.compiles + 2);
  ExpectRuns(*fourth, scale);

  // Truncate the shared object behind a valid entry: also recompiled.
  std::filesystem::resize_file(fourth->so_path, 100);
  cache.ClearMemory();
  auto fifth = cpu::CompileCpuKernel(source, "scale_kernel");
  ASSERT_TRUE(fifth.ok()) << fifth.status();
  EXPECT_EQ(cache.stats().compiles, s0.compiles + 3);
}

TEST(CompileCacheTest, HostCompilerFailureCarriesLogAndSourcePath) {
  auto bad = cpu::CompileCpuKernel("extern \"C\" void broken( { this is not C++ }\n", "broken");
  ASSERT_FALSE(bad.ok());
  const std::string message(bad.status().message());
  EXPECT_THAT(message, HasSubstr("host C++ compiler failed on kernel broken"));
  EXPECT_THAT(message, HasSubstr("error"));
  const size_t at = message.find("source: ");
  ASSERT_NE(at, std::string::npos);
  const std::string path = message.substr(at + 8, message.find('\n', at) - at - 8);
  EXPECT_TRUE(std::filesystem::exists(path)) << path;
}

}  // namespace
}  // namespace fusebox::backend

namespace fusebox::backend {
namespace {

TEST(CompileCacheTest, NvrtcFailureCarriesLogAndSourcePath) {
  const std::string source = absl::StrCat("extern \"C\" __global__ void bad_", std::random_device{}(),
                                          "(float* x) { x[0] = undeclared_name; }\n");
  auto result = CompileCudaSource(source, "bad_kernel", 90);
  ASSERT_FALSE(result.ok());
  const std::string message(result.status().message());
  EXPECT_THAT(message, HasSubstr("undeclared_name"));  // NVRTC's log
  const size_t at = message.find("source: ");
  ASSERT_NE(at, std::string::npos) << message;
  const std::string path = message.substr(at + 8);
  EXPECT_TRUE(std::filesystem::exists(path)) << path;
}

}  // namespace
}  // namespace fusebox::backend
