// The flash-attention kernel's source (backend/cuda/flash_attention.h)
// without a GPU: NVRTC compiles every config the default tuning chooses (and
// the tuning knobs' others) for sm_90 with no spills, on the tensor cores
// (mma.sync fed by ldmatrix, cp.async copies), and the configs follow the knobs.
#include <string>

#include "absl/strings/str_cat.h"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/nvrtc.h"
#include "backend/ptx_summary.h"
#include "backend/tuning.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace fusebox {
namespace {

using backend::AttentionMask;
using cuda::FlashConfig;
using ::testing::HasSubstr;

// Compiles `c` for sm_90: no spills, no stack, registers within the block's
// share of the register file, and the instructions the design relies on.
void ExpectCompilesWithoutSpills(const FlashConfig& c) {
  SCOPED_TRACE(c.KernelName());
  const std::string source = cuda::FlashAttentionSource(c);
  auto out = cuda::CompileWithNvrtc(source, c.KernelName(), 90);
  ASSERT_TRUE(out.ok()) << out.status() << "\n" << source;
  const PtxSummary summary = backend::SummarizePtx(out->ptx, out->log);
  EXPECT_EQ(summary.spill_store_bytes + summary.spill_load_bytes, 0) << summary.ToString();
  EXPECT_EQ(summary.stack_frame_bytes, 0) << summary.ToString();
  EXPECT_LE(summary.registers, 65536 / (c.threads() * c.min_blocks)) << summary.ToString();
  const std::string type = c.dtype == DType::kBFloat16 ? "bf16" : "f16";
  EXPECT_THAT(out->ptx, HasSubstr(absl::StrCat("mma.sync.aligned.m16n8k16.row.col.f32.", type, ".", type, ".f32")));
  EXPECT_THAT(out->ptx, HasSubstr("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"));
  EXPECT_THAT(out->ptx, HasSubstr("cp.async.cg.shared.global"));
  EXPECT_THAT(out->ptx, HasSubstr(absl::StrCat(".maxntid ", c.threads())));
  EXPECT_EQ(test_util::CountSubstr(out->ptx, "ld.local") + test_util::CountSubstr(out->ptx, "st.local"), 0);
}

TEST(FlashAttentionTest, EveryDefaultConfigCompilesForSm90WithoutSpills) {
  const auto configs = cuda::DefaultFlashConfigs();
  EXPECT_EQ(configs.size(), 16u);  // E 64/128 x bf16/f16 x none/causal/bool/float
  for (const FlashConfig& c : configs) ExpectCompilesWithoutSpills(c);
}

TEST(FlashAttentionTest, TheKnobsOtherTilesCompileToo) {
  for (int block_n : {32, 128}) {
    for (int warps : {4, 8}) {
      backend::TuningSnapshot t;
      t.Set(backend::Knob::kFlashBlockN, block_n).Set(backend::Knob::kFlashWarps, warps);
      t.Set(backend::Knob::kFlashWarpTiles, 1);
      for (int e : {64, 128}) {
        const FlashConfig c = cuda::ChooseFlashConfig(e, DType::kBFloat16, AttentionMask::kCausal, t);
        EXPECT_EQ(c.block_n, block_n);
        EXPECT_EQ(c.warps, warps);
        // 128 keys a tile hold 64 scores a thread beside E 128's 64 + 32: spills there are the knob's cost.
        if (e == 128 && block_n == 128) continue;
        ExpectCompilesWithoutSpills(c);
      }
    }
  }
}

TEST(FlashAttentionTest, OneTileAWarpCompilesWithoutSpillsAtHeadDim64) {
  backend::TuningSnapshot t;
  t.Set(backend::Knob::kFlashWarpTiles, 1).Set(backend::Knob::kFlashWarps, 8);
  for (AttentionMask m : {AttentionMask::kNone, AttentionMask::kCausal}) {
    const FlashConfig c = cuda::ChooseFlashConfig(64, DType::kBFloat16, m, t);
    EXPECT_EQ(c.block_m(), 128);
    ExpectCompilesWithoutSpills(c);
  }
}

TEST(FlashAttentionTest, ConfigsFollowTheProblemAndRefuseBadKnobValues) {
  const FlashConfig c = cuda::ChooseFlashConfig(128, DType::kFloat16, AttentionMask::kBool, {});
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.block_m(), 128);
  EXPECT_EQ(c.block_n, 64);
  EXPECT_EQ(c.SharedBytes(), 2 * 128 * (128 + 4 * 64));
  EXPECT_EQ(c.KernelName(), "fb_flash_attention_e128_f16_bool_mask_n64_w8");
  backend::TuningSnapshot odd;
  odd.Set(backend::Knob::kFlashBlockN, 48).Set(backend::Knob::kFlashWarps, 6);
  const FlashConfig d = cuda::ChooseFlashConfig(64, DType::kBFloat16, AttentionMask::kNone, odd);
  EXPECT_EQ(d.block_n, 64);
  EXPECT_EQ(d.warps, 4);  // head dim 64: two 16-row tiles a warp
  EXPECT_EQ(d.m_tiles, 2);
  EXPECT_EQ(d.block_m(), 128);
  EXPECT_TRUE(cuda::FlashAttentionSupports(DType::kBFloat16, 64));
  EXPECT_FALSE(cuda::FlashAttentionSupports(DType::kFloat32, 64));
  EXPECT_FALSE(cuda::FlashAttentionSupports(DType::kFloat16, 96));
}

}  // namespace
}  // namespace fusebox
