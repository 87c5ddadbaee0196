// Generated code: a golden file for manual_gelu's CUDA source (regenerate with
// FUSEBOX_UPDATE_GOLDEN=1), NVRTC compiling it for sm_90 without a GPU, the
// CPU printer's twin, and 64-bit indexing past 2^31 elements.
#include <cmath>
#include <functional>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "backend/cpu/cpp_printer.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/cuda/cuda_schedule.h"
#include "backend/cuda/nvrtc.h"
#include "backend/lower.h"
#include "backend/ptx_summary.h"
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
using testing_backend::LowerOnly;
using testing_backend::SpreadOf;

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
  const std::string source = backend::PrintCuda(kernel, backend::CurrentTuning());
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
  const std::string cuda = backend::PrintCuda(kernel, backend::CurrentTuning()), cpp = backend::cpu::PrintCpp(kernel);
  for (const backend::Stmt& s : kernel.body) {
    if (s.kind != backend::StmtKind::kLoad) continue;
    const std::string load = kernel.buffers[s.buffer].name + "[" + s.index.ToString() + "]";
    EXPECT_THAT(cuda, HasSubstr(load));
    EXPECT_THAT(cpp, HasSubstr(load));
  }
}

// IsAlignedRunOf and IsUniformOverAlignedRunOf against the index functions
// they describe, value by value.
TEST(CodegenTest, AlignedRunsOfTheLoopIndex) {
  using backend::IndexExpr;
  const IndexExpr i = IndexExpr::Var(1 << 20);
  struct Case {
    const char* what;
    IndexExpr e;
    std::function<int64_t(int64_t)> f;
  };
  const std::vector<Case> cases = {
      {"i", i, [](int64_t x) { return x; }},
      {"i % 64", i % 64, [](int64_t x) { return x % 64; }},
      {"i % 6", i % 6, [](int64_t x) { return x % 6; }},
      {"i / 4096 * 64 + i % 64", i / 4096 * 64 + i % 64, [](int64_t x) { return x / 4096 * 64 + x % 64; }},
      {"i / 16 % 8", i / 16 % 8, [](int64_t x) { return x / 16 % 8; }},
      {"i + 3", i + IndexExpr::Const(3), [](int64_t x) { return x + 3; }},
      {"i + 8", i + IndexExpr::Const(8), [](int64_t x) { return x + 8; }},
      {"i * 2", i * 2, [](int64_t x) { return x * 2; }},
      {"i % 64 + i / 64 % 2 * 128", i % 64 + i / 64 % 2 * 128, [](int64_t x) { return x % 64 + x / 64 % 2 * 128; }},
      {"i / 2 % 32", i / 2 % 32, [](int64_t x) { return x / 2 % 32; }},
      {"(i + 4) % 12", (i + IndexExpr::Const(4)) % 12, [](int64_t x) { return (x + 4) % 12; }},
      {"5", IndexExpr::Const(5), [](int64_t) { return int64_t{5}; }},
      {"i / 64", i / 64, [](int64_t x) { return x / 64; }},
      {"i / 6", i / 6, [](int64_t x) { return x / 6; }},
      {"i / 4096 * 7 + 3", i / 4096 * 7 + IndexExpr::Const(3), [](int64_t x) { return x / 4096 * 7 + 3; }},
  };
  for (int64_t v : {4, 8}) {
    for (const Case& c : cases) {
      // The property, by brute force over the first runs.
      bool holds = true, same = true;
      for (int64_t b = 0; b < 4096 && holds; b += v) {
        holds = c.f(b) % v == 0;
        for (int64_t k = 1; k < v && holds; ++k) holds = c.f(b + k) == c.f(b) + k;
      }
      for (int64_t b = 0; b < 4096 && same; b += v) {
        for (int64_t k = 1; k < v && same; ++k) same = c.f(b + k) == c.f(b);
      }
      // The predicates may only claim what holds; here they see every case that does.
      EXPECT_EQ(c.e.IsAlignedRunOf("i", v), holds) << c.what << " (printed " << c.e.ToString() << "), v = " << v;
      EXPECT_EQ(c.e.IsUniformOverAlignedRunOf("i", v), same) << c.what << " (printed " << c.e.ToString() << "), v = " << v;
    }
  }
}

