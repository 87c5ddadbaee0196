// The CUDA row layout (backend/cuda/row_layout.h) without a GPU: for the
// bench's row reductions, NVRTC compiles the kernel, its PTX moves rows in
// 16-byte loads (and stores, where the kernel writes rows) and ptxas reports
// no spills; layouts that cannot vectorize keep scalar accesses.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "backend/cuda/cache_hints.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/row_printer.h"
#include "backend/ptx_summary.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/lower_for_test.h"
#include "tests/test_util.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers
using testing_backend::SpreadOf;

// The last kernel of fn(inputs), lowered.
template <typename Fn>
backend::Kernel LowerLast(Fn fn, const std::vector<Tensor>& inputs) {
  return testing_backend::LowerAll(fn, inputs).back();
}

struct Compiled {
  std::string source;
  PtxSummary summary;
  std::string ptx;
  std::string log;  // NVRTC's, with ptxas -v
};

// Memoized by source; test_util::CompileWithPtxasReport makes each compile's
// PTX new, so ptxas's report (registers, spills) is in the log.
Compiled CompileCuda(const backend::Kernel& k) {
  static std::map<std::string, Compiled>* compiled = new std::map<std::string, Compiled>();
  const std::string source = backend::PrintCuda(k, backend::CurrentTuning());
  if (auto it = compiled->find(source); it != compiled->end()) return it->second;
  Compiled c{source, {}, {}, {}};
  auto out = test_util::CompileWithPtxasReport(source, k.name, 90);
  EXPECT_TRUE(out.ok()) << out.status() << "\n" << c.source;
  if (out.ok()) {
    c.summary = backend::SummarizePtx(out->ptx, out->log);
    c.ptx = out->ptx;
    c.log = out->log;
  }
  if (std::getenv("FUSEBOX_TEST_PRINT_PTX")) std::cout << k.name << " " << k.row_length << ": " << c.summary.ToString() << "\n";
  if (const char* dir = std::getenv("FUSEBOX_TEST_SOURCE_DIR")) std::ofstream(absl::StrCat(dir, "/", k.name, "_", k.row_length, ".cu")) << c.source;
  compiled->emplace(source, c);
  return c;
}

using test_util::CountSubstr;

int64_t Count(const std::map<int, int64_t>& by_width, int width) {
  auto it = by_width.find(width);
  return it == by_width.end() ? 0 : it->second;
}

Tensor LayerNorm(const std::vector<Tensor>& in) {
  Tensor centered = in[0] - mean(in[0], -1, /*keepdim=*/true);
  Tensor var = mean(centered * centered, -1, /*keepdim=*/true);
  return centered * rsqrt(var + 1e-5) * in[1] + in[2];
}
Tensor RmsNorm(const std::vector<Tensor>& in) { return in[0] * rsqrt(mean(in[0] * in[0], -1, true) + 1e-6) * in[1]; }

void ExpectVectorizedWithoutSpills(const Compiled& c, bool stores_rows) {
  EXPECT_GT(Count(c.summary.global_loads, 16), 0) << c.summary.ToString();
  if (stores_rows) EXPECT_GT(Count(c.summary.global_stores, 16), 0) << c.summary.ToString();
  EXPECT_EQ(c.summary.spill_store_bytes + c.summary.spill_load_bytes, 0) << c.summary.ToString();
  EXPECT_EQ(c.summary.stack_frame_bytes, 0) << c.summary.ToString();
  EXPECT_GT(c.summary.registers, 0) << "NVRTC log:\n" << c.log;
}

Tensor Softmax(const std::vector<Tensor>& in) { return ManualSoftmax(in[0]); }

TEST(RowCodegenTest, SoftmaxRowsMoveSixteenBytesWithoutSpills) {
  for (int64_t cols : {1024, 4096, 8192, 12288, 16384}) {
    SCOPED_TRACE(cols);
    backend::Kernel k = LowerLast(Softmax, {randn({64, cols})});
    EXPECT_EQ(k.kind, fusion::KernelKind::kPersistent);
    const backend::CudaRowLayout layout = backend::ChooseCudaRowLayout(k, SpreadOf(k), backend::CurrentTuning());
    EXPECT_EQ(layout.vector_width, 4);
    EXPECT_LE(layout.groups * layout.vector_width, 32);  // registers per cached input
    // Warp rows (one per 32-thread block) up to 1024; then 8 values per
    // thread up to 4096 (512 threads), 16 beyond, at most 1024 threads.
    EXPECT_EQ(backend::CudaBlockSize(k, SpreadOf(k), backend::CurrentTuning()), cols <= 1024 ? 32 * backend::kCudaWarpRowsPerBlock
                                         : cols <= 4096 ? cols / 8
                                         : cols <= 8192 ? cols / 16
                                                        : 1024);
    if (cols <= 1024) EXPECT_EQ(backend::kCudaWarpRowsPerBlock, 1);
    const Compiled c = CompileCuda(k);
    EXPECT_THAT(c.source, HasSubstr("if (fb_vec)"));
    ExpectVectorizedWithoutSpills(c, /*stores_rows=*/true);
  }
}

