// The whole path on a GPU: eager ops and compiled functions on Device::cuda()
// against a float64 reference computed on the host. Skips without a device.
#include <cmath>
#include <functional>
#include <random>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "backend/cuda/caching_allocator.h"
#include "backend/cuda/launch_graph.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

TEST(CudaTest, ManualGeluCompiledIsOneKernelAndMatchesReference) {
  SKIP_WITHOUT_CUDA();
  for (Shape shape : {Shape{0}, Shape{1}, Shape{7}, Shape{1000, 1000}, Shape{4097, 33}}) {
    Tensor host = randn(shape, Device::cpu(), FreshSeed());
    Tensor x = host.to(Device::cuda());
    auto compiled = compile(ManualGelu);
    Tensor y = compiled(x);
    EXPECT_EQ(y.device(), Device::cuda());
    ASSERT_EQ(compiled.kernels().size(), shape == Shape{0} ? 1u : 1u);
    const KernelInfo k = compiled.kernels()[0];
    EXPECT_EQ(k.name, "poi_fused_add_mul_pow_tanh_0");
    EXPECT_THAT(k.ptx, HasSubstr(".entry poi_fused_add_mul_pow_tanh_0"));
    EXPECT_THAT(k.source, HasSubstr("__global__"));
    std::vector<double> ref;
    for (double v : host.to_double_vector()) ref.push_back(GeluRef(v));
    ExpectClose(y.to_vector(), ref, 1e-5);
    ExpectClose(ManualGelu(x).to_vector(), ref, 1e-5);  // eager on the GPU
  }
}

TEST(CudaTest, NonContiguousBroadcastAndBf16) {
  SKIP_WITHOUT_CUDA();
  const uint64_t seed = FreshSeed();
  Tensor a_host = randn({64, 48}, Device::cpu(), seed), b_host = randn({64}, Device::cpu(), seed + 1);
  Tensor a = a_host.to(Device::cuda()), b = b_host.to(Device::cuda());
  auto compiled = compile([](const Tensor& a, const Tensor& b) {
    return std::make_tuple(sigmoid(a.transpose(0, 1) * b) + 1.0, ManualGelu(a.to(DType::kBFloat16)));
  });
  auto [s, g] = compiled(a, b);
  EXPECT_EQ(g.dtype(), DType::kBFloat16);
  auto av = a_host.to_double_vector(), bv = b_host.to_double_vector();
  std::vector<double> rs, rg;
  for (int i = 0; i < 48; ++i)
    for (int j = 0; j < 64; ++j) rs.push_back(1.0 / (1.0 + std::exp(-av[j * 48 + i] * bv[j])) + 1.0);
  for (double v : a_host.to(DType::kBFloat16).to_double_vector()) rg.push_back(GeluRef(v));
  ExpectClose(s.to_vector(), rs, 1e-5);
  ExpectClose(g.to_vector(), rg, 1e-2);
}

