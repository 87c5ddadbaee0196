// Multi-pass CUDA reductions over outer dims (backend/cuda/outer_reduction.h)
// without a GPU: the layout each shape gets from the rules (held or reloaded
// columns, the cluster that fills the device, the device's SM count read from
// the kernel), that the schedule and launch geometry agree with it, and that
// NVRTC compiles every variant for sm_90 without spills.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

#include "backend/cuda/cuda_printer.h"
#include "backend/cuda/cuda_schedule.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/outer_reduction.h"
#include "backend/ptx_summary.h"
#include "backend/tuning.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/lower_for_test.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_backend::LowerOnly;
using testing_backend::SpreadOf;

Tensor SoftmaxDim0(const Tensor& x) {
  Tensor shifted = x - max(x, 0, /*keepdim=*/true);
  Tensor e = exp(shifted);
  return e / sum(e, 0, /*keepdim=*/true);
}

Tensor LayerNormDim1(const Tensor& x, const Tensor& w) {
  Tensor centered = x - mean(x, 1, /*keepdim=*/true);
  return centered * rsqrt(mean(centered * centered, 1, /*keepdim=*/true) + 1e-5) * w;
}

// Compiles the kernel's CUDA source; no spills, at most 64 registers (1024
// threads a block), and the launch bounds of its layout.
void ExpectCompiles(const backend::Kernel& k, const backend::CudaOuterLayout& l) {
  const std::string source = backend::PrintCuda(k, backend::CurrentTuning());
  auto out = cuda::CompileWithNvrtc(source, k.name, 90);
  ASSERT_TRUE(out.ok()) << out.status() << "\n" << source;
  const PtxSummary summary = backend::SummarizePtx(out->ptx, out->log);
  EXPECT_EQ(summary.spill_store_bytes + summary.spill_load_bytes, 0) << summary.ToString();
  EXPECT_LE(summary.registers, 65536 / l.threads()) << summary.ToString();
  EXPECT_THAT(out->ptx, HasSubstr(absl::StrCat(".maxntid ", l.threads())));
}

TEST(OuterReductionTest, FewLongColumnsAreHeldOverAClusterThatFillsTheDevice) {
  backend::ScopedTuning one_kernel({{backend::Knob::kOuterSplit, 0}});  // the rule splits these (below)
  // 1023 columns of 16411 f32: 16 columns a warp row would need 33 values a
  // thread over 8 blocks, so warps of 8 columns (half that) x 4 lanes, 32
  // warps x 8 blocks per column group hold 17 values each.
  const backend::Kernel k = LowerOnly([](auto& in) { return SoftmaxDim0(in[0]); }, {randn({16411, 1023})});
  ASSERT_EQ(SpreadOf(k).strategy, backend::RowStrategy::kThreadPerRow);
  ASSERT_EQ(k.passes.size(), 2u);
  const auto l = backend::ChooseCudaOuterLayout(k, SpreadOf(k), backend::CurrentTuning());
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(*l, (backend::CudaOuterLayout{.columns = 8, .warps = 32, .groups = 1, .blocks = 8, .slots = 17}));
  const backend::CudaSchedule s = backend::ChooseCudaSchedule(k, backend::CurrentTuning());
  EXPECT_EQ(s.kind, backend::CudaScheduleKind::kOuterTiles);
  EXPECT_EQ(s.block, 1024);
  EXPECT_EQ(s.Grid(k.num_rows, 132), 128 * 8) << "128 tiles x 8 blocks";
  const std::string source = backend::PrintCuda(k, backend::CurrentTuning());
  EXPECT_THAT(source, HasSubstr("__cluster_dims__(8, 1, 1)"));
  EXPECT_THAT(source, HasSubstr("float c0[17];"));
  EXPECT_THAT(source, HasSubstr("fb_outer_reduce<8, 32, 8>("));
  ExpectCompiles(k, *l);
}