// Rows read once (a sum: one pass, no element stores) take 8 values per
// thread at any length, so more threads have loads in flight (row sum over
// 8192 on the H200: 1024 threads of 8 values 4025 GB/s, 512 of 16 3836);
// softmax keeps 16 past 4096 (above). Their loads stream.
TEST(RowCodegenTest, RowsReadOnceTakeEightValuesPerThread) {
  for (int64_t cols : {2048, 8192}) {
    SCOPED_TRACE(cols);
    // 37 rows: a source no other test of this binary compiles (NVRTC on the
    // H200 machine prints no ptxas -v lines for one it already compiled).
    backend::Kernel k = LowerLast([](auto& in) { return sum(in[0], -1); }, {randn({37, cols})});
    EXPECT_EQ(k.kind, fusion::KernelKind::kPersistent);
    const backend::CudaRowLayout layout = backend::ChooseCudaRowLayout(k, SpreadOf(k), backend::CurrentTuning());
    EXPECT_EQ(layout.block_size, cols / 8);
    EXPECT_EQ(layout.groups * layout.vector_width, 8);
    const Compiled c = CompileCuda(k);
    EXPECT_EQ(Count(c.summary.global_loads, 16), 2) << c.summary.ToString();
    ExpectVectorizedWithoutSpills(c, /*stores_rows=*/false);
    // Read once and nothing stored per element: the loads stream
    // (evict-first), leaving the L2 to other data.
    EXPECT_THAT(c.ptx, HasSubstr("ld.global.cs.v4"));
  }
  // A column sum's scalar partial kernel does not (measured slower; the
  // 16-byte column tiles do, column_codegen_test.cc).
  const Compiled columns = CompileCuda(LowerLast([](auto& in) { return sum(in[0], 0); }, {randn({4096, 1022})}));
  EXPECT_THAT(columns.source, HasSubstr("_partial("));
  EXPECT_THAT(columns.ptx, Not(HasSubstr("ld.global.cs")));
}

TEST(RowCodegenTest, NormsLoadRowsAndWeightsInSixteenBytes) {
  for (int64_t cols : {4096, 8192, 16384}) {
    SCOPED_TRACE(cols);
    Tensor x = randn({64, cols}), w = randn({cols}), b = randn({cols});
    for (const backend::Kernel& k : {LowerLast(LayerNorm, {x, w, b}), LowerLast(RmsNorm, {x, w})}) {
      SCOPED_TRACE(k.name);
      EXPECT_EQ(k.kind, fusion::KernelKind::kPersistent);
      EXPECT_EQ(backend::ChooseCudaRowLayout(k, SpreadOf(k), backend::CurrentTuning()).vector_width, 4);
      const Compiled c = CompileCuda(k);
      ExpectVectorizedWithoutSpills(c, /*stores_rows=*/true);
      // The weight is read where it is used, not held across the passes.
      EXPECT_THAT(c.source, HasSubstr("reinterpret_cast<const uint4*>(in1 + (j))"));
    }
  }
}

TEST(RowCodegenTest, LoopedRowsLoadSeveralGroupsAhead) {
  backend::Kernel k = LowerLast([](auto& in) { return sum(in[0], -1); }, {randn({64, 16384 + 4})});
  EXPECT_EQ(k.kind, fusion::KernelKind::kReduction);
  EXPECT_EQ(backend::ChooseCudaRowLayout(k, SpreadOf(k), backend::CurrentTuning()).groups, backend::kCudaLoopGroups);
  const Compiled c = CompileCuda(k);
  ExpectVectorizedWithoutSpills(c, /*stores_rows=*/false);
  EXPECT_GE(Count(c.summary.global_loads, 16), backend::kCudaLoopGroups) << c.summary.ToString();
}

TEST(RowCodegenTest, RowsOverTheRegisterBudgetLoopInsteadOfSpilling) {
  // Five inputs held through a pass of 16384: 80 values per thread of 1024,
  // past the registers and the shared memory a block may hold.
  auto fn = [](auto& in) { return softmax(in[0] * in[1] + in[2] * in[3] + in[4], -1); };
  std::vector<Tensor> five;
  for (int i = 0; i < 5; ++i) five.push_back(randn({8, 16384}));
  backend::Kernel k = LowerLast(fn, five);
  EXPECT_EQ(k.kind, fusion::KernelKind::kPersistent);
  EXPECT_FALSE(backend::ChooseCudaRowLayout(k, SpreadOf(k), backend::CurrentTuning()).on_chip);
  const Compiled looped = CompileCuda(k);
  EXPECT_THAT(looped.source, HasSubstr("looped (over the register budget)"));
  ExpectVectorizedWithoutSpills(looped, /*stores_rows=*/true);
  // A quarter as long: 20 values per thread of 1024 stay in registers.
  std::vector<Tensor> short_rows;
  for (int i = 0; i < 5; ++i) short_rows.push_back(randn({8, 4096}));
  backend::Kernel quarter = LowerLast(fn, short_rows);
  EXPECT_TRUE(backend::ChooseCudaRowLayout(quarter, SpreadOf(quarter), backend::CurrentTuning()).on_chip);
  EXPECT_EQ(backend::ChooseCudaRowLayout(quarter, SpreadOf(quarter), backend::CurrentTuning()).shared_groups, 0);
  ExpectVectorizedWithoutSpills(CompileCuda(quarter), /*stores_rows=*/true);
}

