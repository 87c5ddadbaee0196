// The CUDA runtime layer: NVRTC (runs everywhere, no GPU needed), the
// dlopen'ed driver and the caching allocator (GPU tests skip without one).
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/caching_allocator.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/launch_graph.h"
#include "backend/cuda/nvrtc.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace fusebox::cuda {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

#define SKIP_WITHOUT_GPU()                                                               \
  do {                                                                                   \
    if (!Driver::Get().available()) GTEST_SKIP() << Driver::Get().unavailable_reason(); \
  } while (0)

constexpr char kAddOneSource[] = R"(
extern "C" __global__ void add_one(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] + 1.0f;
}
)";

// kAddOneSource compiled by NVRTC for cuda:0 and loaded.
absl::StatusOr<CUmodule> LoadAddOne() {
  absl::StatusOr<int> cc = Driver::Get().ComputeCapability(0);
  if (!cc.ok()) return cc.status();
  absl::StatusOr<NvrtcOutput> compiled = CompileWithNvrtc(kAddOneSource, "add_one", *cc);
  if (!compiled.ok()) return compiled.status();
  return Driver::Get().LoadModule(0, compiled->cubin);
}

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

// ---- NVRTC: no GPU needed.

TEST(NvrtcTest, CompilesPtxAndCubinForSm90) {
  // A module unique to this compile: NVRTC on the H200 drops ptxas's report
  // for PTX it compiled before (the GPU tests below compile add_one too).
  absl::StatusOr<NvrtcOutput> out = test_util::CompileWithPtxasReport(kAddOneSource, "add_one", 90);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->ptx, HasSubstr(".entry add_one"));
  EXPECT_THAT(out->ptx, HasSubstr(".target sm_90"));
  EXPECT_EQ(out->ptx.find('\0'), std::string::npos);
  ASSERT_GE(out->cubin.size(), 4u);
  EXPECT_EQ(out->cubin.substr(0, 4), "\x7f" "ELF");
  EXPECT_THAT(out->log, HasSubstr("registers"));  // from -Xptxas=-v
  EXPECT_THAT(out->log, HasSubstr("add_one"));
}

TEST(NvrtcTest, MathAndExtraOptions) {
  constexpr char kSource[] = R"(
extern "C" __global__ void k(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = expf(x[i]) * tanhf(x[i]) + SCALE;
}
)";
  absl::StatusOr<NvrtcOutput> out = CompileWithNvrtc(kSource, "k", 90, {"-DSCALE=2.0f"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->ptx, HasSubstr(".entry k("));
  EXPECT_FALSE(out->cubin.empty());
}

TEST(NvrtcTest, SyntaxErrorReturnsLog) {
  absl::StatusOr<NvrtcOutput> out =
      CompileWithNvrtc("extern \"C\" __global__ void broken(float* x) { x[0] = ; }", "broken_kernel", 90);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), StartsWith("NVRTC failed to compile broken_kernel:\n"));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("broken_kernel.cu(1): error"));
}

TEST(NvrtcTest, VersionAndBaseOptions) {
  EXPECT_THAT(NvrtcVersion(), MatchesRegex("[0-9]+\\.[0-9]+"));
  std::vector<std::string> options = NvrtcBaseOptions(90);
  EXPECT_THAT(options, ::testing::Contains("--gpu-architecture=sm_90"));
  EXPECT_THAT(options, ::testing::Contains("-Xptxas=-v"));
}

// ---- Driver and allocator without a GPU: clean errors, no crash.

TEST(DriverTest, GetNeverCrashesAndExplainsUnavailability) {
  Driver& driver = Driver::Get();
  EXPECT_EQ(&driver, &Driver::Get());
  if (driver.available()) {
    EXPECT_GT(driver.device_count(), 0);
    EXPECT_TRUE(driver.unavailable_reason().empty());
    return;
  }
  EXPECT_FALSE(driver.unavailable_reason().empty());
  EXPECT_EQ(driver.device_count(), 0);
  absl::StatusOr<CUdeviceptr> ptr = driver.MemAlloc(0, 1024);
  ASSERT_FALSE(ptr.ok());
  EXPECT_EQ(ptr.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(ptr.status().message()), HasSubstr(driver.unavailable_reason()));
  EXPECT_FALSE(driver.ComputeCapability(0).ok());
  EXPECT_FALSE(driver.SetDevice(0).ok());
  driver.DestroyEvent(nullptr);  // a no-op, not a crash
}