TEST(CudaTest, EagerOpsAndDtypesOnDevice) {
  SKIP_WITHOUT_CUDA();
  Tensor xi = Tensor::from_vector(std::vector<int32_t>{-3, 0, 5, 7}, {4}, Device::cuda());
  EXPECT_THAT((xi * 2.0).to_vector(), ElementsAre(-6, 0, 10, 14));
  EXPECT_EQ((xi / xi.to(DType::kFloat32)).dtype(), DType::kFloat32);
  EXPECT_THAT(gt(xi, 0.0).to_vector(), ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(where(gt(xi, 0.0), xi, -xi).to_vector(), ElementsAre(3, 0, 5, 7));
  Tensor h = Tensor::from_vector(std::vector<float>{1.5f, -2.25f, 65504.f, 1e-8f}, {4}, Device::cuda()).to(DType::kFloat16);
  EXPECT_THAT(h.to_vector(), ElementsAre(1.5f, -2.25f, 65504.f, 0.f));
  EXPECT_DOUBLE_EQ(Tensor::from_vector({3.5f}, {1}, Device::cuda()).item(), 3.5);
}

// Dense pointwise kernels move 16 bytes per access when every pointer is
// aligned and the thread's elements are in bounds; the tail and offset views
// take the scalar path. Both must give the same values.
TEST(CudaTest, VectorizedPointwiseTailAndUnalignedViews) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto compiled = compile(ManualGelu, CompileOptions{.dynamic = false});
  const uint64_t seed = FreshSeed();
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (int64_t n : {1, 3, 4, 7, 8, 9, 1023, 12289}) {
      for (int64_t offset : {0, 1, 3}) {  // offsets 1 and 3: pointers not 16-byte aligned
        Tensor base = randn({n + offset}, Device::cuda(0), seed + n * 7 + offset).to(dtype);
        Tensor x = base.narrow(0, offset, n);
        std::vector<double> want;
        for (double v : x.to_double_vector()) want.push_back(GeluRef(v));
        const std::vector<double> got = compiled(x).to(DType::kFloat32).to_double_vector();
        ASSERT_EQ(got.size(), want.size());
        const double tol = dtype == DType::kFloat32 ? 1e-5 : 2e-2;
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i])))
              << DTypeName(dtype) << " n=" << n << " offset=" << offset << " at " << i;
        }
      }
    }
  }
  EXPECT_THAT(compiled.kernels().at(0).source, HasSubstr("uint4"));
}

// A bias (or any operand broadcast along the leading dims) moves in the
// same 16-byte accesses as the dense operands when its rows are a multiple
// of the vector width (CodegenTest.BroadcastBiasIsVectorized checks which
// kernels do); other rows, a misaligned bias or x, and the tail take the
// scalar path. All against float64.
TEST(CudaTest, BroadcastOperandsInVectorizedKernels) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = FreshSeed();
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{33, 64}, {7, 48}, {5, 12}, {3, 6}, {1, 8}}) {
      for (int64_t offset : {0, 1}) {  // 1: both pointers off 16-byte alignment
        SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " [" << rows << ", " << cols << "] offset " << offset);
        // A function per case: one compiled function would reach its recompile limit.
        auto compiled = compile([](const Tensor& x, const Tensor& b) { return gelu(x + b, "tanh"); });
        Tensor xs = randn({rows * cols + offset}, Device::cuda(0), seed + rows * 131 + cols + offset).to(dtype);
        Tensor bs = randn({cols + offset}, Device::cuda(0), seed + cols * 7 + offset + 1).to(dtype);
        Tensor x = xs.narrow(0, offset, rows * cols).view({rows, cols}), b = bs.narrow(0, offset, cols);
        const std::vector<double> xv = x.to_double_vector(), bv = b.to_double_vector();
        const std::vector<double> got = compiled(x, b).to(DType::kFloat32).to_double_vector();
        ASSERT_EQ(got.size(), xv.size());
        const double tol = dtype == DType::kFloat32 ? 1e-5 : 2e-2;
        for (size_t i = 0; i < got.size(); ++i) {
          const double want = GeluRef(xv[i] + bv[i % static_cast<size_t>(cols)]);
          ASSERT_NEAR(got[i], want, tol * (1 + std::fabs(want))) << "at " << i;
        }
        ASSERT_EQ(compiled.kernels().size(), 1u);  // which of these kernels take the vector path: CodegenTest
      }
    }
  }
}