// A bias over rows moves in 16-byte accesses like the dense operands when
// its length is a multiple of the vector width; not otherwise. A value per
// row (a [rows, 1] operand) is read once per vector where the row length is
// a multiple of the width, and so is a [1] weight of any type.
TEST(CodegenTest, BroadcastBiasIsVectorized) {
  auto bias_gelu = [](auto& in) { return gelu(in[0] + in[1], "tanh"); };
  const backend::Kernel bias = LowerOnly(bias_gelu, {randn({64, 48}), randn({48})});
  EXPECT_EQ(backend::CudaVectorWidth(bias), 4);
  const std::string source = backend::PrintCuda(bias, backend::CurrentTuning());
  EXPECT_THAT(source, HasSubstr("in1_first = i % 48;"));
  auto out = cuda::CompileWithNvrtc(source, bias.name, 90);
  ASSERT_TRUE(out.ok()) << out.status();
  const PtxSummary ptx = backend::SummarizePtx(out->ptx, out->log);
  EXPECT_EQ(ptx.global_loads.at(16), 2) << ptx.ToString();  // x and the bias
  EXPECT_EQ(ptx.global_stores.at(16), 1) << ptx.ToString();

  EXPECT_EQ(backend::CudaVectorWidth(LowerOnly(bias_gelu, {randn({64, 48}).to(DType::kBFloat16),
                                                           randn({48}).to(DType::kBFloat16)})),
            8);
  EXPECT_EQ(backend::CudaVectorWidth(LowerOnly(bias_gelu, {randn({64, 6}), randn({6})})), 1);
  const backend::Kernel per_row = LowerOnly(bias_gelu, {randn({64, 48}), randn({64, 1})});
  EXPECT_EQ(backend::CudaVectorWidth(per_row), 4);
  const std::string per_row_source = backend::PrintCuda(per_row, backend::CurrentTuning());
  EXPECT_THAT(per_row_source, HasSubstr("in1_v[0] = in1[in1_first];"));
  auto per_row_out = cuda::CompileWithNvrtc(per_row_source, per_row.name, 90);
  ASSERT_TRUE(per_row_out.ok()) << per_row_out.status();
  const PtxSummary per_row_ptx = backend::SummarizePtx(per_row_out->ptx, per_row_out->log);
  EXPECT_EQ(per_row_ptx.global_loads.at(16), 1) << per_row_ptx.ToString();  // x; the row's value is one scalar load
  EXPECT_EQ(backend::CudaVectorWidth(LowerOnly(bias_gelu, {randn({64, 6}), randn({64, 1})})), 1);
  // A bf16 row scaled by a f32 [1] weight: the weight is a scalar, the rows bf16 vectors.
  auto scaled = [](auto& in) { return (in[0].to(DType::kFloat32) * in[1]).to(DType::kBFloat16); };
  EXPECT_EQ(backend::CudaVectorWidth(LowerOnly(scaled, {randn({64, 48}).to(DType::kBFloat16), randn({1})})), 8);

  // The shapes CudaTest.BroadcastOperandsInVectorizedKernels runs on the GPU:
  // rows a multiple of the width read the bias as a run (`in1_first`); a
  // single row's bias folds to `i`, a dense operand; other rows stay scalar.
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    const int lanes = dtype == DType::kFloat32 ? 4 : 8;
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{33, 64}, {7, 48}, {5, 12}, {3, 6}, {1, 8}}) {
      const backend::Kernel k = LowerOnly(bias_gelu, {randn({rows, cols}).to(dtype), randn({cols}).to(dtype)});
      const std::string cuda = backend::PrintCuda(k, backend::CurrentTuning());
      const bool vector = cols % lanes == 0 || rows == 1;
      EXPECT_EQ(backend::CudaVectorWidth(k), vector ? lanes : 1) << DTypeName(dtype) << " " << rows << "x" << cols;
      EXPECT_EQ(cuda.find("in1_first") != std::string::npos, vector && rows > 1) << DTypeName(dtype) << " " << rows << "x" << cols;
      EXPECT_EQ(cuda.find("in1_v[") != std::string::npos, vector) << DTypeName(dtype) << " " << rows << "x" << cols;
      EXPECT_TRUE(cuda::CompileWithNvrtc(cuda, k.name, 90).ok()) << DTypeName(dtype) << " " << rows << "x" << cols;
    }
  }
}