// Re-read rows past the registers of a block of 1024 (softmax over 65536:
// 64 values per thread) keep the first 32 values of each thread in
// registers and the rest in dynamic shared memory (128 KB a block), so the
// row is read from HBM once; consecutive threads touch consecutive 16-byte
// groups, copied there by cp.async (all of a row's loads in flight at once).
// Where even that is too much (three inputs held) the persistent kernel
// still loops; before sm_90 the limit is lower.
TEST(RowCodegenTest, LongReReadRowsStayOnChipInRegistersAndSharedMemory) {
  ASSERT_TRUE(backend::CurrentTuning().On(backend::Knob::kSharedRows)) << "FUSEBOX_TUNE_SHARED_ROWS is set";
  const backend::Kernel softmax = LowerLast([](auto& in) { return ManualSoftmax(in[0]); }, {randn({3, 65536})});
  EXPECT_EQ(softmax.kind, fusion::KernelKind::kReduction);
  const backend::CudaRowLayout layout = backend::ChooseCudaRowLayout(softmax, SpreadOf(softmax), backend::CurrentTuning());
  EXPECT_TRUE(layout.on_chip);
  EXPECT_FALSE(layout.grid_stride);
  EXPECT_EQ(layout.block_size, 1024);
  EXPECT_EQ(layout.groups, 16);
  EXPECT_EQ(layout.shared_groups, 8);
  EXPECT_EQ(layout.shared_bytes, 8 * 4 * 1024 * 4);
  const Compiled c = CompileCuda(softmax);
  EXPECT_THAT(c.source, HasSubstr("fb_row_cache<float, 32, 1024, 4> c0;"));
  EXPECT_THAT(c.source, HasSubstr("extern __shared__"));
  ExpectVectorizedWithoutSpills(c, /*stores_rows=*/true);
  EXPECT_EQ(c.summary.stack_frame_bytes, 0) << c.summary.ToString();
  // The aligned instance's three passes read the 8 shared groups as
  // 16-byte vectors.
  EXPECT_GE(Count(c.summary.shared_loads, 16), 3 * 8) << c.summary.ToString();
  // The kernel picks its aligned or its scalar instance once.
  EXPECT_THAT(c.source, HasSubstr("red_fused_div_exp_max_sub_sum_0_rows<true>(in0, out0);"));
  EXPECT_THAT(c.source, HasSubstr("red_fused_div_exp_max_sub_sum_0_rows<false>(in0, out0);"));
  // One HBM read: 16 groups loaded once (8 into registers, 8 by cp.async
  // into shared memory), no L2 keep hints needed.
  EXPECT_EQ(Count(c.summary.global_loads, 16), 8) << c.summary.ToString();
  EXPECT_EQ(Count(c.summary.async_copies, 16), 8) << c.summary.ToString();
  EXPECT_THAT(c.ptx, HasSubstr("cp.async.wait_all"));
  EXPECT_THAT(c.ptx, Not(HasSubstr("cache_hint")));
  // The division by the row's sum is one reciprocal per instance (aligned
  // and scalar), not one per element.
  EXPECT_EQ(CountSubstr(c.ptx, "div.rn.f32") + CountSubstr(c.ptx, "rcp.rn.f32"), 2);


  for (const backend::Kernel& k : {LowerLast(LayerNorm, {randn({4, 65536}), randn({65536}), randn({65536})}),
                                   LowerLast([](auto& in) { return ManualSoftmax(in[0]); },
                                             {randn({4, 40000}).to(DType::kBFloat16)})}) {
    SCOPED_TRACE(k.name);
    EXPECT_GT(backend::ChooseCudaRowLayout(k, SpreadOf(k), backend::CurrentTuning()).shared_groups, 0);
    const Compiled other = CompileCuda(k);
    EXPECT_EQ(other.summary.spill_store_bytes + other.summary.spill_load_bytes, 0) << other.summary.ToString();
    EXPECT_EQ(other.summary.stack_frame_bytes, 0) << other.summary.ToString();
    // bf16 rows are held as float: converted on the way, so not copied by cp.async.
    const bool bf16 = k.buffers[0].dtype == DType::kBFloat16;
    EXPECT_EQ(other.summary.async_copies.empty(), bf16) << other.summary.ToString();
  }

  backend::Kernel on_a100 = softmax;
  on_a100.cuda_arch = 80;  // 128 KB: still fits
  EXPECT_EQ(backend::ChooseCudaRowLayout(on_a100, SpreadOf(on_a100), backend::CurrentTuning()).shared_groups, 8);
  backend::Kernel on_ada = softmax;
  on_ada.cuda_arch = 89;  // 64 KB: does not; walks the grid through the L2
  EXPECT_EQ(backend::ChooseCudaRowLayout(on_ada, SpreadOf(on_ada), backend::CurrentTuning()).shared_groups, 0);
  EXPECT_TRUE(backend::ChooseCudaRowLayout(on_ada, SpreadOf(on_ada), backend::CurrentTuning()).grid_stride);
}

