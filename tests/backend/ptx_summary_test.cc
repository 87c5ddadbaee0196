// PtxSummary: the counts on hand-written PTX and a ptxas log, then on kernels
// the printer generates, compiled by NVRTC for sm_90 (no GPU needed).
#include "backend/ptx_summary.h"

#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

constexpr char kPtx[] = R"(
.visible .entry k(
	.param .u64 k_param_0
)
{
	.reg .f32 	%f<9>;
	.shared .align 4 .b8 partials[128];
	ld.param.u64 	%rd1, [k_param_0];
	ld.global.v4.f32 	{%f1, %f2, %f3, %f4}, [%rd1];
	ld.global.nc.v4.f32 	{%f1, %f2, %f3, %f4}, [%rd1+16];
	ld.global.nc.L1::no_allocate.v2.f32 	{%f5, %f6}, [%rd1+32];
	@%p1 ld.global.nc.u16 	%rs1, [%rd2];
	@!%p2 ld.global.f64 	%fd1, [%rd3];
	st.global.v2.b32 	[%rd4], {%r1, %r2};
	st.global.f32 	[%rd4+8], %f7;
	st.global.u8 	[%rd5], %rs2;
	ld.shared.f32 	%f8, [partials];
	st.shared.u32 	[partials+4], %r3;
	ld.local.f32 	%f9, [%rd6];
	shfl.sync.bfly.b32	%r4|%p3, %r5, 16, 31, -1;
	shfl.sync.down.b32	%r6, %r7, 8, 31, -1;
	// ld.global.f32 in a comment is not an instruction
$L__BB0_2:
	ret;
}
)";

constexpr char kLog[] = R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k_partial' for 'sm_90'
ptxas info    : Function properties for k_partial
    8 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 256 bytes smem, 368 bytes cmem[0]
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
    0 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 24 registers, used 1 barriers, 128 bytes smem, 360 bytes cmem[0]
)";

TEST(PtxSummaryTest, CountsHandWrittenPtxByWidthAndReadsThePtxasLog) {
  const PtxSummary s = backend::SummarizePtx(kPtx, kLog);
  EXPECT_THAT(s.global_loads, ElementsAre(Pair(2, 1), Pair(8, 2), Pair(16, 2)));
  EXPECT_THAT(s.global_stores, ElementsAre(Pair(1, 1), Pair(4, 1), Pair(8, 1)));
  EXPECT_THAT(s.shared_loads, ElementsAre(Pair(4, 1)));
  EXPECT_THAT(s.shared_stores, ElementsAre(Pair(4, 1)));
  EXPECT_EQ(s.shfl_sync, 2);
  // Two entry functions: the larger of registers, smem and stack; spills added.
  EXPECT_EQ(s.registers, 40);
  EXPECT_EQ(s.shared_memory_bytes, 256);
  EXPECT_EQ(s.stack_frame_bytes, 8);
  EXPECT_EQ(s.spill_store_bytes, 12);
  EXPECT_EQ(s.spill_load_bytes, 8);
  EXPECT_EQ(s.ToString(),
            "loads: 1 x 2B + 2 x 8B + 2 x 16B, stores: 1 x 1B + 1 x 4B + 1 x 8B, shfl.sync: 2, registers: 40, "
            "spills: 12 B stored, 8 B loaded, smem: 256 B, shared loads: 1 x 4B, shared stores: 1 x 4B, stack: 8 B");
  EXPECT_EQ(backend::SummarizePtx("", "").ToString(),
            "loads: 0, stores: 0, shfl.sync: 0, registers: 0, spills: 0 B, smem: 0 B");
}

// The tests cross-compile every CPU kernel for sm_90, so CPU kernels carry
// the summary of their CUDA twin.
TEST(PtxSummaryTest, CountsAsyncCopiesBySize) {
  const PtxSummary s = backend::SummarizePtx(R"(
	cp.async.cg.shared.global [%r4], [%rd7], 16;
	@%p2 cp.async.cg.shared.global [%r5], [%rd8], 16;
	cp.async.ca.shared.global [%r6], [%rd9], 8;
	cp.async.cg.shared.global [%r7], [%rd10], 16, %r8;
	cp.async.commit_group;
	cp.async.wait_all;
	ld.shared.v4.f32 {%f1, %f2, %f3, %f4}, [%r4];
)", "");
  // The last copy's fourth operand is its source size (zero-fill): the
  // copy is still 16 bytes.
  EXPECT_THAT(s.async_copies, ElementsAre(Pair(8, 1), Pair(16, 3)));
  EXPECT_TRUE(s.global_loads.empty());
  EXPECT_THAT(s.shared_loads, ElementsAre(Pair(16, 1)));
  EXPECT_THAT(s.ToString(), ::testing::EndsWith(", cp.async: 1 x 8B + 3 x 16B"));
}

TEST(PtxSummaryTest, ManualGeluMovesSixteenBytesPerThreadWithAScalarTail) {
  auto compiled = compile(ManualGelu);
  // A size no other test of this binary compiles: NVRTC on the H200 machine
  // prints no ptxas -v lines for a source it already compiled in the process.
  compiled(randn({1000, 1048}, Device::cpu(), FreshSeed()));
  ASSERT_EQ(compiled.kernels().size(), 1u);
  const KernelInfo k = compiled.kernels()[0];
  ASSERT_TRUE(k.ptx_summary.has_value());
  const PtxSummary& s = *k.ptx_summary;
  // One input, one output, 4 consecutive floats per thread: one 16-byte
  // access each (ld/st.global.v4.f32), and the unrolled scalar tail's four.
  EXPECT_THAT(s.global_loads, ElementsAre(Pair(4, 4), Pair(16, 1))) << s.ToString();
  EXPECT_THAT(s.global_stores, ElementsAre(Pair(4, 4), Pair(16, 1))) << s.ToString();
  EXPECT_EQ(s.shfl_sync, 0);
  EXPECT_GT(s.registers, 0);
  EXPECT_EQ(s.spill_store_bytes + s.spill_load_bytes, 0);
  EXPECT_EQ(s.shared_memory_bytes, 0);
}

TEST(PtxSummaryTest, BlockReductionShufflesAndUsesSharedMemory) {
  // Rows of 8192: too long for a warp, so a block per row
  // combines with shuffles, then through shared memory.
  auto compiled = compile([](const Tensor& x) { return sum(x, -1); });
  compiled(randn({64, 8192}, Device::cpu(), FreshSeed()));
  ASSERT_EQ(compiled.kernels().size(), 1u);
  ASSERT_TRUE(compiled.kernels()[0].ptx_summary.has_value());
  const PtxSummary s = *compiled.kernels()[0].ptx_summary;
  EXPECT_GT(s.shfl_sync, 0) << s.ToString();
  EXPECT_GE(s.shared_memory_bytes, 32 * 4) << s.ToString();  // one float per warp
  EXPECT_GT(s.registers, 0);
  EXPECT_FALSE(s.global_loads.empty());
}

}  // namespace
}  // namespace fusebox