// A row of no elements (a sum over an empty dim) runs its loop zero times,
// so nothing of the loop may run before it: its input is empty, and a
// row-broadcast load printed once before the loop (row_invariants.h) read
// past it (cross_entropy over no targets read a null pointer; UBSan). The
// CPU and CUDA printers alike.
TEST(CodegenTest, AnEmptyRowReadsNothingOutsideItsLoop) {
  // (shape, reduced dim): one empty row, three, and 64 empty columns (a column reduction).
  for (const auto& [shape, dim] : {std::pair{Shape{0}, -1}, std::pair{Shape{3, 0}, -1}, std::pair{Shape{0, 64}, 0}}) {
    const Tensor t = zeros(shape, Device::cpu(), DType::kInt64);
    const backend::Kernel kernel = LowerOnly(
        [dim](const std::vector<Tensor>& in) { return sum(ne(in[0], -100).to(DType::kInt64), dim); }, {t});
    ASSERT_TRUE(kernel.is_reduction());
    ASSERT_EQ(kernel.row_length, 0);
    const std::string cpp = backend::cpu::PrintCpp(kernel);
    const size_t loop = cpp.find("for (long long j = 0; j < 0LL; ++j)");
    ASSERT_NE(loop, std::string::npos) << cpp;
    EXPECT_GT(cpp.find("in0["), loop) << "a load of the empty input before its row loop:\n" << cpp;
    // CUDA: the kernel's first read of the input is inside a loop over the row.
    const std::string cuda = backend::PrintCuda(kernel, backend::CurrentTuning());
    const size_t entry = cuda.find("extern \"C\" __global__");
    ASSERT_NE(entry, std::string::npos) << cuda;
    EXPECT_GT(cuda.find("in0[", entry), cuda.find("for (", entry)) << cuda.substr(entry);
    const auto compiled = cuda::CompileWithNvrtc(cuda, kernel.name, 90);
    EXPECT_TRUE(compiled.ok()) << compiled.status();
  }
}