TEST(RowCodegenTest, RowsThatCannotVectorizeStayScalar) {
  // Without aligned groups (their rule takes the row sum below; see
  // OddRowsMoveSixteenByteGroupsAlignedToMemory).
  backend::ScopedTuning divided({{backend::Knob::kAlignedRowGroups, 0}});
  // Odd rows: groups would straddle rows, so elements move one at a time.
  for (int64_t cols : {1023, 4097 + 2, 33}) {
    SCOPED_TRACE(cols);
    backend::Kernel k = LowerLast(Softmax, {randn({8, cols})});
    EXPECT_EQ(backend::ChooseCudaRowLayout(k, SpreadOf(k), backend::CurrentTuning()).vector_width, cols % 2 == 0 ? 2 : 1);
    const Compiled c = CompileCuda(k);
    EXPECT_EQ(Count(c.summary.global_loads, 16), 0) << c.summary.ToString();
  }
  // A view whose rows start 1 element apart from a multiple of 4.
  Tensor base = randn({8, 1025});
  backend::Kernel k = LowerLast([](auto& in) { return sum(in[0].narrow(1, 1, 1024), -1); }, {base});
  const Compiled c = CompileCuda(k);
  EXPECT_THAT(c.source, Not(HasSubstr("fb_vec")));
  EXPECT_EQ(Count(c.summary.global_loads, 16), 0) << c.summary.ToString();
}

// Knob::kAlignedRowGroups 2: odd rows move 16-byte vectors anyway, their
// groups aligned to memory (a row's head and tail masked): held on chip,
// looped, warp rows, 16-bit, and a norm whose weight loads element by element.
TEST(RowCodegenTest, OddRowsMoveSixteenByteGroupsAlignedToMemory) {
  backend::ScopedTuning aligned({{backend::Knob::kAlignedRowGroups, 2}});
  struct Case {
    Shape shape;
    DType dtype;
    int fn;  // 0 softmax, 1 row sum, 2 layer_norm
  };
  const std::vector<Case> cases = {
      {{8, 1023}, DType::kFloat32, 0},     {{8, 4099}, DType::kFloat32, 0},   {{64, 37}, DType::kFloat32, 0},
      {{37, 16411}, DType::kBFloat16, 1},  {{64, 12289}, DType::kFloat32, 0}, {{16, 1031}, DType::kBFloat16, 2},
      {{16, 16411}, DType::kFloat16, 0},   {{8, 1030}, DType::kBFloat16, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.fn, " ", c.shape[0], "x", c.shape[1], " ", DTypeName(c.dtype)));
    Tensor x = randn(c.shape).to(c.dtype);
    Tensor w = randn({c.shape[1]}).to(c.dtype), b = randn({c.shape[1]}).to(c.dtype);
    const backend::Kernel k = c.fn == 0   ? LowerLast(Softmax, {x})
                              : c.fn == 1 ? LowerLast([](auto& in) { return sum(in[0], -1); }, {x})
                                          : LowerLast(LayerNorm, {x, w, b});
    const backend::CudaRowLayout layout = backend::ChooseCudaRowLayout(k, SpreadOf(k), backend::CurrentTuning());
    EXPECT_TRUE(layout.aligned_groups);
    EXPECT_EQ(layout.vector_width, 16 / DTypeSize(c.dtype));
    const Compiled compiled = CompileCuda(k);
    EXPECT_THAT(compiled.source, HasSubstr("fb_head"));
    ExpectVectorizedWithoutSpills(compiled, /*stores_rows=*/c.fn != 1);
  }
  // The rule (1): only rows read once with nothing stored per element.
  backend::ScopedTuning rule({{backend::Knob::kAlignedRowGroups, 1}});
  const backend::Kernel softmax = LowerLast(Softmax, {randn({8, 1023})});
  EXPECT_FALSE(backend::ChooseCudaRowLayout(softmax, SpreadOf(softmax), backend::CurrentTuning()).aligned_groups);
  const backend::Kernel row_sum = LowerLast([](auto& in) { return sum(in[0], -1); }, {randn({8, 1023})});
  EXPECT_TRUE(backend::ChooseCudaRowLayout(row_sum, SpreadOf(row_sum), backend::CurrentTuning()).aligned_groups);
  // 0: never.
  backend::ScopedTuning off({{backend::Knob::kAlignedRowGroups, 0}});
  EXPECT_FALSE(backend::ChooseCudaRowLayout(row_sum, SpreadOf(row_sum), backend::CurrentTuning()).aligned_groups);
}

