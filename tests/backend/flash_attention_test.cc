// The flash-attention kernel's source (backend/cuda/flash_attention.h)
// without a GPU: NVRTC compiles every config the default tuning chooses (and
// the tuning knobs' others) with no spills, on the tensor cores: on sm_90
// (for sm_90a) wgmma from shared memory, elsewhere (sm_80 on) mma.sync fed
// by ldmatrix; cp.async copies; and the configs follow the knobs.

#include <string>

#include "absl/strings/match.h"
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
using ::testing::Not;

// Compiles `c` for sm_90: no spills, no stack, registers within the block's
// share of the register file, and the instructions the design relies on.
void ExpectCompilesWithoutSpills(const FlashConfig& c) {
  SCOPED_TRACE(c.KernelName());
  const std::string source = cuda::FlashAttentionSource(c);
  auto out = test_util::CompileWithPtxasReport(source, c.KernelName(), 90, c.wgmma);
  ASSERT_TRUE(out.ok()) << out.status() << "\n" << source;
  const PtxSummary summary = backend::SummarizePtx(out->ptx, out->log);
  EXPECT_EQ(summary.spill_store_bytes + summary.spill_load_bytes, 0) << summary.ToString();
  EXPECT_EQ(summary.stack_frame_bytes, 0) << summary.ToString();
  EXPECT_GT(summary.registers, 0) << "ptxas's -v report is missing from the log:\n" << out->log;
  EXPECT_LE(summary.registers, 65536 / (c.threads() * c.min_blocks)) << summary.ToString();
  const std::string type = c.dtype == DType::kBFloat16 ? "bf16" : "f16";
  if (c.dtype == DType::kFloat32) {  // FMA on float4s read from shared memory
    EXPECT_THAT(out->ptx, HasSubstr("fma.rn.f32"));
    EXPECT_THAT(out->ptx, HasSubstr("ld.shared.v4.f32"));
    EXPECT_THAT(out->ptx, Not(HasSubstr("mma")));
  } else if (c.wgmma) {
    EXPECT_THAT(out->ptx, HasSubstr(absl::StrCat("wgmma.mma_async.sync.aligned.m64n", c.block_n, "k16.f32.", type)));
    EXPECT_THAT(out->ptx, HasSubstr(absl::StrCat("wgmma.mma_async.sync.aligned.m64n64k16.f32.", type)));
    // ptxas keeps the wgmma pipelined (it serializes them when it cannot prove the registers safe).
    EXPECT_THAT(out->log, Not(HasSubstr("serializ"))) << out->log;
    if (c.warp_specialized) {  // TMA into mbarriers; the producer's registers go to the consumers
      EXPECT_THAT(out->ptx, HasSubstr("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"));
      EXPECT_THAT(out->ptx, HasSubstr("mbarrier.try_wait.parity.shared::cta.b64"));
      EXPECT_THAT(out->ptx, HasSubstr(absl::StrCat("setmaxnreg.inc.sync.aligned.u32 ", c.consumer_registers())));
      // setmaxnreg takes from the block's own registers: what ptxas gives a
      // thread at launch (all launch_registers()) must hold every warpgroup's ask.
      EXPECT_EQ(summary.registers, c.launch_registers()) << summary.ToString();
      EXPECT_LE(128 * (c.producer_registers() + c.consumers() * c.consumer_registers()),
                summary.registers * c.threads());
      EXPECT_THAT(out->ptx, HasSubstr("bar.arrive"));
      return;
    }
    EXPECT_THAT(out->ptx, HasSubstr("fence.proxy.async.shared::cta"));
  } else {
    EXPECT_THAT(out->ptx, HasSubstr(absl::StrCat("mma.sync.aligned.m16n8k16.row.col.f32.", type, ".", type, ".f32")));
    EXPECT_THAT(out->ptx, HasSubstr("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"));
  }
  EXPECT_THAT(out->ptx, HasSubstr("cp.async.cg.shared.global"));
  EXPECT_THAT(out->ptx, HasSubstr(absl::StrCat(".maxntid ", c.threads())));
  EXPECT_EQ(test_util::CountSubstr(out->ptx, "ld.local") + test_util::CountSubstr(out->ptx, "st.local"), 0);
}

