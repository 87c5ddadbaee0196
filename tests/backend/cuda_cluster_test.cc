// Rows too long for one block, held on chip by a thread-block cluster
// (backend/cuda/cuda_cluster.h): the layout per kernel kind and arch, and the
// generated source compiled by NVRTC for sm_90 without spills (no GPU needed).
#include "backend/cuda/cuda_cluster.h"

#include "backend/cuda/cuda_printer.h"
#include "backend/cuda/cuda_schedule.h"
#include "backend/cuda/nvrtc.h"
#include "backend/ptx_summary.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/lower_for_test.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers
using testing_backend::LowerOnly;
using testing_backend::SpreadOf;

// Clusters for every looped row (Knob::kClusters 2; the rule takes them
// only where the rows are fewer than the SMs).
backend::TuningSnapshot WithClusters() {
  backend::TuningSnapshot t = backend::CurrentTuning();
  t.Set(backend::Knob::kClusters, 2);
  return t;
}

// The kernel with the schedule an sm_90 device gets with clusters on,
// printed and compiled.
struct Compiled {
  backend::Kernel kernel;
  backend::CudaSchedule schedule;
  backend::ClusterLayout cluster;  // the schedule's
  std::string source;
  PtxSummary summary;
  std::string ptx;
};
Compiled CompileForSm90(backend::Kernel k) {
  k.cuda_arch = 90;
  const backend::TuningSnapshot tuning = WithClusters();
  const backend::CudaSchedule s = backend::ChooseCudaSchedule(k, tuning);
  Compiled c{.kernel = k, .schedule = s, .cluster = s.cluster, .source = backend::PrintCuda(k, s, tuning)};
  auto out = cuda::CompileWithNvrtc(c.source, k.name, 90);
  EXPECT_TRUE(out.ok()) << out.status() << "\n" << c.source;
  if (out.ok()) {
    c.summary = backend::SummarizePtx(out->ptx, out->log);
    c.ptx = out->ptx;
  }
  return c;
}

TEST(CudaClusterTest, SoftmaxOver65536SpreadsEachRowOverEightBlocksWithoutSpills) {
  backend::Kernel k = LowerOnly([](auto& in) { return ManualSoftmax(in[0]); }, {randn({3, 65536})});
  EXPECT_EQ(k.kind, fusion::KernelKind::kReduction);
  EXPECT_EQ(k.name.rfind("red_", 0), 0u) << k.name;  // the plan's name stays
  const Compiled c = CompileForSm90(k);
  EXPECT_EQ(c.cluster.blocks, 8);
  EXPECT_EQ(c.cluster.threads, 512);
  EXPECT_EQ(c.cluster.slots, 16);
  EXPECT_EQ(c.schedule.kind, backend::CudaScheduleKind::kCluster);
  EXPECT_EQ(c.schedule.Grid(3, 132), 24);
  EXPECT_EQ(c.schedule.block, 512);
  EXPECT_THAT(c.source, HasSubstr("__cluster_dims__(8, 1, 1) __launch_bounds__(512)"));
  // Two reductions (max, sum): each combines across the cluster once.
  EXPECT_THAT(c.ptx, HasSubstr("barrier.cluster.wait"));
  EXPECT_THAT(c.ptx, HasSubstr("mapa.u64"));
  EXPECT_THAT(c.ptx, HasSubstr(".reqnctapercluster 8, 1, 1"));
  // The row is read from global memory once: one load per register slot.
  EXPECT_EQ(c.summary.global_loads.at(4), 16) << c.summary.ToString();
  EXPECT_EQ(c.summary.spill_store_bytes + c.summary.spill_load_bytes, 0) << c.summary.ToString();
  EXPECT_EQ(c.summary.stack_frame_bytes, 0) << c.summary.ToString();
  // 512 threads: at most 128 registers for one block per SM; 64 allows two.
  EXPECT_LE(c.summary.registers, 64) << c.summary.ToString();
}

