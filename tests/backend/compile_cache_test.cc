// The compile cache: memory, then disk; corrupt entries are recompiled, never
// trusted; compiler failures carry the log and the source path.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

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

TEST(CompileCacheTest, FailedCompileRunsTheCompilerOnce) {
  const std::string source = absl::StrCat("extern \"C\" void broken_", std::random_device{}(), "( {\n");
  const int64_t before = CompileCache::Get().stats().compiles;
  EXPECT_FALSE(cpu::CompileCpuKernel(source, "broken").ok());
  EXPECT_FALSE(cpu::CompileCpuKernel(source, "broken").ok());  // compile-ahead, then the load: one run
  EXPECT_EQ(CompileCache::Get().stats().compiles, before + 1);
}

// The cache folder is read once per process, so each case runs this binary
// again with FUSEBOX_CACHE_DIR set, running only the child test below.
int RunChildWithCacheDir(const std::string& dir) {
  const std::string filter = "--gtest_filter=CompileCacheFolderChild.DISABLED_ComputesWhereTheCacheCan";
  std::vector<std::string> env_strings = {absl::StrCat("FUSEBOX_CACHE_DIR=", dir), "FUSEBOX_TEST_CHILD=1"};
  // Not the parent's gtest sharding either: under GTEST_TOTAL_SHARDS the
  // child's one test may belong to another shard, and it would run nothing
  // (bench/device_run.sh shards every binary).
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view var(*e);
    if (var.starts_with("FUSEBOX_CACHE_DIR=") || var.starts_with("GTEST_TOTAL_SHARDS=") ||
        var.starts_with("GTEST_SHARD_INDEX=") || var.starts_with("GTEST_SHARD_STATUS_FILE=")) {
      continue;
    }
    env_strings.push_back(*e);
  }
  std::vector<char*> env;
  for (std::string& e : env_strings) env.push_back(e.data());
  env.push_back(nullptr);
  std::string exe = std::filesystem::read_symlink("/proc/self/exe").string(), also = "--gtest_also_run_disabled_tests";
  std::string quiet = "--gtest_brief=1";
  char* argv[] = {exe.data(), const_cast<char*>(filter.c_str()), also.data(), quiet.data(), nullptr};
  pid_t pid = 0;
  if (::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, env.data()) != 0) return -1;
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(CompileCacheFolder, UnusableFolderFallsBackToAPrivateOne) {
  const std::filesystem::path scratch = std::filesystem::temp_directory_path() /
                                        absl::StrCat("fusebox-cache-test-", ::getpid(), "-", std::random_device{}());
  std::filesystem::create_directories(scratch);
  const std::string file = (scratch / "a-file").string();
  std::ofstream(file) << "not a folder";
  EXPECT_EQ(RunChildWithCacheDir(file), 0) << "FUSEBOX_CACHE_DIR is a file";
  EXPECT_EQ(RunChildWithCacheDir(file + "/below"), 0) << "FUSEBOX_CACHE_DIR cannot be created";
  // A usable folder whose name the shell would have split or quoted.
  const std::filesystem::path odd = scratch / "cache with space 'and quote\"";
  EXPECT_EQ(RunChildWithCacheDir(odd.string()), 0) << odd;
  bool has_entries = false;
  for (const auto& e : std::filesystem::directory_iterator(odd)) has_entries |= e.path().extension() == ".entry";
  EXPECT_TRUE(has_entries) << "the odd folder was used as the cache";
  std::filesystem::remove_all(scratch);
}

// Child only (RunChildWithCacheDir): a fresh kernel compiles and runs.
TEST(CompileCacheFolderChild, DISABLED_ComputesWhereTheCacheCan) {
  ASSERT_NE(std::getenv("FUSEBOX_TEST_CHILD"), nullptr);
  const std::string dir = CompileCache::Get().dir();
  EXPECT_TRUE(std::filesystem::is_directory(dir)) << dir;
  const float scale = RandomScale();
  auto k = cpu::CompileCpuKernel(UniqueKernel("child_kernel", scale), "child_kernel");
  ASSERT_TRUE(k.ok()) << k.status();
  ExpectRuns(*k, scale);
  const Tensor x = Tensor::from_vector({1.0f, -2.0f, 0.5f}, {3});
  const std::vector<float> y = (x * static_cast<double>(scale)).to_vector();
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(y[i], x.to_vector()[i] * scale);
}

}  // namespace
}  // namespace fusebox::backend

namespace fusebox::backend {
namespace {

TEST(CompileCacheTest, NvrtcFailureCarriesLogAndSourcePath) {
  const std::string source = absl::StrCat("extern \"C\" __global__ void bad_", std::random_device{}(),
                                          "(float* x) { x[0] = undeclared_name; }\n");
  auto result = CompileCudaSource(source, "bad_kernel", 90, backend::CurrentTuning());
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