TEST(CodegenTest, IndicesPast2To31Use64Bits) {
  // Expanded from one element: no memory, yet 3 * 2^30 iterations.
  Tensor one = randn({1, 1});
  backend::Kernel big = LowerOnly([](auto& in) { return exp(in[0].expand({3, int64_t{1} << 30})); }, {one});
  EXPECT_TRUE(big.index64);
  const std::string source = backend::PrintCuda(big, backend::CurrentTuning());
  EXPECT_THAT(source, HasSubstr("const long long base = ((long long)blockIdx.x"));  // one value: 16-byte stores
  EXPECT_THAT(source, HasSubstr("3221225472LL"));
  EXPECT_TRUE(cuda::CompileWithNvrtc(source, big.name, 90).ok());
  // A value per row of 2^30 + 1 (no multiple of the width): the scalar path.
  backend::Kernel rows = LowerOnly([](auto& in) { return exp(in[0].expand({3, (int64_t{1} << 30) + 1})); }, {randn({3, 1})});
  EXPECT_TRUE(rows.index64);
  const std::string scalar = backend::PrintCuda(rows, backend::CurrentTuning());
  EXPECT_THAT(scalar, HasSubstr("const long long base = (long long)blockIdx.x * 1024 + threadIdx.x;"));
  EXPECT_THAT(scalar, HasSubstr("3221225475LL"));
  EXPECT_TRUE(cuda::CompileWithNvrtc(scalar, rows.name, 90).ok());
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
  EXPECT_GT(SpreadOf(k).split, 1);
  const std::string source = backend::PrintCuda(k, backend::CurrentTuning());
  EXPECT_THAT(source, HasSubstr(k.name + "_partial("));
  EXPECT_THAT(source, HasSubstr("fb_part0[blockIdx.x]"));
  auto out = cuda::CompileWithNvrtc(source, k.name, 90);
  ASSERT_TRUE(out.ok()) << out.status() << "\n" << source;
  EXPECT_THAT(out->ptx, HasSubstr(".entry " + k.name + "_partial"));
  // argmax splits too, carrying (value, index) pairs through the partials.
  backend::Kernel arg = LowerOnly([](auto& in) { return argmax(in[0]); }, {x});
  EXPECT_GT(SpreadOf(arg).split, 1);
  EXPECT_TRUE(cuda::CompileWithNvrtc(backend::PrintCuda(arg, backend::CurrentTuning()), arg.name, 90).ok());
  // Many rows keep one block (or warp) per row.
  backend::Kernel rows = LowerOnly([](auto& in) { return sum(in[0].reshape({512, 256}), 1); }, {x});
  EXPECT_EQ(SpreadOf(rows).split, 0);
}

}  // namespace
}  // namespace fusebox