// sm_90 takes the wgmma kernel, the other architectures the mma.sync one;
// both are compiled for sm_90 (the mma.sync configs as the H200 ran them
// before the wgmma kernel; sm_80's ptxas spills two of them: bench/NOTES.md).
TEST(FlashAttentionTest, EveryDefaultConfigCompilesWithoutSpills) {
  for (int arch : {90, 80}) {
    const auto configs = cuda::DefaultFlashConfigs(arch);
    EXPECT_EQ(configs.size(), 24u);  // E 64/128 x bf16/f16/f32 x none/causal/bool/float
    for (const FlashConfig& c : configs) {
      EXPECT_EQ(c.wgmma, arch == 90 && c.dtype != DType::kFloat32);
      EXPECT_LE(c.SharedBytes(), 227 * 1024) << "sm_90's shared memory a block";
      ExpectCompilesWithoutSpills(c);
    }
  }
  EXPECT_FALSE(cuda::ChooseFlashConfig(64, DType::kBFloat16, AttentionMask::kNone, 100, {}).wgmma);
}

TEST(FlashAttentionTest, TheWgmmaKernelsOtherTileCompilesToo) {
  for (int block_n : {64, 128}) {
    backend::TuningSnapshot t;
    t.Set(backend::Knob::kFlashBlockN, block_n);
    for (int e : {64, 128}) {
      for (AttentionMask m : {AttentionMask::kNone, AttentionMask::kCausal, AttentionMask::kFloat}) {
        const FlashConfig c = cuda::ChooseFlashConfig(e, DType::kBFloat16, m, 90, t);
        EXPECT_TRUE(c.wgmma);
        // Three consumers (192 query rows) for the warp-specialized kernel at head dim 64.
        EXPECT_EQ(c.block_m(), c.warp_specialized && e == 64 ? 192 : 128);
        EXPECT_EQ(c.block_n, block_n);
        EXPECT_LE(c.SharedBytes(), 227 * 1024) << "sm_90's shared memory a block";
        // 128 keys at E 128 with a float mask spill (the knob's cost).
        if (e == 128 && block_n == 128 && m == AttentionMask::kFloat) continue;
        ExpectCompilesWithoutSpills(c);
      }
    }
  }
}

// sm_90's unmasked and causal 16-bit kernels take a TMA producer warpgroup
// beside three wgmma consumers at head dim 64, two at 128, at both tiles of keys, and their cp.async twins
// (for operands TMA cannot read) compile too; masked kernels, f32 and other
// architectures keep theirs.
TEST(FlashAttentionTest, WarpSpecializedKernelsAndTheirTwinsCompileWithoutSpills) {
  for (int block_n : {0, 64}) {
    backend::TuningSnapshot t;
    t.Set(backend::Knob::kFlashBlockN, block_n);
    for (int e : {64, 128}) {
      for (AttentionMask m : {AttentionMask::kNone, AttentionMask::kCausal}) {
        const FlashConfig c = cuda::ChooseFlashConfig(e, DType::kBFloat16, m, 90, t);
        EXPECT_TRUE(c.wgmma && c.warp_specialized);
        EXPECT_EQ(c.threads(), e == 64 ? 512 : 384);
        EXPECT_EQ(c.block_m(), e == 64 ? 192 : 128);
        EXPECT_EQ(c.block_n, block_n == 0 ? 128 : block_n);
        EXPECT_LE(c.SharedBytes(), 227 * 1024) << "sm_90's shared memory a block";
        EXPECT_THAT(c.KernelName(), HasSubstr("_ws"));
        if (block_n != 0) ExpectCompilesWithoutSpills(c);  // the default ones compile in EveryDefaultConfig...
        const FlashConfig twin = cuda::FlashCpAsyncTwin(c);
        EXPECT_TRUE(twin.wgmma && !twin.warp_specialized);
        EXPECT_EQ(twin.threads(), 256);
        if (block_n == 0) ExpectCompilesWithoutSpills(twin);
      }
    }
  }
  for (AttentionMask m : {AttentionMask::kBool, AttentionMask::kFloat}) {
    const FlashConfig c = cuda::ChooseFlashConfig(64, DType::kBFloat16, m, 90, {});
    EXPECT_TRUE(c.wgmma && !c.warp_specialized);
    EXPECT_EQ(cuda::FlashCpAsyncTwin(c), c);
  }
  EXPECT_FALSE(cuda::ChooseFlashConfig(64, DType::kFloat32, AttentionMask::kNone, 90, {}).warp_specialized);
  EXPECT_FALSE(cuda::ChooseFlashConfig(64, DType::kBFloat16, AttentionMask::kNone, 80, {}).warp_specialized);
}

