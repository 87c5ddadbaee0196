// The f32 FMA body of the flash-attention kernel (flash_attention_bodies.h).
#include "backend/cuda/flash_attention_bodies.h"

namespace fusebox::cuda {
namespace {

// The f32 kernel (no tensor core multiplies f32 exactly: TF32 rounds the
// inputs, and PyTorch's f32 SDPA does not use it). 256 threads as 16 x 16
// over 16 R query rows (R = kRows, FlashConfig::thread_rows): thread (ty, tx)
// holds rows R ty .. R ty + R - 1 of the scores at keys tx + 16 c (so the 16 threads of a half warp share a row),
// and of the output at columns 4 tx + 64 h. Shared memory holds Q [BM][E],
// K [BN][E] and V [BN][E] in rows of E + 4 floats (16-byte rows 4 banks
// apart: the half warp's K rows and V columns hit every bank once), and P
// transposed [BN][BM + 4], so every inner step reads float4s. K of the next
// tile loads while this tile's P V runs, V while the next scores do.
constexpr const char* kSimtF32Body = R"(
constexpr int kRowF = kE + 4, kPRowF = kBM + 4;  // floats a row of Q, K, V / of P^T
constexpr int kRows = kBM / 16, kCols = kBN / 16, kOut = kE / 64;  // rows, keys, float4 columns a thread holds

// Rows [row0, row0 + ROWS) of a [rows, E] operand (row stride `stride`) into
// `dst` (rows of kRowF floats); rows from `rows` on are zeros.
template <int ROWS>
__device__ __forceinline__ void fb_load_rows(float* dst, const float* src, long long stride, int row0, int rows,
                                             int aligned) {
#pragma unroll
  for (int it = 0; it < ROWS * (kE / 4) / kThreads; ++it) {
    const int c = it * kThreads + threadIdx.x, r = c / (kE / 4), ch = c % (kE / 4);
    const bool in = row0 + r < rows;
    const float* g = src + (in ? (long long)(row0 + r) * stride + ch * 4 : 0);
    float* d = dst + r * kRowF + ch * 4;
    if (aligned) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(fb_smem(d)), "l"(g), "r"(in ? 16 : 0)
                   : "memory");
    } else {
      *(float4*)d = in ? make_float4(g[0], g[1], g[2], g[3]) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

extern "C" __global__ void __launch_bounds__(kThreads, kMinBlocks) FB_NAME(const FbAttnParams p) {
  extern __shared__ __align__(16) float fb_shared_f[];
  FbBlock blk;
  if (!fb_block(p, fb_launch_item(), blk)) return;
  const auto [mo, m0, tiles, q, k, v] = blk;
  float* const qs = fb_shared_f;
  float* const ks = qs + kBM * kRowF;
  float* const vs = ks + kBN * kRowF;
  float* const ps = vs + kBN * kRowF;
  fb_load_rows<kBM>(qs, q, p.q_row, m0, p.l, p.aligned);
  fb_load_rows<kBN>(ks, k, p.k_row, 0, p.s, p.aligned);
  fb_load_rows<kBN>(vs, v, p.v_row, 0, p.s, p.aligned);

  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4, r0 = kRows * ty;
  const float kNegInf = __int_as_float(0xff800000);
  float4 acc[kRows][kOut];
#pragma unroll
  for (int i = 0; i < kRows; ++i)
#pragma unroll
    for (int h = 0; h < kOut; ++h) acc[i][h] = make_float4(0.f, 0.f, 0.f, 0.f);
  float mrow[kRows], lrow[kRows];  // the rows' running max (log2 units) and the thread's share of their sums
#pragma unroll
  for (int i = 0; i < kRows; ++i) mrow[i] = kNegInf, lrow[i] = 0.f;

  for (int j = 0; j < tiles; ++j) {
    asm volatile("cp.async.wait_group 1;" ::: "memory");  // Q and K of tile j are in; V may still load
    __syncthreads();
    const int n0 = j * kBN;
    // Causal: a warp whose rows all come before the tile's first key (its
    // 2 kRows rows, warp-uniform for the shuffles) has nothing to add there.
    const bool idle = kMask == 1 && m0 + kRows * (ty | 1) + kRows - 1 < n0;
    float s[kRows][kCols];
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int c = 0; c < kCols; ++c) s[i][c] = 0.f;
#pragma unroll 1
    for (int kk = 0; kk < (idle ? 0 : kE); kk += 4) {
      float4 qv[kRows];
#pragma unroll
      for (int i = 0; i < kRows; ++i) qv[i] = *(const float4*)(qs + (r0 + i) * kRowF + kk);
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const float4 kv = *(const float4*)(ks + (tx + 16 * c) * kRowF + kk);
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
          s[i][c] = fmaf(qv[i].x, kv.x, s[i][c]);
          s[i][c] = fmaf(qv[i].y, kv.y, s[i][c]);
          s[i][c] = fmaf(qv[i].z, kv.z, s[i][c]);
          s[i][c] = fmaf(qv[i].w, kv.w, s[i][c]);
        }
      }
    }
    // The online softmax of the thread's rows; the half warp shares each.
    // The mask test stays per score here (FMA bounds this kernel): behind one
    // branch a tile, as fb_softmax_tile's, it measured 1% slower unmasked and
    // even causal (H100, [8, 12, 1024, 64], 0.758 -> 0.767 ms, 0.439 -> 0.438).
    const bool edge = n0 + kBN > p.s, diagonal = kMask == 1 && n0 + kBN - 1 > m0;
    if (!idle) {
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int row = m0 + r0 + i;
        float top = mrow[i];
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          float x = s[i][c] * p.scale_log2;
          if (kMask >= 2 || edge || diagonal) x = fb_masked(x, p, mo, row, n0 + tx + 16 * c);
          s[i][c] = x;
          top = fmaxf(top, x);
        }
#pragma unroll
        for (int w = 1; w < 16; w *= 2) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, w));
        const float base = top == kNegInf ? 0.f : top;  // no key yet: keep exp2(-inf) = 0, not NaN
        const float corr = fb_exp2(mrow[i] - base);
        mrow[i] = top;
        float sum = 0.f;
