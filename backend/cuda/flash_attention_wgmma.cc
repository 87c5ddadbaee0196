// The sm_90 wgmma body of the flash-attention kernel (flash_attention_bodies.h).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "backend/cuda/flash_attention_bodies.h"

namespace fusebox::cuda {
namespace {

// The sm_90 kernel: kWG warpgroups of 64 query rows. S = Q K^T by wgmma with
// both operands in shared memory, P V by wgmma with P from registers and V
// read transposed (MN-major) from shared memory. Every tile is in the
// 128-byte swizzle (fb_swz) from a 1024-byte aligned base: a descriptor
// addresses 8-row groups 1024 bytes apart, a k-step of 16 moves 32 bytes
// along a row (Q, K) or 16 rows down (V). Pipelined as FlashAttention-3
// within a warpgroup: the next tile's S = Q K^T runs on the tensor cores
// beside this tile's P V, and the next softmax overlaps P V too (its
// rescale of the output waits for P V). K/V tiles in three stages: step j
// reads K of tile j + 1 and V of tile j while tile j + 2 loads.
constexpr const char* kWgmmaCommon = R"(
// Orders the registers against the asynchronous wgmma: nothing reads or
// writes them across this point.
template <int NB, int W>
__device__ __forceinline__ void fb_fence_regs(float (&d)[NB][W]) {
#pragma unroll
  for (int n = 0; n < NB; ++n)
#pragma unroll
    for (int c = 0; c < W; ++c) asm volatile("" : "+f"(d[n][c])::"memory");
}
template <int NB>
__device__ __forceinline__ void fb_fence_regs(fb_u32 (&d)[NB][4]) {
#pragma unroll
  for (int n = 0; n < NB; ++n)
#pragma unroll
    for (int c = 0; c < 4; ++c) asm volatile("" : "+r"(d[n][c])::"memory");
}
__device__ __forceinline__ unsigned long long fb_desc(fb_u32 addr) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
__device__ __forceinline__ void fb_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void fb_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void fb_wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
FB_WGMMA_FUNCTIONS
// S = Q K^T over the K tile at ks: issued, not waited.
__device__ __forceinline__ void fb_issue_qk(float (&s)[kBN / 8][4], fb_u32 qs, fb_u32 ks) {
#pragma unroll
  for (int kk = 0; kk < kE / 16; ++kk) {
    const fb_u32 off = (kk & 3) * 32;
    fb_wgmma_qk(s, fb_desc(qs + (kk >> 2) * (kBM * 128) + off), fb_desc(ks + (kk >> 2) * (kBN * 128) + off), kk > 0);
  }
}
// acc += P V over the V tile at vs: issued, not waited.
__device__ __forceinline__ void fb_issue_pv(float (&acc)[kE / 8][4], const fb_u32 (&pf)[kBN / 16][4], fb_u32 vs) {
#pragma unroll
  for (int t = 0; t < kBN / 16; ++t) {
    fb_wgmma_pv<0>(acc, pf[t], fb_desc(vs + t * 16 * 128));
    if constexpr (kE == 128) fb_wgmma_pv<1>(acc, pf[t], fb_desc(vs + kBN * 128 + t * 16 * 128));
  }
}
// The pipeline's steps, as both sm_90 kernels take them: each issues and
// commits a group per GEMM; the caller waits. Tile 0's S = Q K^T alone:
__device__ __forceinline__ void fb_start_qk(float (&s)[kBN / 8][4], fb_u32 qs, fb_u32 ks) {
  fb_wgmma_fence();
  fb_issue_qk(s, qs, ks);
  fb_wgmma_commit();
}
// S of the next tile (K at ks) beside P V of this one (V at vs):
__device__ __forceinline__ void fb_start_qk_pv(float (&s)[kBN / 8][4], fb_u32 qs, fb_u32 ks, float (&acc)[kE / 8][4],
                                               fb_u32 (&pf)[kBN / 16][4], fb_u32 vs) {
  fb_fence_regs(acc);
  fb_fence_regs(pf);
  fb_wgmma_fence();
  fb_issue_qk(s, qs, ks);
  fb_wgmma_commit();
  fb_issue_pv(acc, pf, vs);
  fb_wgmma_commit();
}
// The last tile's P V alone:
__device__ __forceinline__ void fb_start_pv(float (&acc)[kE / 8][4], fb_u32 (&pf)[kBN / 16][4], fb_u32 vs) {
  fb_fence_regs(acc);
  fb_fence_regs(pf);
  fb_wgmma_fence();
  fb_issue_pv(acc, pf, vs);
  fb_wgmma_commit();
}
// The scores s as P's fragments.
__device__ __forceinline__ void fb_pack_p(fb_u32 (&pf)[kBN / 16][4], const float (&s)[kBN / 8][4]) {
#pragma unroll
  for (int t = 0; t < kBN / 16; ++t) fb_p_fragment(pf[t], s, t);
}
// Once P V is in: the output rescaled to the new row max, the next P packed.
__device__ __forceinline__ void fb_next_p(float (&acc)[kE / 8][4], fb_u32 (&pf)[kBN / 16][4], const float (&s)[kBN / 8][4],
                                          const float (&corr)[2]) {
  fb_fence_regs(acc);
  fb_fence_regs(pf);
  fb_rescale(acc, corr);
  fb_pack_p(pf, s);
}

)";

// The kernel: every warp loads its share of each tile by cp.async, and a
// barrier a tile keeps the warpgroups in step.
constexpr const char* kWgmmaKernel = R"(extern "C" __global__ void __launch_bounds__(kThreads, kMinBlocks) FB_NAME(const FbAttnParams p) {
  extern __shared__ __align__(1024) unsigned char fb_shared[];
  FbBlock blk;
  if (!fb_block(p, fb_launch_item(), blk)) return;
  const auto [mo, m0, tiles, q, k, v] = blk;
  const fb_u32 sq = (fb_smem(fb_shared) + 1023) & ~1023u;  // the host asks for 1024 bytes more
  // Stage t % 3 holds K, then V, of tile t.
#define FB_STAGE(t) (sq + kQBytes + ((t) % 3) * 2 * kTileBytes)
  fb_load_tile<kBM>(sq, q, p.q_row, m0, p.l, p.aligned);
  fb_load_tile<kBN>(FB_STAGE(0), k, p.k_row, 0, p.s, p.aligned);
  fb_load_tile<kBN>(FB_STAGE(0) + kTileBytes, v, p.v_row, 0, p.s, p.aligned);
  asm volatile("cp.async.commit_group;" ::: "memory");
  if (tiles > 1) {
    fb_load_tile<kBN>(FB_STAGE(1), k, p.k_row, kBN, p.s, p.aligned);
    fb_load_tile<kBN>(FB_STAGE(1) + kTileBytes, v, p.v_row, kBN, p.s, p.aligned);
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // cp.async's writes, visible to wgmma
  __syncthreads();

  // The warpgroup through a shuffle: the compiler then knows it is uniform
  // over each warp, so the causal bounds below make no divergent path around
  // the wgmma (ptxas would serialize them).
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x >> 7, 0), lane = threadIdx.x & 31;
  const int grow = m0 + wg * 64, wrow = grow + ((threadIdx.x >> 5) & 3) * 16;  // the warpgroup's and the warp's first row
  const fb_u32 qs = sq + wg * 64 * 128;
  // The warpgroup's tiles: causal rows see no key past grow + 63.
  const int last = kMask == 1 ? min(tiles, (grow + 63) / kBN + 1) : tiles;
  float acc[kE / 8][4];
#pragma unroll
  for (int e = 0; e < kE / 8; ++e) acc[e][0] = acc[e][1] = acc[e][2] = acc[e][3] = 0.f;
  float mrow[2] = {__int_as_float(0xff800000), __int_as_float(0xff800000)}, lrow[2] = {0.f, 0.f};
  float s[kBN / 8][4];
  fb_u32 pf[kBN / 16][4];
  {  // tile 0's P
    float corr[2];
    fb_start_qk(s, qs, FB_STAGE(0));
    const FbMaskTile mask = fb_mask_load(p, mo, wrow, 0, lane);
    fb_wgmma_wait<0>();
    fb_fence_regs(s);
    fb_softmax_tile(s, mrow, lrow, corr, p, mo, 0, wrow, lane, kMask == 2 && fb_mask_keeps(mask));
    fb_pack_p(pf, s);
  }