// Operands read once per vector (a value per row, a [1] weight of another
// type) in the 16-byte path, and the scalar path's two loops (every element
// of a thread in bounds; the grid's last threads checked) on a sliced x and a
// row broadcast whose length is no multiple of the width, over sizes whose
// tails end anywhere in the last block. All against float64.
TEST(CudaTest, UniformOperandsAndScalarPointwiseTails) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = FreshSeed();
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    const double tol = dtype == DType::kFloat32 ? 1e-5 : 2e-2;
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 64}, {129, 48}, {33, 4099}, {1031, 7}, {2049, 1}}) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " [" << rows << ", " << cols << "]");
      const uint64_t s = seed + rows * 131 + cols;
      Tensor wide = randn({rows, cols + 3}, Device::cuda(0), s).to(dtype);
      Tensor x = wide.narrow(1, 1, cols);  // sliced: rows 3 elements apart
      Tensor dense = x.contiguous();
      Tensor per_row = randn({rows, 1}, Device::cuda(0), s + 1).to(dtype);
      Tensor weight = randn({1}, Device::cuda(0), s + 2);  // f32 for every dtype
      const std::vector<double> xv = dense.to_double_vector(), rv = per_row.to_double_vector(), wv = weight.to_double_vector();
      auto check = [&](const Tensor& got_t, auto want_at, const char* what) {
        SCOPED_TRACE(what);
        const std::vector<double> got = got_t.to(DType::kFloat32).to_double_vector();
        ASSERT_EQ(got.size(), xv.size());
        for (size_t i = 0; i < got.size(); ++i) {
          const double want = want_at(i);
          ASSERT_NEAR(got[i], want, tol * (1 + std::fabs(want))) << "at " << i;
        }
      };
      const size_t c = static_cast<size_t>(cols);
      auto row_gelu = compile([](const Tensor& a, const Tensor& r) { return gelu(a + r, "tanh"); });
      check(row_gelu(dense, per_row), [&](size_t i) { return GeluRef(xv[i] + rv[i / c]); }, "dense + per row");
      check(row_gelu(x, per_row), [&](size_t i) { return GeluRef(xv[i] + rv[i / c]); }, "sliced + per row");
      auto scaled = compile([](const Tensor& a, const Tensor& w) { return (a.to(DType::kFloat32) * w + 1.0).to(a.dtype()); });
      check(scaled(dense, weight), [&](size_t i) { return xv[i] * wv[0] + 1.0; }, "dense times a f32 [1] weight");
      check(scaled(x, weight), [&](size_t i) { return xv[i] * wv[0] + 1.0; }, "sliced times a f32 [1] weight");
    }
  }
}

// A NaN is never >= anything, also where the compare's operand is an abs()
// fused into the kernel: the fuzzer found `abs(pow(x, e)) >= -0.5` true on
// CUDA for a negative x and a fractional e (pow's NaN), compiled only.
void ExpectFusedAbsComparesKeepNaNFalse(Device device) {
  SCOPED_TRACE(device.str());
  std::vector<double> xv;
  for (int k = -8; k <= 8; ++k) xv.push_back(k / 4.0);
  xv.push_back(std::nan(""));
  xv.push_back(-INFINITY);
  const Shape shape{1, 1, static_cast<int64_t>(xv.size())};
  Tensor x = Tensor::from_vector(xv, shape, DType::kFloat32, device);
  auto abs_ge = compile([](const Tensor& a) { return ge(abs(a), -0.5); });
  auto pow_where = compile([](const Tensor& a, const Tensor& e) {
    Tensor m = abs(pow(a, e));
    return where(ge(m, -0.5), m, -7.0);
  });
  const std::vector<double> got_ge = abs_ge(x).to(DType::kFloat32).to_double_vector();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(got_ge[i], std::isnan(xv[i]) ? 0.0 : 1.0) << "abs(" << xv[i] << ") >= -0.5";
  // The other compares of a value ptxas may take as >= 0, against 0 and a
  // negative constant; want: the float64 compare.
  struct Case {
    const char* what;
    std::function<Tensor(const Tensor&)> fn;
    std::function<bool(double)> want;
  };
  const std::vector<Case> cases = {
      {"abs(x) >= 0", [](const Tensor& a) { return ge(abs(a), 0.0); }, [](double v) { return std::fabs(v) >= 0; }},
      {"abs(x) > -1", [](const Tensor& a) { return gt(abs(a), -1.0); }, [](double v) { return std::fabs(v) > -1; }},
      {"abs(x) < -1", [](const Tensor& a) { return lt(abs(a), -1.0); }, [](double v) { return std::fabs(v) < -1; }},
      {"abs(x) != -1", [](const Tensor& a) { return ne(abs(a), -1.0); }, [](double v) { return std::fabs(v) != -1; }},
      {"relu(x) >= -1", [](const Tensor& a) { return ge(relu(a), -1.0); }, [](double v) { return std::isnan(v) ? false : true; }},
      {"exp(x) >= -1", [](const Tensor& a) { return ge(exp(a), -1.0); }, [](double v) { return std::exp(v) >= -1; }},
      {"x * x >= -1", [](const Tensor& a) { return ge(a * a, -1.0); }, [](double v) { return v * v >= -1; }},
      {"sqrt(x) >= -1", [](const Tensor& a) { return ge(sqrt(a), -1.0); }, [](double v) { return std::sqrt(v) >= -1; }},
  };
  for (const Case& c : cases) {
    auto f = compile([&c](const Tensor& a) { return c.fn(a); });
    const std::vector<double> got = f(x).to(DType::kFloat32).to_double_vector();
    for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(got[i], c.want(xv[i]) ? 1.0 : 0.0) << c.what << " at x = " << xv[i];
  }
  for (double e : {0.25, -0.75, 0.5, 2.0, 3.0, -1.0}) {
    SCOPED_TRACE(::testing::Message() << "exponent " << e);
    for (bool expanded : {false, true}) {
      Tensor ev = Tensor::from_vector(std::vector<double>{e}, {}, DType::kFloat32, device);
      if (expanded) ev = ev.expand(shape);
      const std::vector<double> got = pow_where(x, ev).to_double_vector();
      for (size_t i = 0; i < xv.size(); ++i) {
        const double m = std::fabs(std::pow(static_cast<double>(static_cast<float>(xv[i])), e));
        const double want = std::isnan(m) ? -7.0 : m;
        if (std::isinf(want)) {
          EXPECT_TRUE(std::isinf(got[i])) << "x " << xv[i] << " got " << got[i];
        } else {
          EXPECT_NEAR(got[i], want, 1e-5 * (1 + std::fabs(want))) << "x " << xv[i] << " expanded " << expanded;
        }
      }
    }
  }
}