TEST(RowCodegenTest, ArgmaxHalfPrecisionAndRunTimeRowsCompile) {
  Tensor x = randn({64, 4096});
  for (const backend::Kernel& k : {LowerLast([](auto& in) { return argmax(in[0], -1); }, {x}),
                                   LowerLast(Softmax, {x.to(DType::kBFloat16)}),
                                   LowerLast([](auto& in) { return max(in[0], -1); }, {randn({64, 2048})})}) {
    SCOPED_TRACE(k.name);
    ExpectVectorizedWithoutSpills(CompileCuda(k), /*stores_rows=*/false);
  }
  const backend::Kernel bf16 = LowerLast(Softmax, {x.to(DType::kBFloat16)});
  EXPECT_EQ(backend::ChooseCudaRowLayout(bf16, SpreadOf(bf16), backend::CurrentTuning()).vector_width, 8);
}

// A one-group loop (LoopsOneGroupPerStep): looped, not grid-stride, 512
// threads of one group per step, four blocks per SM; compiled.
Compiled ExpectOneGroupLoop(const backend::Kernel& k) {
  EXPECT_TRUE(backend::LoopsOneGroupPerStep(k, SpreadOf(k), backend::CurrentTuning()));
  const backend::CudaRowLayout layout = backend::ChooseCudaRowLayout(k, SpreadOf(k), backend::CurrentTuning());
  EXPECT_FALSE(layout.on_chip);
  EXPECT_FALSE(layout.grid_stride);
  EXPECT_EQ(layout.block_size, backend::kCudaWideLoopThreads);
  EXPECT_EQ(layout.groups, 1);
  EXPECT_EQ(layout.min_blocks, backend::kCudaOneGroupLoopMinBlocks);
  Compiled c = CompileCuda(k);
  EXPECT_THAT(c.source, HasSubstr("looped (one group per step, the row kept in the L2)"));
  EXPECT_THAT(c.source, HasSubstr(absl::StrCat("__launch_bounds__(512, ", backend::kCudaOneGroupLoopMinBlocks, ")")));
  return c;
}

// Re-read block rows past 4096 up to kCudaWideLoopRowLimit, in 16-byte
// groups, without a broadcast operand (a softmax over 8192) loop with 512 threads and one group
// per step, keeping the row in the L2 until its last pass; shorter or longer
// rows, rows read once and norms (a weight read by every row) keep their
// layouts.
TEST(RowCodegenTest, WideReReadRowsLoopOneGroupPerStep) {
  const backend::Kernel softmax = LowerLast(Softmax, {randn({19, 8192})});
  ASSERT_TRUE(backend::LoopsWideRows(softmax, SpreadOf(softmax), backend::CurrentTuning()));
  const Compiled c = ExpectOneGroupLoop(softmax);
  EXPECT_THAT(c.ptx, HasSubstr("ld.global.L1::evict_last.L2::cache_hint.v4"));   // the first two passes keep the row
  EXPECT_THAT(c.ptx, HasSubstr("ld.global.L1::evict_first.L2::cache_hint.v4"));  // the last lets it go
  ExpectVectorizedWithoutSpills(c, /*stores_rows=*/true);
  // Two inputs, and a length that leaves a partial step: still looped.
  const backend::Kernel two = LowerLast([](auto& in) { return ManualSoftmax(in[0] * in[1]); }, {randn({3, 4100}), randn({3, 4100})});
  EXPECT_TRUE(backend::LoopsWideRows(two, SpreadOf(two), backend::CurrentTuning()));

  for (int64_t cols : {4096, 4099, 12288}) {  // 4099: scalar groups
    SCOPED_TRACE(cols);
    const backend::Kernel k = LowerLast(Softmax, {randn({3, cols})});
    EXPECT_FALSE(backend::LoopsWideRows(k, SpreadOf(k), backend::CurrentTuning()));
    EXPECT_TRUE(backend::ChooseCudaRowLayout(k, SpreadOf(k), backend::CurrentTuning()).on_chip);
  }
  Tensor x = randn({3, 8192}), w = randn({8192}), b = randn({8192});
  for (const backend::Kernel& k : {LowerLast(LayerNorm, {x, w, b}), LowerLast(RmsNorm, {x, w}),
                                   LowerLast([](auto& in) { return sum(in[0], -1); }, {x})}) {
    SCOPED_TRACE(k.name);
    EXPECT_FALSE(backend::LoopsWideRows(k, SpreadOf(k), backend::CurrentTuning()));
    EXPECT_TRUE(backend::ChooseCudaRowLayout(k, SpreadOf(k), backend::CurrentTuning()).on_chip);
  }
}

}  // namespace
}  // namespace fusebox