  for (int j = 0; j < tiles; ++j) {
    if (j + 2 < tiles) {
      fb_load_tile<kBN>(FB_STAGE(j + 2), k, p.k_row, (j + 2) * kBN, p.s, p.aligned);
      fb_load_tile<kBN>(FB_STAGE(j + 2) + kTileBytes, v, p.v_row, (j + 2) * kBN, p.s, p.aligned);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    // Each branch is one straight pipeline stage (a wgmma under a condition
    // inside a stage makes ptxas serialize them all).
    if (j + 1 < last) {
      fb_start_qk_pv(s, qs, FB_STAGE(j + 1), acc, pf, FB_STAGE(j) + kTileBytes);
      const FbMaskTile mask = fb_mask_load(p, mo, wrow, (j + 1) * kBN, lane);  // read while S multiplies
      fb_wgmma_wait<1>();  // S of tile j + 1 is in; P V may still run
      fb_fence_regs(s);
      float corr[2];
      fb_softmax_tile(s, mrow, lrow, corr, p, mo, (j + 1) * kBN, wrow, lane, kMask == 2 && fb_mask_keeps(mask));
      fb_wgmma_wait<0>();
      fb_next_p(acc, pf, s, corr);
    } else if (j + 1 == last) {  // the warpgroup's last tile: P V alone
      fb_start_pv(acc, pf, FB_STAGE(j) + kTileBytes);
      fb_wgmma_wait<0>();
      fb_fence_regs(acc);
    }
    // Tile j + 2 is in; every warpgroup is done with tile j's stage (tile j + 3 loads there).
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
  }
#undef FB_STAGE
  fb_store_tile(acc, lrow, fb_out(p, fb_launch_item()), p.o_row, wrow, p.l, lane);
}
)";

