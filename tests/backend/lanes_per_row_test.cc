// Warp rows of L lanes (CudaLanesPerRow, backend/cuda/row_layout.h) without a
// GPU: the rule's lane counts, the launch the schedule asks for, and for
// every L in {1, ..., 32} the kernels of sum, max, argmax, softmax,
// log_softmax, layer_norm and rms_norm, f32 and bf16, compiled by NVRTC for
// sm_90, with log2(L) shuffles per accumulator and no spills.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/cuda/cuda_schedule.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/row_layout.h"
#include "backend/ptx_summary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/lower_for_test.h"

namespace fusebox {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_backend::SpreadOf;

TEST(LanesPerRowTest, TheRuleGivesEachLaneFourElementsOrAGroup) {
  struct Case {
    int64_t length;
    int vector_width;
    int lanes;
  };
  const std::vector<Case> cases = {
      {1, 1, 1},    {3, 1, 1},    {7, 1, 1},    {8, 1, 2},    {8, 4, 2},    {8, 8, 1},     {16, 4, 4},
      {16, 8, 2},   {17, 1, 4},   {37, 1, 8},   {63, 1, 8},   {64, 4, 16},  {64, 8, 8},    {100, 4, 16},
      {127, 1, 16}, {128, 1, 32}, {128, 4, 32}, {128, 8, 16}, {256, 8, 32}, {1024, 4, 32}, {453439, 1, 32},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(backend::CudaLanesPerRow(c.length, c.vector_width, 4), c.lanes) << c.length << " in groups of " << c.vector_width;
  }
  // The knob's other ends: a lane per element keeps the warp from 32 on,
  // 128 elements per lane a thread per row below 256.
  EXPECT_EQ(backend::CudaLanesPerRow(37, 1, 1), 32);
  EXPECT_EQ(backend::CudaLanesPerRow(31, 1, 1), 16);
  EXPECT_EQ(backend::CudaLanesPerRow(255, 1, 128), 1);
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
struct Op {
  std::string name;
  Fn fn;
  int shuffles_per_step;  // 32-bit shuffles per combine step over all accumulators
};

const std::vector<Op>& Ops() {
  static const std::vector<Op>* ops = new std::vector<Op>{
      {"sum", [](auto& in) { return sum(in[0], -1); }, 1},
      {"max", [](auto& in) { return max(in[0], -1); }, 1},
      {"argmax", [](auto& in) { return argmax(in[0], -1); }, 3},  // the value and a 64-bit index
      {"softmax", [](auto& in) { return softmax(in[0], -1); }, 2},
      {"log_softmax", [](auto& in) { return log_softmax(in[0], -1); }, 2},
      {"layer_norm", [](auto& in) { return layer_norm(in[0], {in[0].shape().back()}, in[1], in[2], 1e-5); }, 2},
      {"rms_norm", [](auto& in) { return rms_norm(in[0], {in[0].shape().back()}, in[1], 1e-6); }, 1},
  };
  return *ops;
}

int Log2(int lanes) {
  int bits = 0;
  while ((1 << bits) < lanes) ++bits;
  return bits;
}

// Row lengths that take each L (f32 and bf16 alike), 1001 rows: the last
// block and, for L < 32, the last warp hold rows past the end.
TEST(LanesPerRowTest, KernelsOfEveryLaneCountCompileWithLog2LShuffles) {
  struct Length {
    int64_t length;
    int lanes;
  };
  const std::vector<Length> lengths = {{3, 1}, {12, 2}, {17, 4}, {37, 8}, {100, 16}, {256, 32}};
  const int64_t rows = 1001;
  // Groups as the rows divide them: aligned groups (Knob::kAlignedRowGroups,
  // row_codegen_test.cc) give odd row sums wider groups, so fewer lanes.
  backend::ScopedTuning divided({{backend::Knob::kAlignedRowGroups, 0}});
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (const auto& [length, lanes] : lengths) {
      for (const Op& op : Ops()) {
        if (dtype == DType::kBFloat16 && op.name != "argmax" && op.name != "layer_norm" && op.name != "softmax") continue;
        SCOPED_TRACE(absl::StrCat(op.name, " ", DTypeName(dtype), "[", rows, ", ", length, "]"));
        const std::vector<Tensor> in = {randn({rows, length}).to(dtype), randn({length}).to(dtype),
                                        randn({length}).to(dtype)};
        const backend::Kernel k = testing_backend::LowerAll(op.fn, in).back();
        ASSERT_EQ(SpreadOf(k).strategy, backend::RowStrategy::kWarpPerRow);
        EXPECT_EQ(k.kind, fusion::KernelKind::kPersistent);
        const backend::TuningSnapshot& tuning = backend::CurrentTuning();
        const backend::CudaRowLayout layout = backend::ChooseCudaRowLayout(k, SpreadOf(k), tuning);
        EXPECT_EQ(layout.threads_per_row, lanes);
        EXPECT_TRUE(layout.on_chip);
        // A block of 8 warps for L < 32, each 32 / L rows; the launch covers every row once.
        const int rows_per_block = lanes == 32 ? backend::kCudaWarpRowsPerBlock : backend::kCudaShortRowWarps * 32 / lanes;
        EXPECT_EQ(layout.rows_per_block, rows_per_block);
        EXPECT_EQ(layout.block_size, lanes == 32 ? 32 * backend::kCudaWarpRowsPerBlock : 32 * backend::kCudaShortRowWarps);
        const backend::CudaSchedule s = backend::ChooseCudaSchedule(k, tuning);
        EXPECT_EQ(s.block, layout.block_size);
        EXPECT_EQ(s.Grid(rows, 132), (rows + rows_per_block - 1) / rows_per_block);

        const std::string source = backend::PrintCuda(k, tuning);
        const std::string body = source.substr(source.find("\n// " + k.name));
        if (lanes == 1) {
          EXPECT_THAT(body, HasSubstr("const int fb_lane = 0;"));
          EXPECT_THAT(body, Not(HasSubstr("reduce")));  // a thread per row: no shuffles
        } else if (lanes < 32) {
          EXPECT_THAT(body, HasSubstr(absl::StrCat("(threadIdx.x >> ", Log2(lanes), ")")));
          EXPECT_THAT(body, HasSubstr(absl::StrCat("<< (threadIdx.x & ", 32 - lanes, ")")));  // the row's own lanes
          EXPECT_THAT(body, HasSubstr(absl::StrCat(op.name == "argmax" ? "fb_lanes_argreduce<" : "fb_lanes_reduce<", lanes,
                                                   ">")));
          EXPECT_THAT(body, Not(HasSubstr("0xffffffff")));  // never the whole warp's mask
          if (!k.row_body.empty()) EXPECT_THAT(body, HasSubstr("if (fb_lane == 0)"));  // per-row stores
        } else {
          EXPECT_THAT(body, HasSubstr(op.name == "argmax" ? "fb_warp_argreduce(" : "fb_warp_reduce("));
        }
        auto out = cuda::CompileWithNvrtc(source, k.name, 90);
        ASSERT_TRUE(out.ok()) << out.status() << "\n" << source;
        const PtxSummary summary = backend::SummarizePtx(out->ptx, out->log);
        // Rows held on chip with vectorized accesses are two instances (fb_vec).
        const int instances = source.find("_rows<true>") != std::string::npos ? 2 : 1;
        EXPECT_EQ(summary.shfl_sync, int64_t{instances} * Log2(lanes) * op.shuffles_per_step) << summary.ToString();
        EXPECT_EQ(summary.spill_store_bytes + summary.spill_load_bytes, 0) << summary.ToString();
      }
    }
  }
}

}  // namespace
}  // namespace fusebox