TEST(CachingAllocatorTest, ZeroBytesIsNullAndNullFreeIsIgnored) {
  CachingAllocator& allocator = CachingAllocator::ForDevice(0);
  absl::StatusOr<void*> ptr = allocator.Allocate(0);
  ASSERT_TRUE(ptr.ok()) << ptr.status();
  EXPECT_EQ(*ptr, nullptr);
  allocator.Free(nullptr);
}

TEST(CachingAllocatorTest, ErrorWithoutGpu) {
  if (Driver::Get().available()) GTEST_SKIP() << "has a GPU";
  absl::StatusOr<void*> ptr = CachingAllocator::ForDevice(0).Allocate(100);
  ASSERT_FALSE(ptr.ok());
  EXPECT_THAT(std::string(ptr.status().message()), HasSubstr("CUDA is not available"));
}

// ---- GPU only.

TEST(DriverGpuTest, DeviceQueries) {
  SKIP_WITHOUT_GPU();
  Driver& driver = Driver::Get();
  absl::StatusOr<int> cc = driver.ComputeCapability(0);
  ASSERT_TRUE(cc.ok()) << cc.status();
  EXPECT_GE(*cc, 50);
  absl::StatusOr<int> sms = driver.MultiprocessorCount(0);
  ASSERT_TRUE(sms.ok()) << sms.status();
  EXPECT_GT(*sms, 0);
  absl::StatusOr<std::string> name = driver.DeviceName(0);
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_FALSE(name->empty());

  absl::Status bad = driver.SetDevice(driver.device_count());
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("does not exist"));
}

