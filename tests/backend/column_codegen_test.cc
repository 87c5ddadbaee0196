// CUDA column reductions (sum(x, 0)) without a GPU: which ones read 2-D tiles
// of 4 adjacent columns (backend/cuda/column_tiles.h) and which keep a thread
// per column, their launch geometry, and the PTX NVRTC makes of the tiles:
// streamed 16-byte loads, no spills, a combine that waits for the partial
// kernel's grid. Numerics on the GPU: tests/frontend/reductions_test.cc.
#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "backend/cuda/column_tiles.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/cuda/cuda_schedule.h"
#include "backend/cuda/nvrtc.h"
#include "backend/ptx_summary.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/lower_for_test.h"
#include "tests/test_util.h"

namespace fusebox {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_backend::LowerOnly;
using testing_backend::SpreadOf;

// PrintCuda, also written to $FUSEBOX_TEST_SOURCE_DIR/<name>_<rows>x<columns>.cu
// where that is set (to compare the printer's output across a refactor).
std::string Print(const backend::Kernel& k) {
  std::string source = backend::PrintCuda(k, backend::CurrentTuning());
  if (const char* dir = std::getenv("FUSEBOX_TEST_SOURCE_DIR")) {
    std::ofstream(absl::StrCat(dir, "/", k.name, "_", k.row_length, "x", k.num_rows, ".cu")) << source;
  }
  return source;
}

using test_util::CountSubstr;

TEST(ColumnCodegenTest, ColumnSumsReadTilesOfFourColumns) {
  // 1000 columns: 16 strips of 64, the last one partly past the end.
  const backend::Kernel k = LowerOnly([](auto& in) { return sum(in[0], 0); }, {randn({8192, 1000})});
  ASSERT_TRUE(backend::UsesCudaColumnTiles(SpreadOf(k)));
  EXPECT_EQ(SpreadOf(k).split, 32) << "groups of 256 rows";
  EXPECT_EQ(backend::CudaSplitChunk(k, SpreadOf(k), backend::CurrentTuning()), 256);
  EXPECT_EQ(backend::ChooseCudaSchedule(k, backend::CurrentTuning()).Grid(k.num_rows, 132), 16 * 32) << "64-column strips x groups";
  EXPECT_EQ(backend::CudaPartialBlockSize(k, SpreadOf(k), backend::CurrentTuning()), 1024);
  EXPECT_EQ(backend::CudaBlockSize(k, SpreadOf(k), backend::CurrentTuning()), 256) << "the combine's, a thread per column";
  EXPECT_EQ(backend::CudaCombineGridSize(k, SpreadOf(k)), 4);
  const std::string source = Print(k);
  EXPECT_THAT(source, HasSubstr("red_sum_0_tile<true>("));
  EXPECT_THAT(source, HasSubstr("red_sum_0_tile<false>("));
  EXPECT_THAT(source, HasSubstr("if (fb_r0 < 1000)"));
  EXPECT_THAT(source, Not(HasSubstr("if (j < "))) << "8192 rows are whole groups";
  EXPECT_THAT(source, HasSubstr("fb_part0[part * 1000 + fb_r0 + e] = fb_acc0[e]"));  // the combine's layout
  auto out = cuda::CompileWithNvrtc(source, k.name, 90);
  ASSERT_TRUE(out.ok()) << out.status() << "\n" << source;
  const PtxSummary summary = backend::SummarizePtx(out->ptx, out->log);
  // The aligned path's 4 rows per thread are 4 streamed 16-byte loads.
  EXPECT_EQ(CountSubstr(out->ptx, "ld.global.cs.v4.u32"), 4) << summary.ToString();
  EXPECT_EQ(summary.spill_store_bytes + summary.spill_load_bytes, 0) << summary.ToString();
  EXPECT_GT(summary.registers, 0) << out->log;
  EXPECT_LE(summary.registers, 64) << "1024 threads per block";
  EXPECT_EQ(CountSubstr(out->ptx, "griddepcontrol.wait"), 1) << "the combine waits for the partial grid";
  EXPECT_THAT(out->ptx, HasSubstr(".maxntid 1024"));
}

TEST(ColumnCodegenTest, LongColumnsLoopTileStepsInAtMost64Groups) {
  // 20000 rows: 79 steps of 256, two per group, 40 groups, the last ragged.
  const backend::Kernel k = LowerOnly([](auto& in) { return sum(in[0] * in[0], 0); }, {randn({20000, 256})});
  ASSERT_TRUE(backend::UsesCudaColumnTiles(SpreadOf(k)));
  EXPECT_EQ(backend::CudaColumnTileStepsPerGroup(k), 2);
  EXPECT_EQ(SpreadOf(k).split, 40);
  EXPECT_EQ(backend::CudaSplitChunk(k, SpreadOf(k), backend::CurrentTuning()), 512);
  EXPECT_LE(SpreadOf(k).split, backend::kCudaColumnTileMaxGroups);
  const std::string source = Print(k);
  EXPECT_THAT(source, HasSubstr("for (int s = 0; s < 2; ++s)"));
  EXPECT_THAT(source, HasSubstr("if (j < 20000)"));
  EXPECT_THAT(source, Not(HasSubstr("if (fb_r0 < "))) << "256 columns are whole strips";
  auto out = cuda::CompileWithNvrtc(source, k.name, 90);
  ASSERT_TRUE(out.ok()) << out.status() << "\n" << source;
  EXPECT_GE(CountSubstr(out->ptx, "ld.global.cs.v4.u32"), 4);

  // Two operands, one broadcast over the columns (a per-row scale): the
  // matrix moves in 16-byte loads, the scale in one scalar load per row.
  const backend::Kernel scaled = LowerOnly([](auto& in) { return sum(in[0] * in[1], 0); },
                                           {randn({4096, 512}), randn({4096, 1})});
  ASSERT_TRUE(backend::UsesCudaColumnTiles(SpreadOf(scaled)));
  auto scaled_out = cuda::CompileWithNvrtc(Print(scaled), scaled.name, 90);
  ASSERT_TRUE(scaled_out.ok()) << scaled_out.status();
  EXPECT_EQ(CountSubstr(scaled_out->ptx, "ld.global.cs.v4.u32"), 4);

  // Two accumulators (sum and amax), each with its own shared fold; ragged
  // columns (100) and rows (3000).
  const backend::Kernel two = LowerOnly([](auto& in) { return sum(in[0], 0) + amax(in[0], {0}); }, {randn({3000, 100})});
  ASSERT_TRUE(backend::UsesCudaColumnTiles(SpreadOf(two)));
  const std::string two_source = Print(two);
  EXPECT_THAT(two_source, HasSubstr("fb_fold1["));
  EXPECT_THAT(two_source, HasSubstr("if (fb_r0 < 100)"));
  EXPECT_THAT(two_source, HasSubstr("if (j < 3000)"));
  auto two_out = cuda::CompileWithNvrtc(two_source, two.name, 90);
  ASSERT_TRUE(two_out.ok()) << two_out.status() << "\n" << two_source;
  const PtxSummary two_summary = backend::SummarizePtx(two_out->ptx, two_out->log);
  EXPECT_EQ(two_summary.spill_store_bytes + two_summary.spill_load_bytes, 0) << two_summary.ToString();
}

TEST(ColumnCodegenTest, ColumnReductionsThatKeepAThreadPerColumn) {
  struct Case {
    const char* what;
    backend::Kernel kernel;
  };
  const Case cases[] = {
      // No access is a run of 4 columns starting at a multiple of 4.
      {"1002 columns", LowerOnly([](auto& in) { return sum(in[0], 0); }, {randn({8192, 1002})})},
      // argmax carries indices through its partials.
      {"argmax", LowerOnly([](auto& in) { return argmax(in[0], 0); }, {randn({8192, 1000})})},
      // 2-byte elements: 4 columns are 8 bytes.
      {"bf16", LowerOnly([](auto& in) { return sum(in[0], 0); }, {randn({8192, 1000}).to(DType::kBFloat16)})},
      // The reduced dim in the middle: columns unravel with / and %.
      {"middle dim", LowerOnly([](auto& in) { return sum(in[0], 1); }, {randn({4, 2000, 300})})},
      // Under a tile's 64 columns.
      {"32 columns", LowerOnly([](auto& in) { return sum(in[0], 0); }, {randn({8192, 32})})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_GT(SpreadOf(c.kernel).split, 1);
    EXPECT_FALSE(backend::UsesCudaColumnTiles(SpreadOf(c.kernel)));
    EXPECT_EQ(backend::CudaPartialBlockSize(c.kernel, SpreadOf(c.kernel), backend::CurrentTuning()), 256);
    const std::string source = Print(c.kernel);
    EXPECT_THAT(source, Not(HasSubstr("_tile<")));
    EXPECT_THAT(source, HasSubstr("griddepcontrol.wait")) << "every split's combine is a programmatic dependent";
    EXPECT_TRUE(cuda::CompileWithNvrtc(source, c.kernel.name, 90).ok());
  }
  // Columns of under two groups (511 rows) are not split into tiles.
  const backend::Kernel short_cols = LowerOnly([](auto& in) { return sum(in[0], 0); }, {randn({511, 4096})});
  EXPECT_FALSE(backend::UsesCudaColumnTiles(SpreadOf(short_cols)));
}

}  // namespace
}  // namespace fusebox