// Three consumer warpgroups (192 query rows a block, 512 threads, 160
// registers a consumer thread): the rule at head dim 64, Knob::kFlashConsumers
// at 128; two (persistent: 232 registers) the rule at 128 and the knob's
// other value.
TEST(FlashAttentionTest, ThreeConsumersCompileWithoutSpills) {
  for (int block_n : {64, 128}) {
    for (int e : {64, 128}) {
      backend::TuningSnapshot t;
      t.Set(backend::Knob::kFlashBlockN, block_n);
      if (e == 128) t.Set(backend::Knob::kFlashConsumers, 3);
      for (AttentionMask m : {AttentionMask::kNone, AttentionMask::kCausal}) {
        const FlashConfig c = cuda::ChooseFlashConfig(e, DType::kBFloat16, m, 90, t);
        EXPECT_TRUE(c.warp_specialized);
        EXPECT_EQ(c.consumers(), 3);
        EXPECT_EQ(c.consumer_registers(), 160);
        EXPECT_EQ(c.threads(), 512);
        EXPECT_EQ(c.block_m(), 192);
        EXPECT_LE(c.SharedBytes(), 227 * 1024) << "sm_90's shared memory a block";
        EXPECT_THAT(cuda::FlashAttentionSource(c),
                    HasSubstr("kConsumers = 3, kProducerRegisters = 24, kConsumerRegisters = 160"));
        if (e == 64) ExpectCompilesWithoutSpills(c);
      }
    }
  }
  const FlashConfig e128 = cuda::ChooseFlashConfig(128, DType::kBFloat16, AttentionMask::kCausal, 90, {});
  EXPECT_EQ(e128.consumers(), 2);
  EXPECT_TRUE(e128.persistent);
  EXPECT_EQ(e128.producer_registers(), 40);  // the persistent producer's item loop
  EXPECT_EQ(e128.consumer_registers(), 232);
  backend::TuningSnapshot two;
  two.Set(backend::Knob::kFlashConsumers, 2);
  const FlashConfig e64 = cuda::ChooseFlashConfig(64, DType::kBFloat16, AttentionMask::kNone, 90, two);
  EXPECT_EQ(e64.consumers(), 2);
  EXPECT_EQ(e64.block_m(), 128);
  // Bool masks stay on the cp.async kernel under either value.
  EXPECT_FALSE(cuda::ChooseFlashConfig(64, DType::kBFloat16, AttentionMask::kBool, 90, two).warp_specialized);
}