namespace fusebox {
namespace {

// Rows past the persistent limit that are read more than once (softmax's
// three passes) and fit the L2 with one row per SM in flight: 1024 threads
// per block, one block per SM walking the rows, 16-byte loads, no spills;
// a single-pass sum keeps one row per block.
TEST(RowCodegenTest, LongReReadRowsWalkTheGridWithOneBlockPerSm) {
  // Two inputs held over 65536: past registers and shared memory.
  const backend::Kernel softmax = LowerLast([](auto& in) { return ManualSoftmax(in[0] * in[1]); },
                                            {randn({3, 65536}), randn({3, 65536})});
  ASSERT_TRUE(backend::UsesCudaRowLayout(softmax, SpreadOf(softmax)));
  const backend::CudaRowLayout layout = backend::ChooseCudaRowLayout(softmax, SpreadOf(softmax), backend::CurrentTuning());
  EXPECT_TRUE(layout.grid_stride);
  EXPECT_FALSE(layout.on_chip);
  EXPECT_EQ(backend::CudaBlockSize(softmax, SpreadOf(softmax), backend::CurrentTuning()), 1024);
  const Compiled c = CompileCuda(softmax);
  EXPECT_THAT(c.source, HasSubstr("r += gridDim.x"));
  EXPECT_GT(Count(c.summary.global_loads, 16), 0) << c.summary.ToString();
  EXPECT_EQ(c.summary.spill_store_bytes + c.summary.spill_load_bytes, 0) << c.summary.ToString();

  const backend::Kernel total = LowerLast([](auto& in) { return sum(in[0], -1); }, {randn({3, 65536})});
  EXPECT_FALSE(backend::ChooseCudaRowLayout(total, SpreadOf(total), backend::CurrentTuning()).grid_stride);
  // Rows over kCudaL2RowBytes would not stay in the L2 either.
  const backend::Kernel huge = LowerLast([](auto& in) { return ManualSoftmax(in[0]); }, {randn({2, 1 << 17})});
  EXPECT_FALSE(backend::ChooseCudaRowLayout(huge, SpreadOf(huge), backend::CurrentTuning()).grid_stride);
}

// Eviction hints (backend/cuda/cache_hints.h), in the PTX: a looped row that
// later passes re-read is kept (createpolicy evict_last, and evict-last in
// L1) until its last pass, which reads it evict-first in both; its stores
// and the rows of a kernel that reads them once (a persistent layer_norm)
// keep the default policy (level 1, the default).
TEST(RowCodegenTest, CacheHintsKeepReReadRowsUntilTheirLastPass) {
  ASSERT_EQ(backend::CudaCacheHintLevel(backend::CurrentTuning()), 1) << "FUSEBOX_TUNE_CACHE_HINTS is set";
  ASSERT_EQ(backend::CudaL1HintBits(backend::CurrentTuning()), 15) << "FUSEBOX_TUNE_L1_HINTS is set";
  const Compiled norm = CompileCuda(LowerLast(LayerNorm, {randn({64, 2048}), randn({2048}), randn({2048})}));
  EXPECT_THAT(norm.ptx, Not(HasSubstr("ld.global.cs")));
  EXPECT_THAT(norm.ptx, Not(HasSubstr("st.global.cs")));
  EXPECT_THAT(norm.ptx, Not(HasSubstr("cache_hint")));
  EXPECT_GT(Count(norm.summary.global_loads, 16), 0) << norm.summary.ToString();

  const Compiled looped = CompileCuda(LowerLast([](auto& in) { return ManualSoftmax(in[0] * in[1]); },
                                                {randn({3, 65536}), randn({3, 65536})}));
  EXPECT_THAT(looped.ptx, HasSubstr("createpolicy.fractional.L2::evict_last"));
  EXPECT_THAT(looped.ptx, HasSubstr("createpolicy.fractional.L2::evict_first"));
  EXPECT_THAT(looped.ptx, HasSubstr("ld.global.L1::evict_last.L2::cache_hint.v4"));
  EXPECT_THAT(looped.ptx, HasSubstr("ld.global.L1::evict_first.L2::cache_hint.v4"));  // the last of its three passes
  EXPECT_THAT(looped.ptx, Not(HasSubstr("ld.global.cs")));
  EXPECT_THAT(looped.ptx, Not(HasSubstr("st.global.cs")));
  EXPECT_EQ(looped.summary.spill_store_bytes + looped.summary.spill_load_bytes, 0) << looped.summary.ToString();
  EXPECT_GT(looped.summary.registers, 0) << "NVRTC log:\n" << looped.log;
  // The hinted loads are still counted as 16-byte loads (two inputs, three passes, two groups each).
  EXPECT_GE(Count(looped.summary.global_loads, 16), 6) << looped.summary.ToString();
}

// Rows read twice (an unweighted rms_norm: one pass, then the stores) up to
// kCudaTwoReadLoopLimit loop with 256 threads, the pass keeping the row for
// the stores' read; with a weight the rows loop one group per step
// (LoopsNormRows); rows read three times stay on chip below that rule.
TEST(RowCodegenTest, RowsReadTwiceLoopThroughTheL2) {
  const backend::Kernel rms = LowerLast([](auto& in) { return in[0] * rsqrt(mean(in[0] * in[0], -1, true) + 1e-6); },
                                        {randn({64, 4096})});
  EXPECT_TRUE(backend::LoopsReadingTwice(rms, SpreadOf(rms)));
  EXPECT_FALSE(backend::LoopsNormRows(rms, SpreadOf(rms), backend::CurrentTuning()));
  EXPECT_FALSE(backend::ChooseCudaRowLayout(rms, SpreadOf(rms), backend::CurrentTuning()).on_chip);
  EXPECT_EQ(backend::CudaBlockSize(rms, SpreadOf(rms), backend::CurrentTuning()), 256);
  const Compiled c = CompileCuda(rms);
  EXPECT_THAT(c.source, HasSubstr("looped (read twice, the second time from the L2)"));
  EXPECT_THAT(c.ptx, HasSubstr("ld.global.L1::evict_last.L2::cache_hint.v4"));
  ExpectVectorizedWithoutSpills(c, /*stores_rows=*/true);

  const backend::Kernel weighted = LowerLast(RmsNorm, {randn({64, 4096}), randn({4096})});
  EXPECT_TRUE(backend::LoopsReadingTwice(weighted, SpreadOf(weighted)));
  EXPECT_EQ(backend::CudaBlockSize(weighted, SpreadOf(weighted), backend::CurrentTuning()), backend::kCudaWideLoopThreads);
  const backend::Kernel long_rms = LowerLast(RmsNorm, {randn({64, 8192}), randn({8192})});
  EXPECT_FALSE(backend::LoopsReadingTwice(long_rms, SpreadOf(long_rms)));
  const backend::Kernel norm = LowerLast(LayerNorm, {randn({64, 2048}), randn({2048}), randn({2048})});
  EXPECT_FALSE(backend::LoopsReadingTwice(norm, SpreadOf(norm)));
  EXPECT_TRUE(backend::ChooseCudaRowLayout(norm, SpreadOf(norm), backend::CurrentTuning()).on_chip);
}

// Norm rows of 2049-4096 with a broadcast weight (LoopsNormRows) loop as
// Inductor's kernel for them: 512 threads, one 16-byte group per step,
// counted steps, __launch_bounds__(512, 4) (32 registers, no spills); the
// row is kept in L1 and the L2 for the later passes and read evict-first
// the last time, the weights kept, the stores unhinted.
TEST(RowCodegenTest, NormRowsLoopOneGroupPerStepWithL1Hints) {
  const backend::Kernel norm = LowerLast(LayerNorm, {randn({64, 4096}), randn({4096}), randn({4096})});
  ASSERT_TRUE(backend::LoopsNormRows(norm, SpreadOf(norm), backend::CurrentTuning()));
  EXPECT_FALSE(backend::LoopsWideRows(norm, SpreadOf(norm), backend::CurrentTuning()));
  const Compiled c = ExpectOneGroupLoop(norm);
  EXPECT_THAT(c.source, HasSubstr("fb_step < 2;"));  // counted: 4096 in two steps of 512 x 4
  EXPECT_THAT(c.source, Not(HasSubstr("if (jv < ")));  // the steps tile the row: no group guards
  EXPECT_THAT(c.ptx, HasSubstr(".minnctapersm 4"));
  // Two kept passes of two steps, and the weight and bias of the last pass.
  EXPECT_EQ(CountSubstr(c.ptx, "ld.global.L1::evict_last.L2::cache_hint.v4"), 8) << c.source;
  EXPECT_EQ(CountSubstr(c.ptx, "ld.global.L1::evict_first.L2::cache_hint.v4"), 2);
  EXPECT_THAT(c.ptx, Not(HasSubstr("st.global.cs")));
  ExpectVectorizedWithoutSpills(c, /*stores_rows=*/true);
  EXPECT_LE(c.summary.registers, 32) << c.summary.ToString();

  const backend::Kernel ln = LowerLast(LayerNorm, {randn({3, 3000}), randn({3000}), randn({3000})});
  EXPECT_TRUE(backend::LoopsNormRows(ln, SpreadOf(ln), backend::CurrentTuning()));
  Tensor x = randn({3, 2048}), w = randn({2048}), b = randn({2048});
  for (const backend::Kernel& k :
       {LowerLast(LayerNorm, {x, w, b}), LowerLast(LayerNorm, {randn({3, 8192}), randn({8192}), randn({8192})}),
        LowerLast([](auto& in) { return ManualSoftmax(in[0]); }, {randn({3, 4096})}),
        LowerLast(LayerNorm, {randn({3, 4095}), randn({4095}), randn({4095})})}) {  // 4095: scalar groups
    SCOPED_TRACE(k.ToString().substr(0, 120));
    EXPECT_FALSE(backend::LoopsNormRows(k, SpreadOf(k), backend::CurrentTuning()));
  }
}

}  // namespace
}  // namespace fusebox