TEST(DriverGpuTest, OutOfMemoryErrorNamesCallAndResult) {
  SKIP_WITHOUT_GPU();
  constexpr size_t kHuge = size_t{1} << 44;  // 16 TiB
  absl::StatusOr<CUdeviceptr> ptr = Driver::Get().MemAlloc(0, kHuge);
  ASSERT_FALSE(ptr.ok());
  EXPECT_EQ(ptr.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(std::string(ptr.status().message()),
            "cuMemAlloc(17592186044416 bytes) on cuda:0 failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)");

  // The allocator releases its pool and retries once, then reports the same.
  CachingAllocator& allocator = CachingAllocator::ForDevice(0);
  absl::StatusOr<void*> small = allocator.Allocate(4096);
  ASSERT_TRUE(small.ok()) << small.status();
  allocator.Free(*small);
  absl::StatusOr<void*> huge = allocator.Allocate(kHuge);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(allocator.stats().bytes_cached, 0);
}

TEST(CachingAllocatorGpuTest, ReusesFreedBlocks) {
  SKIP_WITHOUT_GPU();
  CachingAllocator& allocator = CachingAllocator::ForDevice(0);
  allocator.EmptyCache();
  AllocatorStats before = allocator.stats();

  absl::StatusOr<void*> a = allocator.Allocate(1000);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_NE(*a, nullptr);
  AllocatorStats s1 = allocator.stats();
  EXPECT_EQ(s1.driver_allocations, before.driver_allocations + 1);
  EXPECT_EQ(s1.bytes_in_use, before.bytes_in_use + 1024);  // 512 B granularity

  allocator.Free(*a);
  AllocatorStats s2 = allocator.stats();
  EXPECT_EQ(s2.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(s2.bytes_cached, 1024);

  absl::StatusOr<void*> b = allocator.Allocate(1000);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, *a);
  AllocatorStats s3 = allocator.stats();
  EXPECT_EQ(s3.cache_hits, before.cache_hits + 1);
  EXPECT_EQ(s3.driver_allocations, before.driver_allocations + 1);
  EXPECT_EQ(s3.bytes_cached, 0);

  // Large blocks round to 2 MiB; a 100 MiB cached block is not handed out
  // for a 3 MB request.
  absl::StatusOr<void*> big = allocator.Allocate(100 << 20);
  ASSERT_TRUE(big.ok()) << big.status();
  allocator.Free(*big);
  absl::StatusOr<void*> mid = allocator.Allocate(3'000'000);
  ASSERT_TRUE(mid.ok()) << mid.status();
  EXPECT_NE(*mid, *big);
  EXPECT_EQ(allocator.stats().bytes_in_use, before.bytes_in_use + 1024 + (4 << 20));

  allocator.Free(*b);
  allocator.Free(*mid);
  allocator.EmptyCache();
  EXPECT_EQ(allocator.stats().bytes_cached, 0);
  EXPECT_EQ(allocator.stats().bytes_in_use, before.bytes_in_use);
}

TEST(DriverGpuTest, CopyRoundTrip) {
  SKIP_WITHOUT_GPU();
  Driver& driver = Driver::Get();
  const size_t n = (1 << 20) + 7;
  std::vector<float> host = RandomFloats(n, 1);
  absl::StatusOr<CUdeviceptr> a = driver.MemAlloc(0, n * sizeof(float));
  absl::StatusOr<CUdeviceptr> b = driver.MemAlloc(0, n * sizeof(float));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(driver.CopyHostToDevice(0, *a, host.data(), n * sizeof(float)).ok());
  ASSERT_TRUE(driver.CopyDeviceToDevice(0, *b, *a, n * sizeof(float)).ok());
  std::vector<float> back(n, 0.0f);
  ASSERT_TRUE(driver.CopyDeviceToHost(0, back.data(), *b, n * sizeof(float)).ok());
  EXPECT_EQ(std::memcmp(host.data(), back.data(), n * sizeof(float)), 0);
  EXPECT_TRUE(driver.MemFree(0, *a).ok());
  EXPECT_TRUE(driver.MemFree(0, *b).ok());
}

TEST(DriverGpuTest, LaunchNvrtcKernel) {
  SKIP_WITHOUT_GPU();
  Driver& driver = Driver::Get();
  absl::StatusOr<CUmodule> module = LoadAddOne();
  ASSERT_TRUE(module.ok()) << module.status();
  absl::StatusOr<CUfunction> function = driver.GetFunction(*module, "add_one");
  ASSERT_TRUE(function.ok()) << function.status();
  absl::StatusOr<CUfunction> missing = driver.GetFunction(*module, "no_such_kernel");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("cuModuleGetFunction(\"no_such_kernel\") failed: CUDA_ERROR_"));

  int n = 100'003;
  std::vector<float> host = RandomFloats(n, 2);
  CachingAllocator& allocator = CachingAllocator::ForDevice(0);
  absl::StatusOr<void*> buffer = allocator.Allocate(n * sizeof(float));
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  CUdeviceptr x = reinterpret_cast<CUdeviceptr>(*buffer);
  ASSERT_TRUE(driver.CopyHostToDevice(0, x, host.data(), n * sizeof(float)).ok());

  absl::StatusOr<CUevent> start = driver.CreateEvent(0);
  absl::StatusOr<CUevent> end = driver.CreateEvent(0);
  ASSERT_TRUE(start.ok() && end.ok());
  ASSERT_TRUE(driver.RecordEvent(0, *start).ok());
  LaunchDims dims;
  dims.block_x = 256;
  dims.grid_x = (n + 255) / 256;
  void* args[] = {&x, &n};
  absl::Status launched = driver.Launch(0, *function, dims, args);
  ASSERT_TRUE(launched.ok()) << launched;
  ASSERT_TRUE(driver.RecordEvent(0, *end).ok());
  absl::StatusOr<float> ms = driver.ElapsedMs(*start, *end);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_GE(*ms, 0.0f);
  driver.DestroyEvent(*start);
  driver.DestroyEvent(*end);

  std::vector<float> result(n);
  ASSERT_TRUE(driver.CopyDeviceToHost(0, result.data(), x, n * sizeof(float)).ok());
  ASSERT_TRUE(driver.Synchronize(0).ok());
  for (int i = 0; i < n; ++i) ASSERT_EQ(result[i], host[i] + 1.0f) << "at " << i;
  allocator.Free(*buffer);
}