// Knob::kOuterSplit's rule (row_spread.cc): a launch per pass where the
// held layout's grid takes more than one wave and its cluster has at least
// as many blocks as the widest element has bytes.
TEST(OuterReductionTest, ColumnsHeldOverLargeClustersSplitIntoALaunchPerPass) {
  // A launch per pass: f32 softmax would fold its sum into the max's
  // (online_exp_sums.h; kernel_passes_test.cc).
  backend::ScopedTuning two_pass({{backend::Knob::kOnlineExpSums, 0}});
  auto schedule = [](const Shape& shape, DType dtype) {
    const backend::Kernel k = LowerOnly([](auto& in) { return SoftmaxDim0(in[0]); }, {randn(shape).to(dtype)});
    return std::make_pair(k, backend::ChooseCudaSchedule(k, backend::CurrentTuning()));
  };
  // 16411 rows: 8 blocks hold a column, 1024 blocks in all.
  const auto [tall, split] = schedule({16411, 1023}, DType::kFloat32);
  EXPECT_EQ(split.kind, backend::CudaScheduleKind::kThreadPerRow);
  EXPECT_EQ(split.spread.split, 121) << "chunks of 136 rows, 512 blocks aimed at";
  EXPECT_EQ(split.partial_launches, 2);
  EXPECT_EQ(split.Grid(tall.num_rows, 132), 4 * 121);
  EXPECT_EQ(split.combine_grid, 4 * 121) << "the stores run over the same chunks";
  const std::string source = backend::PrintCuda(tall, split, backend::CurrentTuning());
  EXPECT_THAT(source, HasSubstr(" " + tall.name + "_partial("));
  EXPECT_THAT(source, HasSubstr(" " + tall.name + "_partial1("));
  EXPECT_THAT(source, Not(HasSubstr(" " + tall.name + "_partial2(")));
  auto out = cuda::CompileWithNvrtc(source, tall.name, 90);
  ASSERT_TRUE(out.ok()) << out.status() << "\n" << source;
  // 1031 rows: 2 blocks hold a column; f32 keeps the one kernel where the
  // split takes two launches before the stores, bf16 splits.
  EXPECT_EQ(schedule({1031, 16273}, DType::kFloat32).second.kind, backend::CudaScheduleKind::kOuterTiles);
  EXPECT_EQ(schedule({1031, 16273}, DType::kBFloat16).second.partial_launches, 2);
  // One wave of the held grid: the launches would dominate.
  EXPECT_EQ(schedule({1031, 129}, DType::kBFloat16).second.kind, backend::CudaScheduleKind::kOuterTiles);
  {
    backend::ScopedTuning never({{backend::Knob::kOuterSplit, 0}});
    EXPECT_EQ(schedule({16411, 1023}, DType::kFloat32).second.kind, backend::CudaScheduleKind::kOuterTiles);
  }
  backend::ScopedTuning always({{backend::Knob::kOuterSplit, 2}});
  EXPECT_EQ(schedule({1031, 129}, DType::kFloat32).second.partial_launches, 2);
}

// The rule's second clause: a split of one launch before the stores (exp
// sums folded online, or one pass) takes 2-block f32 clusters too, where
// neighbouring columns sit at neighbouring addresses (over dim 0, not a
// middle dim, whose loads split the column index).
TEST(OuterReductionTest, OneLaunchSplitsTakeTwoBlockClustersOfDenseColumns) {
  auto kind = [](auto fn, const std::vector<Tensor>& in) {
    const backend::Kernel k = LowerOnly(fn, in);
    return backend::ChooseCudaSchedule(k, backend::CurrentTuning()).kind;
  };
  const auto softmax = [](auto& in) { return SoftmaxDim0(in[0]); };
  const auto rms = [](auto& in) { return in[0] * rsqrt(mean(in[0] * in[0], 0, /*keepdim=*/true) + 1e-6) * in[1]; };
  const auto layer_norm = [](auto& in) {
    Tensor centered = in[0] - mean(in[0], 0, /*keepdim=*/true);
    return centered * rsqrt(mean(centered * centered, 0, /*keepdim=*/true) + 1e-5) * in[1];
  };
  const auto middle_softmax = [](auto& in) {
    Tensor e = exp(in[0] - max(in[0], 1, /*keepdim=*/true));
    return e / sum(e, 1, /*keepdim=*/true);
  };
  const auto split = backend::CudaScheduleKind::kThreadPerRow, held = backend::CudaScheduleKind::kOuterTiles;
  EXPECT_EQ(kind(softmax, {randn({1031, 16273})}), split);
  EXPECT_EQ(kind(rms, {randn({1031, 16273}), randn({1031, 1})}), split);
  EXPECT_EQ(kind(layer_norm, {randn({1031, 16273}), randn({1031, 1})}), held) << "two launches before the stores";
  EXPECT_EQ(kind(middle_softmax, {randn({33, 1031, 493})}), held) << "the column index splits";
  backend::ScopedTuning two_pass({{backend::Knob::kOnlineExpSums, 0}});
  EXPECT_EQ(kind(softmax, {randn({1031, 16273})}), held);
}