// The two wgmma shapes as functions, their operand lists spelled out:
// S (64 x kBN) += Q K^T from shared memory; acc's 64 columns from 64 h (an
// E half) += P V with P in registers and V transposed.
std::string WgmmaFunctions(const FlashConfig& c) {
  const std::string t = c.dtype == DType::kBFloat16 ? "bf16" : "f16";
  const int nb = c.block_n / 8;
  std::string qk = absl::StrCat(
      "__device__ __forceinline__ void fb_wgmma_qk(float (&d)[", nb, "][4], unsigned long long da, ",
      "unsigned long long db, int accumulate) {\n  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %", 4 * nb + 2,
      ", 0;\\nwgmma.mma_async.sync.aligned.m64n", c.block_n, "k16.f32.", t, ".", t, " {");
  for (int i = 0; i < 4 * nb; ++i) absl::StrAppend(&qk, i ? ", " : "", "%", i);
  absl::StrAppend(&qk, "}, %", 4 * nb, ", %", 4 * nb + 1, ", p, 1, 1, 0, 0;\\n}\"\n      : ");
  for (int i = 0; i < 4 * nb; ++i) absl::StrAppend(&qk, i ? ", " : "", "\"+f\"(d[", i / 4, "][", i % 4, "])");
  absl::StrAppend(&qk, "\n      : \"l\"(da), \"l\"(db), \"r\"(accumulate));\n}\n");
  std::string pv = absl::StrCat(
      "template <int H>\n__device__ __forceinline__ void fb_wgmma_pv(float (&d)[kE / 8][4], const fb_u32 (&a)[4], ",
      "unsigned long long db) {\n  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %37, 0;\\n",
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.", t, ".", t, " {");
  for (int i = 0; i < 32; ++i) absl::StrAppend(&pv, i ? ", " : "", "%", i);
  absl::StrAppend(&pv, "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\\n}\"\n      : ");
  for (int i = 0; i < 32; ++i) absl::StrAppend(&pv, i ? ", " : "", "\"+f\"(d[H * 8 + ", i / 4, "][", i % 4, "])");
  absl::StrAppend(&pv, "\n      : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db), \"r\"(1));\n}\n");
  return qk + pv;
}

}  // namespace

std::string FlashWgmmaCommon(const FlashConfig& config) {
  return absl::StrReplaceAll(kWgmmaCommon, {{"FB_WGMMA_FUNCTIONS", WgmmaFunctions(config)}});
}

std::string FlashWgmmaBody(const FlashConfig& config) { return FlashWgmmaCommon(config) + kWgmmaKernel; }

}  // namespace fusebox::cuda