// Every warp-specialized config a knob reaches gives its consumers no more
// registers than the block holds at launch less the producer's: setmaxnreg
// .inc takes from that pool only, and two consumers at head dim 64 under the
// persistent producer once asked 1024 past it and waited forever (the
// BlockOrders test hung on the H100). That config compiles as the rule's do.
TEST(FlashAttentionTest, EveryWarpgroupSplitFitsTheBlocksRegisters) {
  using backend::Knob;
  int seen = 0;
  for (int consumers : {0, 2, 3}) {
    for (int persistent : {0, 1, 2}) {
      for (int e : {64, 128}) {
        for (AttentionMask m : {AttentionMask::kNone, AttentionMask::kCausal}) {
          backend::TuningSnapshot t;
          t.Set(Knob::kFlashConsumers, consumers).Set(Knob::kFlashPersistent, persistent);
          const FlashConfig c = cuda::ChooseFlashConfig(e, DType::kBFloat16, m, 90, t);
          SCOPED_TRACE(c.KernelName());
          ASSERT_TRUE(c.warp_specialized);
          ++seen;
          EXPECT_EQ(c.launch_registers(), c.consumers() == 2 ? 168 : 128);
          EXPECT_LE(128 * (c.producer_registers() + c.consumers() * c.consumer_registers()),
                    c.launch_registers() * c.threads());
          EXPECT_EQ(c.consumer_registers() % 8, 0);
          EXPECT_GE(c.consumer_registers(), 152);  // three under the 40-register producer (head dim 128)
        }
      }
    }
  }
  EXPECT_EQ(seen, 36);
  backend::TuningSnapshot two;
  two.Set(Knob::kFlashConsumers, 2);
  const FlashConfig c = cuda::ChooseFlashConfig(64, DType::kBFloat16, AttentionMask::kCausal, 90, two);
  EXPECT_TRUE(c.persistent);  // the rule: persistent where two consumers multiply
  EXPECT_EQ(c.producer_registers(), 32);
  EXPECT_EQ(c.consumer_registers(), 232);
  ExpectCompilesWithoutSpills(c);
}