namespace fusebox {
namespace {

// Rows gathered at a stored argmax, then normalized twice (layer_norm, then
// rms_norm or layer_norm over the last dim): the fuzzer found sources that
// named a temp of the gather's first pass in a later one. Every kernel's
// CUDA source compiles.
TEST(RowCodegenTest, GatheredRowsNormalizedTwiceCompile) {
  auto gathered = [](const std::vector<Tensor>& in) {
    Tensor g = gather(in[0], -2, argmax(in[0], -2, /*keepdim=*/true));  // [1, n]
    Tensor y = layer_norm(g, {1, in[0].size(1)}, in[1], Tensor(), 1e-5);
    return rms_norm(y, {in[0].size(1)});
  };
  auto selected = [](const std::vector<Tensor>& in) {
    Tensor y = layer_norm(in[0], {in[0].size(1), 1}, in[1], Tensor(), 1e-3);
    Tensor s = index_select(y, 2, argmax(y, 2).flatten());  // [1, n, n]
    return layer_norm(s, {in[0].size(1), in[0].size(1)}, Tensor(), Tensor(), 1e-5);
  };
  for (int64_t n : {int64_t{5}, int64_t{37}, int64_t{300}}) {
    SCOPED_TRACE(n);
    const std::vector<std::vector<backend::Kernel>> programs = {
        testing_backend::LowerAll(gathered, {randn({n, n}), randn({1, n})}),
        testing_backend::LowerAll(selected, {randn({1, n, 1}), randn({n, 1})})};
    for (const std::vector<backend::Kernel>& kernels : programs) {
      for (const backend::Kernel& k : kernels) {
        const std::string source = backend::PrintCuda(k, backend::CurrentTuning());
        auto out = cuda::CompileWithNvrtc(source, k.name, 90);
        EXPECT_TRUE(out.ok()) << out.status() << "\n" << source;
      }
    }
  }
}

}  // namespace
}  // namespace fusebox