TEST(CudaTest, ComparesOfFusedAbsKeepNaNFalse) {
  ExpectFusedAbsComparesKeepNaNFalse(Device::cpu());
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  ExpectFusedAbsComparesKeepNaNFalse(Device::cuda(0));
}

TEST(CudaTest, FreedMemoryIsReusedByTheCachingAllocator) {
  SKIP_WITHOUT_CUDA();
  auto& alloc = cuda::CachingAllocator::ForDevice(0);
  Tensor x = randn({1 << 20}, Device::cuda(), FreshSeed());
  { Tensor y = exp(x); }  // freed back to the pool
  const auto before = alloc.stats();
  Tensor z = exp(x);
  EXPECT_EQ(alloc.stats().driver_allocations, before.driver_allocations);
  EXPECT_GT(alloc.stats().cache_hits, before.cache_hits);
}

}  // namespace
}  // namespace fusebox

namespace fusebox {
namespace {

TEST(CudaTest, SplitFullReductionsMatchFloat64) {
  SKIP_WITHOUT_CUDA();
  Tensor host = randn({1 << 24}, Device::cpu(), FreshSeed());
  Tensor x = host.to(Device::cuda());
  auto compiled = compile([](const Tensor& x) { return std::make_tuple(sum(x * x), argmax(x), max(x)); });
  auto [s, i, m] = compiled(x);
  ASSERT_EQ(compiled.kernels().size(), 1u);
  const std::vector<double> v = host.to_double_vector();
  double ref = 0, best = -INFINITY;
  int64_t at = 0;
  for (size_t k = 0; k < v.size(); ++k) {
    ref += v[k] * v[k];
    if (v[k] > best) best = v[k], at = static_cast<int64_t>(k);
  }
  EXPECT_NEAR(s.item(), ref, 1e-4 * ref);
  EXPECT_EQ(static_cast<int64_t>(i.item()), at);
  EXPECT_EQ(m.item(), best);
}

TEST(CudaTest, KernelInspectionOnTheGpu) {
  SKIP_WITHOUT_CUDA();
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    auto compiled = compile([](const Tensor& x) { return std::make_tuple(ManualGelu(x), ManualSoftmax(x)); },
                            CompileOptions{.check_numerics = true});
    compiled(randn({512, 2000}, Device::cpu(), FreshSeed()).to(dtype).to(Device::cuda()));
    ASSERT_EQ(compiled.numerics().size(), compiled.kernels().size());
    for (const KernelInfo& k : compiled.kernels()) {
      ASSERT_TRUE(k.ptx_summary.has_value()) << k.name;
      EXPECT_GT(k.ptx_summary->registers, 0) << k.name;
      EXPECT_FALSE(k.ptx_summary->global_stores.empty()) << k.name;
    }
    for (const KernelNumerics& n : compiled.numerics()) EXPECT_FALSE(n.flagged) << n.kernel << ": " << n.worst;
    EXPECT_THAT(compiled.explain_dot(), HasSubstr(compiled.kernels()[0].name));
  }
}

// A compiled plan's kernels go out as one CUDA graph (backend/cuda/launch_graph.h):
// every call must run on its own buffers (the inputs are all kept alive, so
// no two calls share an address), and the graph is built once.
TEST(CudaTest, CompiledCallsLaunchOneGraphOnEachCallsBuffers) {
  SKIP_WITHOUT_CUDA();
  if (!cuda::GraphLaunchesEnabled(backend::CurrentTuning())) GTEST_SKIP() << "CUDA graph launches are off";
  // A graph no other test builds, so its plan (and graph) is new here.
  auto compiled = compile([](const Tensor& x) { return std::make_tuple(ManualGelu(x) * 3.0, sum(x, -1)); });
  const cuda::GraphLaunchCounts before = cuda::GraphLaunchStats();
  std::vector<Tensor> inputs, outputs;
  constexpr int kCalls = 6, kRows = 33, kCols = 70;
  for (int call = 0; call < kCalls; ++call) {
    Tensor host = randn({kRows, kCols}, Device::cpu(), FreshSeed());
    inputs.push_back(host.to(Device::cuda()));
    auto [g, s] = compiled(inputs.back());
    outputs.push_back(g);
    outputs.push_back(s);
    const std::vector<double> v = host.to_double_vector();
    std::vector<double> ref_g, ref_s(kRows, 0.0);
    for (size_t i = 0; i < v.size(); ++i) {
      ref_g.push_back(3.0 * GeluRef(v[i]));
      ref_s[i / kCols] += v[i];
    }
    ExpectClose(g.to_vector(), ref_g, 1e-5);
    ExpectClose(s.to_vector(), ref_s, 1e-5);
  }
  ASSERT_EQ(compiled.kernels().size(), 2u);
  const cuda::GraphLaunchCounts after = cuda::GraphLaunchStats();
  EXPECT_EQ(after.built - before.built, 1);
  EXPECT_GE(after.launched - before.launched, kCalls);
}

// Threads that run the same plan at once (two compiled functions of one
// graph share it through the plan cache) each get their own results: one
// launches through the graph, a thread that finds it busy kernel by kernel.
TEST(CudaTest, ThreadsSharingAPlanEachGetTheirResults) {
  SKIP_WITHOUT_CUDA();
  constexpr int kThreads = 4, kCalls = 40, kN = 3000;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      auto compiled = compile([](const Tensor& x) { return tanh(x) * 0.5 + x; });
      for (int call = 0; call < kCalls && failures[t].empty(); ++call) {
        Tensor host = randn({kN}, Device::cpu(), FreshSeed());
        const std::vector<float> got = compiled(host.to(Device::cuda())).to_vector();
        const std::vector<double> v = host.to_double_vector();
        for (int i = 0; i < kN; ++i) {
          const double want = std::tanh(v[i]) * 0.5 + v[i];
          if (std::fabs(got[i] - want) > 1e-5 * (1 + std::fabs(want))) {
            failures[t] = absl::StrCat("thread ", t, " call ", call, " element ", i, ": ", got[i], " vs ", want);
            break;
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (const std::string& f : failures) EXPECT_EQ(f, "");
}

}  // namespace
}  // namespace fusebox