// Knob::kColumnLanes: split columns of several passes take that many
// threads per column in a block (256 / lanes columns), their folds combined
// in shared memory; the partials and chunks stay as they were. By the rule
// (0), 4 where the exp sums fold online (softmax), 1 elsewhere (norms).
TEST(OuterReductionTest, ColumnLanesShareEachChunkOfASplitColumn) {
  const backend::Kernel softmax = LowerOnly([](auto& in) { return SoftmaxDim0(in[0]); }, {randn({16411, 1023})});
  const backend::Kernel norm =
      LowerOnly([](auto& in) { return LayerNormDim1(in[0], in[1]); }, {randn({33, 16411, 31}), randn({1, 16411, 1})});
  EXPECT_EQ(backend::ChooseCudaSchedule(softmax, backend::CurrentTuning()).spread.column_lanes,
            backend::kCudaOnlineColumnLanes);
  EXPECT_EQ(backend::ChooseCudaSchedule(norm, backend::CurrentTuning()).spread.column_lanes, 1);
  {
    backend::ScopedTuning two_pass({{backend::Knob::kOnlineExpSums, 0}});
    EXPECT_EQ(backend::ChooseCudaSchedule(softmax, backend::CurrentTuning()).spread.column_lanes, 1);
  }
  backend::ScopedTuning lanes({{backend::Knob::kColumnLanes, 4}});
  for (const backend::Kernel* k : {&softmax, &norm}) {
    SCOPED_TRACE(k->name);
    const backend::CudaSchedule s = backend::ChooseCudaSchedule(*k, backend::CurrentTuning());
    ASSERT_EQ(s.kind, backend::CudaScheduleKind::kThreadPerRow);
    EXPECT_EQ(s.spread.column_lanes, 4);
    EXPECT_EQ(s.spread.split, 121) << "the same chunks";
    EXPECT_EQ(s.block, 256);
    EXPECT_EQ(s.Grid(k->num_rows, 132), 16 * 121) << "64 columns a block";
    EXPECT_EQ(s.combine_grid, 16 * 121);
    EXPECT_THAT(s.ToString(), HasSubstr("4 lanes per column"));
    const std::string source = backend::PrintCuda(*k, s, backend::CurrentTuning());
    EXPECT_THAT(source, HasSubstr("[3][64];"));
    EXPECT_THAT(source, HasSubstr("__syncthreads();"));
    EXPECT_THAT(source, HasSubstr("fb_lane == 0"));
    // Later launches fold a quarter of the partials per lane, then share them.
    EXPECT_THAT(source, HasSubstr("for (int p = fb_lane; p < 121; p += 4)"));
    EXPECT_THAT(source, HasSubstr("__shared__ float fb_totals0[4][64];"));
    auto out = cuda::CompileWithNvrtc(source, k->name, 90);
    ASSERT_TRUE(out.ok()) << out.status() << "\n" << source;
    const PtxSummary summary = backend::SummarizePtx(out->ptx, out->log);
    EXPECT_EQ(summary.spill_store_bytes + summary.spill_load_bytes, 0) << summary.ToString();
  }
  // Single-pass column sums keep a thread per column (tiles or not).
  const backend::Kernel sum = LowerOnly([](auto& in) { return fusebox::sum(in[0], 0); }, {randn({16411, 1023})});
  EXPECT_EQ(backend::ChooseCudaRowSpread(sum, backend::CurrentTuning()).column_lanes, 1);
}

TEST(OuterReductionTest, ManyColumnsNeedNoCluster) {
  // 16273 columns: 1018 tiles of 16 fill the device alone; 515 rows over 64
  // lanes leave 9 values a thread.
  const backend::Kernel k = LowerOnly([](auto& in) { return SoftmaxDim0(in[0]); }, {randn({515, 16273})});
  const auto l = backend::ChooseCudaOuterLayout(k, SpreadOf(k), backend::CurrentTuning());
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(*l, (backend::CudaOuterLayout{.columns = 16, .warps = 32, .groups = 1, .blocks = 1, .slots = 9}));
  EXPECT_THAT(backend::PrintCuda(k, backend::CurrentTuning()), Not(HasSubstr("__cluster_dims__")));
  ExpectCompiles(k, *l);
}

TEST(OuterReductionTest, ShortColumnsCombineInTheWarp) {
  // 31 rows: a warp's 2 lanes (16 f32 columns) hold 16 values each and
  // combine by shuffles alone; 8 column groups make a 256-thread block.
  const backend::Kernel k = LowerOnly([](auto& in) { return SoftmaxDim0(in[0]); }, {randn({31, 45399})});
  const auto l = backend::ChooseCudaOuterLayout(k, SpreadOf(k), backend::CurrentTuning());
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(*l, (backend::CudaOuterLayout{.columns = 16, .warps = 1, .groups = 8, .blocks = 1, .slots = 16}));
  const std::string source = backend::PrintCuda(k, backend::CurrentTuning());
  EXPECT_THAT(source, Not(HasSubstr("__shared__ float fb_"))) << "no shared memory of its own";
  ExpectCompiles(k, *l);
}