// Data movement inside a cluster's rows: the masked (cat) and gathered
// loads are read in the body, not held (x is), and the gather's kernel
// takes fb_err. A row of only such loads holds nothing and keeps the looped
// kernel.
TEST(CudaClusterTest, RowsOfACatOrAGatherCompile) {
  backend::Kernel only_cat = LowerOnly([](auto& in) { return softmax(cat({in[0], in[1]}, -1), -1); },
                                       {randn({3, 40000}), randn({3, 25537})});
  EXPECT_TRUE(only_cat.cached_loads.empty());
  EXPECT_EQ(CompileForSm90(only_cat).schedule.kind, backend::CudaScheduleKind::kBlockPerRow);
  backend::Kernel cat_rows = LowerOnly([](auto& in) { return softmax(in[2] + cat({in[0], in[1]}, -1), -1); },
                                       {randn({3, 40000}), randn({3, 25537}), randn({3, 65537})});
  const Compiled c = CompileForSm90(cat_rows);
  EXPECT_EQ(c.schedule.kind, backend::CudaScheduleKind::kCluster);
  EXPECT_THAT(c.source, HasSubstr("__cluster_dims__"));
  const Tensor index = Tensor::from_vector(std::vector<double>{2, 0, 1}, {3}, DType::kInt64, Device::cpu());
  backend::Kernel gathered = LowerOnly([](auto& in) { return softmax(in[2] + index_select(in[0], 0, in[1]), -1); },
                                       {randn({4, 50001}), index, randn({3, 50001})});
  EXPECT_TRUE(gathered.checks_indices);
  const Compiled g = CompileForSm90(gathered);
  EXPECT_EQ(g.schedule.kind, backend::CudaScheduleKind::kCluster);
  EXPECT_THAT(g.source, HasSubstr("fb_check_index("));
  EXPECT_THAT(g.source, HasSubstr("long long* fb_err"));
}

TEST(CudaClusterTest, LayerNormAndSumsPickTheFewestBlocksThatHoldTheRow) {
  // Rows of 24576 (past kPersistentRowLimit): three blocks of 512 threads,
  // 16 values each.
  const Compiled sum24k = CompileForSm90(LowerOnly([](auto& in) { return sum(in[0] * in[0], -1); }, {randn({64, 24576})}));
  EXPECT_EQ(sum24k.cluster.blocks, 3);
  EXPECT_EQ(sum24k.cluster.slots, 16);
  EXPECT_EQ(sum24k.summary.spill_store_bytes + sum24k.summary.spill_load_bytes, 0) << sum24k.summary.ToString();
  // layer_norm with weight and bias caches three loads per element: 20001
  // (odd) over 8 blocks keeps 3 x 5 values per thread.
  Tensor w = randn({20001}), b = randn({20001});
  const Compiled ln = CompileForSm90(
      LowerOnly([&](auto& in) { return layer_norm(in[0], {20001}, w, b, 1e-5); }, {randn({3, 20001})}));
  EXPECT_EQ(ln.kernel.cached_loads.size(), 3u);
  EXPECT_EQ(ln.cluster.blocks, 8);
  EXPECT_EQ(ln.cluster.slots, 5);
  EXPECT_EQ(ln.summary.spill_store_bytes + ln.summary.spill_load_bytes, 0) << ln.summary.ToString();
  // Two reductions of one pass (two slots, one combine each), and an
  // integer sum accumulating in int64.
  const Compiled two = CompileForSm90(
      LowerOnly([](auto& in) { return sum(in[0], -1) + max(in[0], -1); }, {randn({3, 20000})}));
  EXPECT_EQ(two.kernel.passes.size(), 1u);
  EXPECT_EQ(two.cluster.blocks, 3);
  EXPECT_THAT(two.source, HasSubstr("blockIdx.x % 3 == 0 && threadIdx.x == 0"));  // the row's store
  const Compiled ints = CompileForSm90(
      LowerOnly([](auto& in) { return sum(in[0].to(DType::kInt32), -1); }, {randn({3, 20000})}));
  EXPECT_EQ(ints.cluster.blocks, 3);
  EXPECT_THAT(ints.source, HasSubstr("fb_cluster_reduce<3>(t"));
  // bf16 rows are held as floats, converted once.
  const Compiled bf16 = CompileForSm90(
      LowerOnly([](auto& in) { return softmax(in[0], -1); }, {randn({3, 65536}).to(DType::kBFloat16)}));
  EXPECT_EQ(bf16.cluster.blocks, 8);
  EXPECT_THAT(bf16.source, HasSubstr("float c0[16]"));
  EXPECT_EQ(bf16.summary.spill_store_bytes + bf16.summary.spill_load_bytes, 0) << bf16.summary.ToString();
  // Rows of 100000 take all 8 blocks at 25 values per thread.
  const Compiled big = CompileForSm90(LowerOnly([](auto& in) { return ManualSoftmax(in[0]); }, {randn({2, 100000})}));
  EXPECT_EQ(big.cluster.blocks, 8);
  EXPECT_EQ(big.cluster.slots, 25);
  EXPECT_EQ(big.summary.spill_store_bytes + big.summary.spill_load_bytes, 0) << big.summary.ToString();
}