// A chain of launches as one graph: each launch of it runs with that call's
// arguments (the second call's buffer and count, not the first's), and a
// different sequence of kernels rebuilds it.
TEST(LaunchGraphGpuTest, ChainsLaunchesAndEachLaunchTakesItsArguments) {
  SKIP_WITHOUT_GPU();
  if (!GraphLaunchesEnabled(backend::CurrentTuning())) GTEST_SKIP() << "CUDA graph launches are off (FUSEBOX_TUNE_CUDA_GRAPHS=0 or no graph API)";
  Driver& driver = Driver::Get();
  absl::StatusOr<CUmodule> module = LoadAddOne();
  ASSERT_TRUE(module.ok()) << module.status();
  absl::StatusOr<CUfunction> add_one = driver.GetFunction(*module, "add_one");
  ASSERT_TRUE(add_one.ok()) << add_one.status();

  const int na = 5'000, nb = 70'001;
  const std::vector<float> a0 = RandomFloats(na, 11), b0 = RandomFloats(nb, 12);
  absl::StatusOr<CUdeviceptr> a = driver.MemAlloc(0, na * sizeof(float));
  absl::StatusOr<CUdeviceptr> b = driver.MemAlloc(0, nb * sizeof(float));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(driver.CopyHostToDevice(0, *a, a0.data(), na * sizeof(float)).ok());
  ASSERT_TRUE(driver.CopyHostToDevice(0, *b, b0.data(), nb * sizeof(float)).ok());
  auto read = [&](CUdeviceptr p, int n) {
    std::vector<float> v(n);
    EXPECT_TRUE(driver.CopyDeviceToHost(0, v.data(), p, n * sizeof(float)).ok());
    return v;
  };
  auto launch_of = [&](CUdeviceptr* buffer, int* n, void** params) {
    params[0] = buffer;
    params[1] = n;
    LaunchDims dims;
    dims.block_x = 256;
    dims.grid_x = static_cast<unsigned>((*n + 255) / 256);
    return KernelLaunch{.function = *add_one, .dims = dims, .params = params};
  };

  LaunchGraph graph(0);
  const GraphLaunchCounts before = GraphLaunchStats();
  CUdeviceptr pa = *a, pb = *b;
  int n_a = na, n_b = nb;
  void* params_a[2];
  void* params_b[2];
  const KernelLaunch twice_a[] = {launch_of(&pa, &n_a, params_a), launch_of(&pa, &n_a, params_a)};
  absl::StatusOr<bool> launched = graph.Launch(twice_a);
  ASSERT_TRUE(launched.ok()) << launched.status();
  ASSERT_TRUE(*launched);
  // The same kernels on another buffer and count: the graph is updated, not rebuilt.
  const KernelLaunch twice_b[] = {launch_of(&pb, &n_b, params_b), launch_of(&pb, &n_b, params_b)};
  launched = graph.Launch(twice_b);
  ASSERT_TRUE(launched.ok() && *launched) << launched.status();
  GraphLaunchCounts after = GraphLaunchStats();
  EXPECT_EQ(after.built - before.built, 1);
  EXPECT_EQ(after.launched - before.launched, 2);
  std::vector<float> got_a = read(*a, na), got_b = read(*b, nb);
  for (int i = 0; i < na; ++i) ASSERT_EQ(got_a[i], (a0[i] + 1.0f) + 1.0f) << "a at " << i;
  for (int i = 0; i < nb; ++i) ASSERT_EQ(got_b[i], (b0[i] + 1.0f) + 1.0f) << "b at " << i;

  // One kernel instead of two: a new graph.
  const KernelLaunch once_a[] = {launch_of(&pa, &n_a, params_a)};
  launched = graph.Launch(once_a);
  ASSERT_TRUE(launched.ok() && *launched) << launched.status();
  after = GraphLaunchStats();
  EXPECT_EQ(after.built - before.built, 2);
  got_a = read(*a, na);
  for (int i = 0; i < na; ++i) ASSERT_EQ(got_a[i], ((a0[i] + 1.0f) + 1.0f) + 1.0f) << "a at " << i;
  EXPECT_TRUE(driver.MemFree(0, *a).ok());
  EXPECT_TRUE(driver.MemFree(0, *b).ok());
}

}  // namespace
}  // namespace fusebox::cuda