namespace fusebox {
namespace {

// GPT-2's first layer norm: the token's row of wte plus the position's row of
// wpe (two gathers, each index computed once per row), normalized over 768 in
// bf16. Both gathered rows take one register slot each across the passes
// (lower_reduction.cc), loaded once per row in 16-byte vectors: the kernel's
// 16-byte loads are its four row operands (wte, wpe, weight, bias) times the
// three groups of 8 a lane holds.
TEST(RowCodegenTest, GatheredEmbeddingRowsAreReadOnceInSixteenBytes) {
  constexpr int64_t kVocab = 100, kT = 64, kC = 768;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 4 * kT; ++i) ids.push_back((i * 37) % kVocab);
  const DType bf16 = DType::kBFloat16;
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor x = embedding(in[0], in[1]) + embedding(arange(kT), in[2]);
    return layer_norm(x, {kC}, in[3], in[4], 1e-5);
  };
  const std::vector<backend::Kernel> kernels =
      testing_backend::LowerAll(fn, {Tensor::from_vector(ids, {4, kT}), randn({kVocab, kC}).to(bf16),
                                     randn({kT, kC}).to(bf16), randn({kC}).to(bf16), randn({kC}).to(bf16)});
  ASSERT_EQ(kernels.size(), 1u);
  const backend::Kernel& k = kernels[0];
  // Every load of a table, in every pass and the stores' loop, reads one
  // slot, whose index statements (the id and its check) come with it.
  std::map<int, std::set<int>> slots;  // table buffer: the slots its loads read
  for (size_t l = 0; l < k.NumRowLoops(); ++l) {
    for (const backend::Stmt& s : k.RowLoop(l)) {
      if (s.kind == backend::StmtKind::kLoad && s.index.HasTemp()) slots[s.buffer].insert(s.cache_slot);
    }
  }
  ASSERT_EQ(slots.size(), 2u) << k.ToString();
  for (const auto& [buffer, read] : slots) {
    ASSERT_EQ(read.size(), 1u) << "buffer " << buffer << "\n" << k.ToString();
    const int slot = *read.begin();
    ASSERT_GE(slot, 0) << k.ToString();
    EXPECT_FALSE(k.cached_loads[slot].index_defs.empty()) << k.ToString();
  }
  const Compiled c = CompileCuda(k);
  EXPECT_EQ(Count(c.summary.global_loads, 16), 4 * 3) << c.summary.ToString() << "\n" << c.source;
  EXPECT_EQ(c.summary.spill_store_bytes + c.summary.spill_load_bytes, 0) << c.summary.ToString();
}

}  // namespace
}  // namespace fusebox