namespace fusebox {
namespace {

// Column reductions (reduced dims not innermost) with few columns split each
// column into chunks: a block per (256 columns, chunk) writes partials laid
// out chunk-major, a thread per column folds them and stores. (1002 columns:
// no run of 4 columns is 16-byte aligned, so not the tiles of
// column_codegen_test.cc.)
TEST(CodegenTest, FewColumnsAreSplitIntoChunksOnCuda) {
  Tensor x = randn({8192, 1002});
  backend::Kernel k = LowerOnly([](auto& in) { return sum(in[0], 0); }, {x});
  const backend::CudaRowSpread spread = SpreadOf(k);
  EXPECT_EQ(spread.strategy, backend::RowStrategy::kThreadPerRow);
  EXPECT_EQ(k.num_rows, 1002);
  ASSERT_GT(spread.split, 1);
  const int64_t chunk = backend::CudaSplitChunk(k, spread, backend::CurrentTuning());
  EXPECT_EQ(chunk % backend::CurrentTuning().GetInt(backend::Knob::kColumnUnroll), 0);
  EXPECT_GE(chunk, 64);
  EXPECT_LT((spread.split - 1) * chunk, k.row_length) << "no empty chunk";
  EXPECT_GE(spread.split * chunk, k.row_length);
  // ~512 blocks: 4 column tiles x split chunks.
  EXPECT_EQ(backend::ChooseCudaSchedule(k, backend::CurrentTuning()).Grid(k.num_rows, 132), 4 * spread.split);
  EXPECT_EQ(backend::CudaCombineGridSize(k, spread), 4);
  const std::string source = backend::PrintCuda(k, backend::CurrentTuning());
  EXPECT_THAT(source, HasSubstr(k.name + "_partial("));
  EXPECT_THAT(source, HasSubstr("fb_part0[part * 1002 + r] = t"));  // chunk-major: coalesced
  EXPECT_THAT(source, HasSubstr("fb_part0[p * 1002 + r]"));
  EXPECT_THAT(source, HasSubstr("const int j = j0 + u;"));  // the unrolled step, 32-bit indices
  auto out = cuda::CompileWithNvrtc(source, k.name, 90);
  ASSERT_TRUE(out.ok()) << out.status() << "\n" << source;
  EXPECT_THAT(out->ptx, HasSubstr(".entry " + k.name + "_partial"));
  // The unrolled step's loads are all in the PTX (one per row, plus the tail's).
  const PtxSummary summary = backend::SummarizePtx(out->ptx, out->log);
  EXPECT_GE(summary.global_loads.at(4), backend::CurrentTuning().GetInt(backend::Knob::kColumnUnroll) + 1) << summary.ToString();
  EXPECT_EQ(summary.shfl_sync, 0) << "columns need no shuffles";
}

TEST(CodegenTest, ColumnSplitCoversMiddleDimsArgmaxAndSeveralAccumulators) {
  // The reduced dim in the middle: rows (4 x 300 columns) unravel with / and %.
  backend::Kernel mid = LowerOnly([](auto& in) { return mean(in[0], 1, true); }, {randn({4, 2000, 300})});
  EXPECT_EQ(SpreadOf(mid).strategy, backend::RowStrategy::kThreadPerRow);
  EXPECT_GT(SpreadOf(mid).split, 1);
  // argmax carries (value, index) partials.
  backend::Kernel arg = LowerOnly([](auto& in) { return argmax(in[0], 0); }, {randn({5000, 70})});
  EXPECT_GT(SpreadOf(arg).split, 1);
  const std::string arg_source = backend::PrintCuda(arg, backend::CurrentTuning());
  EXPECT_THAT(arg_source, HasSubstr("fb_part_index0[part * 70 + r] = t"));
  // Two reductions over the same columns share the split.
  backend::Kernel two = LowerOnly([](auto& in) { return sum(in[0], 0) + amax(in[0], {0}); }, {randn({3000, 100})});
  ASSERT_EQ(two.passes.size(), 1u);
  EXPECT_EQ(two.passes[0].accumulators.size(), 2u);
  EXPECT_GT(SpreadOf(two).split, 1);
  for (const backend::Kernel* k : {&mid, &arg, &two}) {
    auto out = cuda::CompileWithNvrtc(backend::PrintCuda(*k, backend::CurrentTuning()), k->name, 90);
    EXPECT_TRUE(out.ok()) << k->name << ": " << out.status();
  }
}

TEST(CodegenTest, ColumnReductionsThatStayUnsplit) {
  // Two passes (var: mean, then squares) and per-element stores keep one
  // thread per column.
  Tensor x = randn({4096, 64});
  backend::Kernel two_pass = LowerOnly([](auto& in) { return var(in[0], {0}); }, {x});
  EXPECT_EQ(SpreadOf(two_pass).strategy, backend::RowStrategy::kThreadPerRow);
  EXPECT_GT(two_pass.passes.size(), 1u);
  EXPECT_EQ(SpreadOf(two_pass).split, 0);
  backend::Kernel centered = LowerOnly([](auto& in) { return in[0] - mean(in[0], 0, true); }, {x});
  EXPECT_FALSE(centered.elementwise.empty());
  EXPECT_EQ(SpreadOf(centered).split, 0);
  // Short columns: nothing to split (chunks would be under 64 rows).
  backend::Kernel short_cols = LowerOnly([](auto& in) { return sum(in[0], 0); }, {randn({100, 512})});
  EXPECT_EQ(SpreadOf(short_cols).split, 0);
  // Enough columns to fill the GPU on their own.
  backend::Kernel wide = LowerOnly([](auto& in) { return sum(in[0], 0); }, {randn({128, 1 << 17})});
  EXPECT_EQ(SpreadOf(wide).split, 0);
  const std::string source = backend::PrintCuda(wide, backend::CurrentTuning());
  EXPECT_THAT(source, HasSubstr(absl::StrCat("#pragma unroll ", backend::CurrentTuning().GetInt(backend::Knob::kColumnUnroll), "\n    for (int j = 0; j < 128; ++j)")));
  EXPECT_TRUE(cuda::CompileWithNvrtc(source, wide.name, 90).ok());
}

}  // namespace
}  // namespace fusebox