TEST(CudaClusterTest, FewRowsTooLongToHoldLoopOverTheirClustersShare) {
  // 63 rows of 262147: 8 blocks of 1024 threads per row, each looping over
  // 32769 elements in every pass, combining through the cluster.
  const Compiled c =
      CompileForSm90(LowerOnly([](auto& in) { return ManualSoftmax(in[0]); }, {randn({63, 262147})}));
  EXPECT_EQ(c.cluster, (backend::ClusterLayout{.blocks = 8, .threads = 1024, .slots = 0}));
  EXPECT_EQ(c.schedule.Grid(63, 132), 63 * 8);
  EXPECT_EQ(c.schedule.block, 1024);
  EXPECT_THAT(c.source, HasSubstr("fb_end = fb_begin + 32769 < 262147 ? fb_begin + 32769 : 262147"));
  EXPECT_THAT(c.source, HasSubstr("j < fb_end; j += 1024"));
  EXPECT_THAT(c.source, Not(HasSubstr("c0[")));  // nothing held
  EXPECT_THAT(c.ptx, HasSubstr(".reqnctapercluster 8, 1, 1"));
  EXPECT_EQ(c.summary.spill_store_bytes + c.summary.spill_load_bytes, 0) << c.summary.ToString();
  // layer_norm with weight and bias, bf16.
  Tensor w = randn({262147}).to(DType::kBFloat16), b = randn({262147}).to(DType::kBFloat16);
  const Compiled ln = CompileForSm90(LowerOnly([&](auto& in) { return layer_norm(in[0], {262147}, w, b, 1e-5); },
                                               {randn({5, 262147}).to(DType::kBFloat16)}));
  EXPECT_EQ(ln.cluster.slots, 0);
  EXPECT_EQ(ln.summary.spill_store_bytes + ln.summary.spill_load_bytes, 0) << ln.summary.ToString();
}

TEST(CudaClusterTest, OtherKernelsAndOlderArchsKeepTheLoopedPath) {
  backend::Kernel softmax = LowerOnly([](auto& in) { return ManualSoftmax(in[0]); }, {randn({3, 65536})});
  // Before sm_90 there are no clusters: the looped kernel (softmax reads its
  // rows three times: 1024 threads, a block per SM walking the rows).
  EXPECT_EQ(backend::CudaClusterLayout(softmax, SpreadOf(softmax), 80).blocks, 0);
  softmax.cuda_arch = 80;
  EXPECT_EQ(backend::ChooseCudaSchedule(softmax, WithClusters()).cluster.blocks, 0);
  // Off by default: sm_90 keeps the looped kernel too.
  softmax.cuda_arch = 90;
  EXPECT_EQ(backend::ChooseCudaSchedule(softmax, backend::CurrentTuning()).cluster.blocks, 0);
  softmax.cuda_arch = 80;
  const std::string looped = backend::PrintCuda(softmax, WithClusters());
  EXPECT_THAT(looped, Not(HasSubstr("__cluster_dims__")));
  EXPECT_EQ(backend::CudaBlockSize(softmax, SpreadOf(softmax), backend::CurrentTuning()), 1024);
  EXPECT_EQ(backend::ChooseCudaSchedule(softmax, backend::CurrentTuning()).Grid(3, 132), 3);  // the executable caps it at the SM count
  EXPECT_TRUE(cuda::CompileWithNvrtc(looped, softmax.name, 80).ok());
  // argmax keeps its (value, index) combine.
  const backend::Kernel arg = LowerOnly([](auto& in) { return argmax(in[0], -1); }, {randn({3, 65536})});
  EXPECT_EQ(backend::CudaClusterLayout(arg, SpreadOf(arg), 90).blocks, 0);
  // Few long single-pass rows are split over ~1000 blocks instead.
  backend::Kernel split = LowerOnly([](auto& in) { return sum(in[0], -1); }, {randn({2, 1 << 17})});
  EXPECT_GT(SpreadOf(split).split, 1);
  EXPECT_EQ(backend::CudaClusterLayout(split, SpreadOf(split), 90).blocks, 0);
  // Rows that do not end in the innermost dim, and rows too long for 8 blocks.
  const backend::Kernel columns = LowerOnly([](auto& in) { return sum(in[0], 0); }, {randn({65536, 4})});
  EXPECT_EQ(backend::CudaClusterLayout(columns, SpreadOf(columns), 90).blocks, 0);
  // Rows too long for 8 blocks' registers: a looped cluster while the rows
  // are fewer than the SMs (below), the looped kernel from there.
  backend::Kernel many = LowerOnly([](auto& in) { return ManualSoftmax(in[0]); }, {randn({200, 1 << 18})});
  EXPECT_EQ(backend::CudaClusterLayout(many, SpreadOf(many), 90).blocks, 0) << "200 rows fill 132 SMs";
  many.cuda_sm_count = 264;
  EXPECT_EQ(backend::CudaClusterLayout(many, SpreadOf(many), 90).blocks, 8) << "but not 264";
  // Rows a block holds alone stay persistent.
  const backend::Kernel short_rows = LowerOnly([](auto& in) { return ManualSoftmax(in[0]); }, {randn({3, 4096})});
  EXPECT_EQ(backend::CudaClusterLayout(short_rows, SpreadOf(short_rows), 90).blocks, 0);
}

}  // namespace
}  // namespace fusebox