TEST(FlashAttentionTest, TheKnobsOtherTilesCompileToo) {
  for (int block_n : {32, 128}) {
    for (int warps : {4, 8}) {
      backend::TuningSnapshot t;
      t.Set(backend::Knob::kFlashBlockN, block_n).Set(backend::Knob::kFlashWarps, warps);
      t.Set(backend::Knob::kFlashWarpTiles, 1);
      for (int e : {64, 128}) {
        const FlashConfig c = cuda::ChooseFlashConfig(e, DType::kBFloat16, AttentionMask::kCausal, 80, t);
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
    const FlashConfig c = cuda::ChooseFlashConfig(64, DType::kBFloat16, m, 80, t);
    EXPECT_EQ(c.block_m(), 128);
    ExpectCompilesWithoutSpills(c);
  }
}

TEST(FlashAttentionTest, ConfigsFollowTheProblemAndRefuseBadKnobValues) {
  const FlashConfig c = cuda::ChooseFlashConfig(128, DType::kFloat16, AttentionMask::kBool, 80, {});
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.block_m(), 128);
  EXPECT_EQ(c.block_n, 64);
  EXPECT_EQ(c.SharedBytes(), 2 * 128 * (128 + 4 * 64));
  EXPECT_EQ(c.KernelName(), "fb_flash_attention_e128_f16_bool_mask_n64_w8");
  backend::TuningSnapshot odd;
  odd.Set(backend::Knob::kFlashBlockN, 48).Set(backend::Knob::kFlashWarps, 6);
  const FlashConfig d = cuda::ChooseFlashConfig(64, DType::kBFloat16, AttentionMask::kNone, 80, odd);
  EXPECT_EQ(d.block_n, 64);
  EXPECT_EQ(d.warps, 4);  // head dim 64: two 16-row tiles a warp
  EXPECT_EQ(d.m_tiles, 2);
  EXPECT_EQ(d.block_m(), 128);
  EXPECT_TRUE(cuda::FlashAttentionSupports(DType::kBFloat16, 64));
  EXPECT_TRUE(cuda::FlashAttentionSupports(DType::kFloat32, 64));
  EXPECT_FALSE(cuda::FlashAttentionSupports(DType::kFloat32, 96));
  EXPECT_FALSE(cuda::FlashAttentionSupports(DType::kFloat16, 96));
  EXPECT_FALSE(cuda::FlashAttentionSupports(DType::kInt32, 64));
  // f32: 256 threads on every architecture, 8 query rows a thread at head
  // dim 64 unmasked or causal, else 4; the shared memory (Q, K, V in rows of
  // E + 4 floats, P^T) fitting two blocks an SM.
  for (int e : {64, 128}) {
    for (AttentionMask m : {AttentionMask::kCausal, AttentionMask::kBool}) {
      const FlashConfig f = cuda::ChooseFlashConfig(e, DType::kFloat32, m, 90, {});
      const int rows = e == 64 && m == AttentionMask::kCausal ? 8 : 4;
      EXPECT_FALSE(f.wgmma);
      EXPECT_EQ(f.thread_rows, rows);
      EXPECT_EQ(f.block_m(), 16 * rows);
      EXPECT_EQ(f.threads(), 256);
      EXPECT_EQ(f.SharedBytes(), 4 * ((16 * rows + 2 * f.block_n) * (e + 4) + f.block_n * (16 * rows + 4)));
      EXPECT_LE(2 * f.SharedBytes(), 227 * 1024);
      EXPECT_EQ(f.KernelName(), absl::StrCat("fb_flash_attention_e", e, "_f32_", backend::AttentionMaskName(m), "_n",
                                             f.block_n, "_w8", rows == 8 ? "_r8" : "", "_b2",
                                             m == AttentionMask::kCausal ? "_o2" : ""));
    }
  }
}

// Causal blocks' start order (FlashConfig::causal_order): the rule (f32
// longest first over the grid, 16-bit batch by batch), the knob's other
// value, each its own kernel name, the cp.async twin keeping the order, and
// the knob's kernels compiled.
TEST(FlashAttentionTest, CausalOrdersFollowTheKnobAndCompile) {
  using backend::Knob;
  EXPECT_EQ(cuda::ChooseFlashConfig(64, DType::kFloat32, AttentionMask::kCausal, 90, {}).causal_order, 2);
  const FlashConfig bf16 = cuda::ChooseFlashConfig(64, DType::kBFloat16, AttentionMask::kCausal, 90, {});
  EXPECT_EQ(bf16.causal_order, 1);
  EXPECT_THAT(cuda::FlashAttentionSource(bf16), HasSubstr("constexpr int kCausalOrder = 1;"));
  for (int order : {1, 2}) {
    backend::TuningSnapshot t;
    t.Set(Knob::kFlashCausalOrder, order);
    for (DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
      for (int e : {64, 128}) {
        const FlashConfig c = cuda::ChooseFlashConfig(e, dtype, AttentionMask::kCausal, 90, t);
        SCOPED_TRACE(c.KernelName());
        EXPECT_EQ(c.causal_order, order);
        EXPECT_EQ(absl::StrContains(c.KernelName(), "_o2"), order == 2);
        EXPECT_THAT(cuda::FlashAttentionSource(c), HasSubstr(absl::StrCat("constexpr int kCausalOrder = ", order)));
        EXPECT_EQ(cuda::FlashCpAsyncTwin(c).causal_order, order);
        if (dtype != DType::kFloat16) ExpectCompilesWithoutSpills(c);
      }
      // Other masks start in row order whatever the knob says.
      const FlashConfig none = cuda::ChooseFlashConfig(64, dtype, AttentionMask::kNone, 90, t);
      EXPECT_EQ(none.causal_order, 1);
      EXPECT_THAT(none.KernelName(), Not(HasSubstr("_o")));
    }
  }
}

// The persistent warp-specialized kernel (Knob::kFlashPersistent): the
// rule (persistent with two consumers, head dim 128; a block per item with
// three), the knob's values, the names, persistent kernels compiled without
// spills (the producer's item loop within its registers), and only where a
// producer warpgroup loads (sm_90, 16-bit, unmasked or causal); the cp.async
// twin is not persistent.
TEST(FlashAttentionTest, PersistentKernelsFollowTheRuleAndTheKnobAndCompile) {
  using backend::Knob;
  for (const FlashConfig& c : cuda::DefaultFlashConfigs(90)) {
    EXPECT_EQ(c.persistent, c.warp_specialized && c.head_dim == 128) << c.KernelName();
    EXPECT_EQ(c.persistent, c.warp_specialized && c.consumers() == 2) << c.KernelName();
  }
  for (int knob : {1, 2}) {
    backend::TuningSnapshot t;
    t.Set(Knob::kFlashPersistent, knob);
    for (DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
      for (AttentionMask m : {AttentionMask::kNone, AttentionMask::kCausal, AttentionMask::kBool}) {
        for (int e : {64, 128}) {
          const FlashConfig c = cuda::ChooseFlashConfig(e, dtype, m, 90, t);
          SCOPED_TRACE(c.KernelName());
          EXPECT_EQ(c.warp_specialized, dtype != DType::kFloat32 && m != AttentionMask::kBool);
          EXPECT_EQ(c.persistent, c.warp_specialized && knob == 2);
          EXPECT_EQ(absl::StrContains(c.KernelName(), "_p"), c.persistent);
          EXPECT_FALSE(cuda::FlashCpAsyncTwin(c).persistent);
          EXPECT_FALSE(cuda::ChooseFlashConfig(e, dtype, m, 80, t).persistent);
          if (c.persistent) {
            EXPECT_THAT(cuda::FlashAttentionSource(c), HasSubstr("kPersistent = true"));
            if (dtype != DType::kFloat16) ExpectCompilesWithoutSpills(c);
          }
        }
      }
    }
  }
}

// Row tiles ending at the last query row (Knob::kFlashAlignEnd): the rule
// for the causal warp-specialized kernel (persistent or not), off with 1,
// named apart, compiled without spills.
TEST(FlashAttentionTest, EndAlignedRowTilesFollowTheKnobAndCompile) {
  using backend::Knob;
  for (const FlashConfig& c : cuda::DefaultFlashConfigs(90)) {
    EXPECT_EQ(c.align_end, c.warp_specialized && c.mask == AttentionMask::kCausal) << c.KernelName();
  }
  backend::TuningSnapshot off;
  off.Set(Knob::kFlashAlignEnd, 1);
  EXPECT_FALSE(cuda::ChooseFlashConfig(64, DType::kBFloat16, AttentionMask::kCausal, 90, off).align_end);
  for (int persistent : {1, 2}) {
    backend::TuningSnapshot t;
    t.Set(Knob::kFlashAlignEnd, 2).Set(Knob::kFlashPersistent, persistent);
    for (AttentionMask m : {AttentionMask::kNone, AttentionMask::kCausal, AttentionMask::kBool}) {
      for (int e : {64, 128}) {
        const FlashConfig c = cuda::ChooseFlashConfig(e, DType::kBFloat16, m, 90, t);
        SCOPED_TRACE(c.KernelName());
        EXPECT_EQ(c.align_end, m == AttentionMask::kCausal);
        EXPECT_EQ(absl::EndsWith(c.KernelName(), "_e"), c.align_end);
        EXPECT_FALSE(cuda::FlashCpAsyncTwin(c).align_end);
        EXPECT_FALSE(cuda::ChooseFlashConfig(e, DType::kFloat32, m, 90, t).align_end);
        if (c.align_end) {
          EXPECT_THAT(cuda::FlashAttentionSource(c), HasSubstr("kAlignEnd = true"));
          ExpectCompilesWithoutSpills(c);
        }
      }
    }
  }
}

}  // namespace
}  // namespace fusebox