TEST(OuterReductionTest, SixteenBitColumnsTakeASectorOrHalfOneToBeHeld) {
  backend::ScopedTuning one_kernel({{backend::Knob::kOuterSplit, 0}});
  const backend::Kernel k =
      LowerOnly([](auto& in) { return SoftmaxDim0(in[0]); }, {randn({4099, 1023}).to(DType::kBFloat16)});
  const auto l = backend::ChooseCudaOuterLayout(k, SpreadOf(k), backend::CurrentTuning());
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->columns, 16) << "32 bytes of bf16";
  ExpectCompiles(k, *l);
  // 16411 rows do not fit 64 lanes x 8 blocks (33 values each): warps of 8
  // columns, 128 lanes a block, hold 17.
  const backend::Kernel tall =
      LowerOnly([](auto& in) { return SoftmaxDim0(in[0]); }, {randn({16411, 1023}).to(DType::kBFloat16)});
  const auto t = backend::ChooseCudaOuterLayout(tall, SpreadOf(tall), backend::CurrentTuning());
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(*t, (backend::CudaOuterLayout{.columns = 8, .warps = 32, .groups = 1, .blocks = 8, .slots = 17}));
  ExpectCompiles(tall, *t);
}

TEST(OuterReductionTest, AMiddleDimWithWeightsHoldsOnlyWhatSeveralPassesRead) {
  // layer_norm over dim 1 of [5, 3001, 37]: x is read by three loops (held),
  // the weight by the last only (a load).
  const backend::Kernel k =
      LowerOnly([](auto& in) { return LayerNormDim1(in[0], in[1]); }, {randn({5, 3001, 37}), randn({1, 3001, 1})});
  const auto l = backend::ChooseCudaOuterLayout(k, SpreadOf(k), backend::CurrentTuning());
  ASSERT_TRUE(l.has_value());
  EXPECT_GT(l->slots, 0);
  const std::string source = backend::PrintCuda(k, backend::CurrentTuning());
  EXPECT_THAT(source, HasSubstr(absl::StrCat("float c0[", l->slots, "];")));
  EXPECT_THAT(source, Not(HasSubstr("float c1[")));
  ExpectCompiles(k, *l);
}

TEST(OuterReductionTest, ColumnsTooLongToHoldReloadEachPass) {
  const backend::Kernel k = LowerOnly([](auto& in) { return SoftmaxDim0(in[0]); }, {randn({70001, 40})});
  const auto l = backend::ChooseCudaOuterLayout(k, SpreadOf(k), backend::CurrentTuning());
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->slots, 0);
  EXPECT_EQ(l->blocks, 8) << "5 tiles: the cluster grows to fill the device";
  EXPECT_THAT(backend::PrintCuda(k, backend::CurrentTuning()), HasSubstr("each pass reloading"));
  ExpectCompiles(k, *l);
}

TEST(OuterReductionTest, TheClusterFollowsTheDevicesSmCount) {
  backend::ScopedTuning held({{backend::Knob::kOuterSplit, 0}});  // 16 SMs: the rule would split
  backend::Kernel k = LowerOnly([](auto& in) { return SoftmaxDim0(in[0]); }, {randn({1031, 255})});
  k.cuda_sm_count = 132;
  const auto big = backend::ChooseCudaOuterLayout(k, SpreadOf(k), backend::CurrentTuning());
  k.cuda_sm_count = 16;
  const auto small = backend::ChooseCudaOuterLayout(k, SpreadOf(k), backend::CurrentTuning());
  ASSERT_TRUE(big.has_value() && small.has_value());
  EXPECT_GT(big->blocks, small->blocks);
  k.cuda_arch = 80;  // no clusters before sm_90
  EXPECT_EQ(backend::ChooseCudaOuterLayout(k, SpreadOf(k), backend::CurrentTuning())->blocks, 1);
}

TEST(OuterReductionTest, SinglePassSumsAndArgmaxKeepTheirLayouts) {
  const backend::Kernel sums = LowerOnly([](auto& in) { return sum(in[0], 0); }, {randn({4099, 1023})});
  EXPECT_FALSE(backend::ChooseCudaOuterLayout(sums, SpreadOf(sums), backend::CurrentTuning()).has_value());
  const backend::Kernel arg = LowerOnly([](auto& in) { return argmax(in[0], 0); }, {randn({4099, 1023})});
  EXPECT_FALSE(backend::ChooseCudaOuterLayout(arg, SpreadOf(arg), backend::CurrentTuning()).has_value());
}

}  // namespace
}  // namespace fusebox