#pragma unroll
        for (int c = 0; c < kCols; ++c) s[i][c] = fb_exp2(s[i][c] - base), sum += s[i][c];
        lrow[i] = lrow[i] * corr + sum;
#pragma unroll
        for (int h = 0; h < kOut; ++h) acc[i][h].x *= corr, acc[i][h].y *= corr, acc[i][h].z *= corr, acc[i][h].w *= corr;
      }
#pragma unroll
      for (int c = 0; c < kCols; ++c)
#pragma unroll
        for (int g = 0; g < kRows; g += 4)
          *(float4*)(ps + (tx + 16 * c) * kPRowF + r0 + g) = make_float4(s[g][c], s[g + 1][c], s[g + 2][c], s[g + 3][c]);
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");  // V of tile j is in
    __syncthreads();  // P is written; every thread is done with K of tile j
    if (j + 1 < tiles) fb_load_rows<kBN>(ks, k, p.k_row, n0 + kBN, p.s, p.aligned);
#pragma unroll 1
    for (int c = 0; c < (idle ? 0 : kBN); ++c) {
      float pr[kRows];
#pragma unroll
      for (int g = 0; g < kRows; g += 4) {
        const float4 pv = *(const float4*)(ps + c * kPRowF + r0 + g);
        pr[g] = pv.x, pr[g + 1] = pv.y, pr[g + 2] = pv.z, pr[g + 3] = pv.w;
      }
#pragma unroll
      for (int h = 0; h < kOut; ++h) {
        const float4 vv = *(const float4*)(vs + c * kRowF + 4 * tx + 64 * h);
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
          acc[i][h].x = fmaf(pr[i], vv.x, acc[i][h].x);
          acc[i][h].y = fmaf(pr[i], vv.y, acc[i][h].y);
          acc[i][h].z = fmaf(pr[i], vv.z, acc[i][h].z);
          acc[i][h].w = fmaf(pr[i], vv.w, acc[i][h].w);
        }
      }
    }
    __syncthreads();  // every thread is done with V and P of tile j
    if (j + 1 < tiles) fb_load_rows<kBN>(vs, v, p.v_row, n0 + kBN, p.s, p.aligned);
  }
  // out = acc / l, l summed over the half warp. A row with no key taking part
  // has l = 0: 0 * inf is NaN, as PyTorch's math path.
  float* const o = fb_out(p, fb_launch_item());
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    float sum = lrow[i];
#pragma unroll
    for (int w = 1; w < 16; w *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, w);
    const float inv = 1.f / sum;
    const int row = m0 + r0 + i;
    if (row >= p.l) continue;
#pragma unroll
    for (int h = 0; h < kOut; ++h) {
      *(float4*)(o + row * p.o_row + 4 * tx + 64 * h) =
          make_float4(acc[i][h].x * inv, acc[i][h].y * inv, acc[i][h].z * inv, acc[i][h].w * inv);
    }
  }
}
)";

}  // namespace

const char* FlashF32Body() { return kSimtF32Body; }

}  // namespace fusebox::cuda
