// Generated code: a golden file for manual_gelu's CUDA source (regenerate with
// FUSEBOX_UPDATE_GOLDEN=1), NVRTC compiling it for sm_90 without a GPU, the
// CPU printer's twin, and 64-bit indexing past 2^31 elements.
#include <cmath>
#include <fstream>
#include <sstream>

#include "backend/cpu/cpp_printer.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/cuda/nvrtc.h"
#include "backend/lower.h"
#include "frontend/capture.h"
#include "frontend/fusebox.h"
#include "fusion/pipeline.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/lower_for_test.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::HasSubstr;
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

// Captures fn(inputs) without running it and lowers its single kernel.
template <typename Fn>
backend::Kernel LowerOnly(Fn fn, const std::vector<Tensor>& inputs) {
  std::vector<backend::Kernel> kernels = testing_backend::LowerAll(fn, inputs);
  EXPECT_EQ(kernels.size(), 1u);
  return kernels.at(0);
}

std::string ReadFile(const std::string& path) {
  std::stringstream ss;
  ss << std::ifstream(path).rdbuf();
  return ss.str();
}

// Fails with the first line where `got` and `want` differ.
void ExpectSameText(const std::string& got, const std::string& want, const std::string& path) {
  if (got == want) return;
  std::istringstream g(got), w(want);
  std::string gl, wl;
  for (int line = 1;; ++line) {
    const bool gm = static_cast<bool>(std::getline(g, gl)), wm = static_cast<bool>(std::getline(w, wl));
    if (!gm && !wm) break;
    if (gl != wl || gm != wm) {
      ADD_FAILURE() << path << " differs at line " << line << ":\n  golden:    " << wl << "\n  generated: " << gl
                    << "\n(set FUSEBOX_UPDATE_GOLDEN=1 to regenerate after a deliberate change)";
      return;
    }
  }
}

TEST(CodegenTest, ManualGeluCudaMatchesGoldenAndCompiles) {
  Tensor x = randn({1024, 1024});
  backend::Kernel kernel = LowerOnly([](auto& in) { return ManualGelu(in[0]); }, {x});
  EXPECT_EQ(kernel.name, "poi_fused_add_mul_pow_tanh_0");
  EXPECT_FALSE(kernel.index64);
  const std::string source = backend::PrintCuda(kernel);
  const std::string path = std::string(FUSEBOX_TEST_DATA_DIR) + "/backend/golden/poi_fused_add_mul_pow_tanh_0.cu";
  if (std::getenv("FUSEBOX_UPDATE_GOLDEN")) std::ofstream(path) << source;
  ExpectSameText(source, ReadFile(path), path);
  // A dense elementwise kernel indexes with `i` alone.
  EXPECT_THAT(source, HasSubstr("in0[i]"));
  EXPECT_THAT(source, HasSubstr("out0[i] = "));

  auto out = cuda::CompileWithNvrtc(source, kernel.name, 90);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->ptx, HasSubstr(".entry poi_fused_add_mul_pow_tanh_0"));
  EXPECT_THAT(out->ptx, HasSubstr("tanh"));  // CUDA's tanhf inlines to tanh.approx or a polynomial
  EXPECT_FALSE(out->cubin.empty());
}

TEST(CodegenTest, CpuAndCudaKernelsIndexTheSameWay) {
  Tensor base = randn({12, 10});
  backend::Kernel kernel = LowerOnly([](auto& in) { return exp(in[0].transpose(0, 1)) + in[1]; },
                                     {base, randn({12})});
  const std::string cuda = backend::PrintCuda(kernel), cpp = backend::cpu::PrintCpp(kernel);
  for (const backend::Stmt& s : kernel.body) {
    if (s.kind != backend::StmtKind::kLoad) continue;
    const std::string load = kernel.buffers[s.buffer].name + "[" + s.index.ToString() + "]";
    EXPECT_THAT(cuda, HasSubstr(load));
    EXPECT_THAT(cpp, HasSubstr(load));
  }
}

TEST(CodegenTest, IndicesPast2To31Use64Bits) {
  // Expanded from one element: no memory, yet 3 * 2^30 iterations.
  Tensor one = randn({1, 1});
  backend::Kernel big = LowerOnly([](auto& in) { return exp(in[0].expand({3, int64_t{1} << 30})); }, {one});
  EXPECT_TRUE(big.index64);
  const std::string source = backend::PrintCuda(big);
  EXPECT_THAT(source, HasSubstr("const long long base = (long long)blockIdx.x"));
  EXPECT_THAT(source, HasSubstr("3221225472LL"));
  EXPECT_TRUE(cuda::CompileWithNvrtc(source, big.name, 90).ok());
  backend::Kernel small = LowerOnly([](auto& in) { return exp(in[0].expand({3, 1 << 20})); }, {one});
  EXPECT_FALSE(small.index64);
}

}  // namespace
}  // namespace fusebox

namespace fusebox {
namespace {

TEST(CodegenTest, FewLongRowsAreSplitAcrossBlocksOnCuda) {
  Tensor x = randn({1 << 17});
  backend::Kernel k = LowerOnly([](auto& in) { return sum(in[0] * in[0]); }, {x});
  EXPECT_EQ(k.num_rows, 1);
  EXPECT_GT(k.split, 1);
  const std::string source = backend::PrintCuda(k);
  EXPECT_THAT(source, HasSubstr(k.name + "_partial("));
  EXPECT_THAT(source, HasSubstr("fb_part0[blockIdx.x]"));
  auto out = cuda::CompileWithNvrtc(source, k.name, 90);
  ASSERT_TRUE(out.ok()) << out.status() << "\n" << source;
  EXPECT_THAT(out->ptx, HasSubstr(".entry " + k.name + "_partial"));
  // argmax splits too, carrying (value, index) pairs through the partials.
  backend::Kernel arg = LowerOnly([](auto& in) { return argmax(in[0]); }, {x});
  EXPECT_GT(arg.split, 1);
  EXPECT_TRUE(cuda::CompileWithNvrtc(backend::PrintCuda(arg), arg.name, 90).ok());
  // Many rows keep one block (or warp) per row.
  backend::Kernel rows = LowerOnly([](auto& in) { return sum(in[0].reshape({512, 256}), 1); }, {x});
  EXPECT_EQ(rows.split, 0);
}

}  // namespace
}  // namespace fusebox
