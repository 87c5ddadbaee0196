// The CUDA text of the flash-attention kernel (flash_attention.h): what every
// body shares, the 16-bit bodies' common part and the mma.sync body here; the
// wgmma and f32 FMA bodies in their own files (flash_attention_bodies.h).
// Each specialized by the constants at the source's top; kept apart from the
// host side so the kernel reads as one piece.
#include "absl/strings/str_cat.h"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/flash_attention_bodies.h"

namespace fusebox::cuda {
namespace {

// What every body shares: the parameters, the block's batch and rows, exp2.
// fb_elem is the operands' element (16 bits, or float for the f32 kernel).
constexpr const char* kBlockCommon = R"(
typedef unsigned int fb_u32;
typedef unsigned short fb_u16;

// Mirrors the host's FlashParams (flash_attention.cc), field by field.
struct FbAttnParams {
  const fb_elem* q; const fb_elem* k; const fb_elem* v; const void* mask; fb_elem* o;
  long long q_batch[4], k_batch[4], v_batch[4], m_batch[4], o_batch[4];
  long long q_row, k_row, v_row, m_row, m_col, o_row;
  long long batch_sizes[4];
  long long batch;
  int l, s;
  float scale_log2;  // scale * log2(e): scores go to exp2 in log2 units
  int aligned;       // every row 16-byte aligned: cp.async, else plain loads
  unsigned long long* work;  // kPersistent: the next item, then the blocks done (the last one zeroes both)
};

__device__ __forceinline__ fb_u32 fb_smem(const void* p) {
  unsigned long long a;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
  return (fb_u32)a;
}
__device__ __forceinline__ float fb_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float fb_to_f32(fb_u16 h) {
  float f;
  if (kBF16) asm("mov.b32 %0, %1;" : "=f"(f) : "r"(((fb_u32)h) << 16));
  else asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ float fb_to_f32(float f) { return f; }
// Score x (in log2 units) of query `row` and key `col` under the mask: -inf
// past the last key, above the causal diagonal or where a bool mask is false;
// a float mask's value (the operands' dtype) added.
__device__ __forceinline__ float fb_masked(float x, const FbAttnParams& p, long long mo, int row, int col) {
  const long long at = mo + (long long)row * p.m_row + (long long)col * p.m_col;
  if (col >= p.s || (kMask == 1 && col > row)) return __int_as_float(0xff800000);
  if (kMask == 2 && row < p.l && !((const unsigned char*)p.mask)[at]) return __int_as_float(0xff800000);
  if (kMask == 3 && row < p.l) return x + fb_to_f32(((const fb_elem*)p.mask)[at]) * 1.4426950408889634f;
  return x;
}
// How many K/V tiles a bool mask leaves the block's rows (rows [m0, m0 +
// kBM) below p.l, the first `tiles`): one past the last tile where a key
// takes part, so trailing tiles the mask drops (a causal mask given as a
// tensor, padded keys) are not computed; at least one (a row with no key is
// NaN). Every thread calls it. It scans back from the last tile, kGroup tiles
// a round (one barrier where none takes part), 16 bytes a load where the
// mask's rows are whole 16-byte chunks.
__device__ __forceinline__ int fb_mask_tiles(const FbAttnParams& p, long long mo, int m0, int tiles) {
  constexpr int kGroup = 4;
  __shared__ int last_found;
  const unsigned char* m = (const unsigned char*)p.mask + mo;
  const int rows = min(kBM, p.l - m0);
  const bool wide = p.m_col == 1 && p.m_row % 16 == 0 && p.s % 16 == 0 && ((unsigned long long)m) % 16 == 0;
  if (threadIdx.x == 0) last_found = -1;
  __syncthreads();
  for (int hi = tiles; hi > 0; hi -= kGroup) {
    const int c0 = max(0, hi - kGroup) * kBN, c1 = min(hi * kBN, p.s), width = c1 - c0;
    int last = -1;  // the last column in [c0, c1) where this thread's share keeps a key
    if (wide) {
      const int chunks = width / 16;
      for (int i = threadIdx.x; i < rows * chunks; i += kThreads) {
        const int c = c0 + 16 * (i % chunks);
        const uint4 w = *(const uint4*)(m + (long long)(m0 + i / chunks) * p.m_row + c);
        const fb_u32 words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 3; k >= 0; --k) {
          if (words[k] != 0u) {
            last = max(last, c + 4 * k + (31 - __clz(words[k])) / 8);
            break;
          }
        }
      }
    } else {
      for (int i = threadIdx.x; i < rows * width; i += kThreads) {
        const int c = c0 + i % width;
        if (m[(long long)(m0 + i / width) * p.m_row + (long long)c * p.m_col]) last = max(last, c);
      }
    }
    if (!__syncthreads_or(last >= 0)) continue;
    if (last >= 0) atomicMax(&last_found, last);
    __syncthreads();
    return last_found / kBN + 1;
  }
  return 1;
}

// What a block works on: batch b (its q, k, v and mask offset), query rows
// from m0, and the K/V tiles that count (causal: none past the block's last
// row; a bool mask: fb_mask_tiles). Causal blocks of the last rows (the most
// keys) start first (kLastRowsFirst); masked ones in row order (starting a
// tril mask's last rows first measured the same, 243 us a GPT-2 layer).
// Blocks start in launch order (x fastest); causal ones in kCausalOrder's
// (FlashConfig::causal_order). 1: batch by batch, each batch's longest row
// tiles first. 2: longest first over the whole grid (every batch's last
// rows, then the rows before them), so the last wave holds the shortest
// blocks rather than a batch's longest ones beside idle SMs: the f32
// kernel's (H100, [8, 12, 1024, 64]: 0.530 -> 0.433 ms). The 16-bit ones
// keep 1 (H200, head dim 64, T 2048 / 4096: 0.257 / 0.840 ms against 0.247
// / 0.819-0.853 with 2, within the runs' noise; the H100 lost 4-6%), likely
// as their blocks in flight then read the K and V of every batch, more than
// the L2 holds. Measured and dropped (bench/experiments/
// flash_causal_sections_skip.patch): longest first within sections of as
// many batches as half the L2 holds, 0.269 / 0.835.
//
// An item is one (batch, row tile) pair, numbered in that order. A block
// per item (item = fb_launch_item(): the grid is row tiles x batches, the
// batches maybe rounded up past p.batch), or, in a persistent kernel
// (kPersistent), a block per SM taking items one after another.
__device__ __forceinline__ long long fb_launch_item() {
  return ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
}
__device__ __forceinline__ long long fb_row_tiles(const FbAttnParams& p) {
  return kPersistent ? (p.l + kBM - 1) / kBM : gridDim.x;
}
__device__ __forceinline__ void fb_block_place(const FbAttnParams& p, long long i, long long& b, int& rows) {
  const long long nx = fb_row_tiles(p), n = kPersistent ? p.batch : (long long)gridDim.y * gridDim.z;
  if (!kLastRowsFirst || kCausalOrder == 1) {
    b = kPersistent ? i / nx : (long long)blockIdx.z * gridDim.y + blockIdx.y;
    const long long x = kPersistent ? i % nx : blockIdx.x;
    rows = (int)(kLastRowsFirst ? nx - 1 - x : x);
  } else {
    b = i % n, rows = (int)(nx - 1 - i / n);
  }
}
__device__ __forceinline__ long long fb_block_batch(const FbAttnParams& p, long long item) {
  long long b;
  int rows;
  fb_block_place(p, item, b, rows);
  return b;
}
// The K/V tiles query rows before `row_end` see (causal: none past their
// last row).
__device__ __forceinline__ int fb_tiles_seen(const FbAttnParams& p, int row_end) {
  return ((kMask == 1 ? min(p.s, row_end) : p.s) + kBN - 1) / kBN;
}
struct FbBlock {
  long long mo;
  int m0, tiles;
  const fb_elem *q, *k, *v;
};
__device__ __forceinline__ bool fb_block(const FbAttnParams& p, long long item, FbBlock& blk) {
  long long b;
  int rows;
  fb_block_place(p, item, b, rows);
  if (b >= p.batch) return false;
  // kAlignEnd: the row tiles end at the last query row, so the partial one
  // is the first (causal: the shortest) and its rows before 0, read as zeros
  // (TMA fills them) and fully masked, are not stored.
  blk.m0 = kAlignEnd ? p.l - (int)(fb_row_tiles(p) - rows) * kBM : rows * kBM;
  long long rest = b, qo = 0, ko = 0, vo = 0, mo = 0;
#pragma unroll
  for (int d = 3; d >= 0; --d) {
    const long long i = rest % p.batch_sizes[d];
    rest /= p.batch_sizes[d];
    qo += i * p.q_batch[d], ko += i * p.k_batch[d], vo += i * p.v_batch[d], mo += i * p.m_batch[d];
  }
  blk.mo = mo, blk.q = p.q + qo, blk.k = p.k + ko, blk.v = p.v + vo;
  blk.tiles = fb_tiles_seen(p, blk.m0 + kBM);
  if (kMask == 2) blk.tiles = fb_mask_tiles(p, mo, blk.m0, blk.tiles);
  return true;
}
// The block's output rows, found again when it stores them (a register held
// through the loop would spill the 16-bit kernels).
__device__ __forceinline__ fb_elem* fb_out(const FbAttnParams& p, long long item) {
  long long rest = fb_block_batch(p, item), oo = 0;
#pragma unroll
  for (int d = 3; d >= 0; --d) oo += rest % p.batch_sizes[d] * p.o_batch[d], rest /= p.batch_sizes[d];
  return p.o + oo;
}
)";

// The 16-bit bodies' shared part. Shared memory holds Q [BM][E], then per
// stage K [BN][E] and V [BN][E], rows of E 16-bit values split into 16-byte
// chunks stored at chunk ^ (row % 8), so the 8 rows an ldmatrix reads hit 8
// different banks. Fragments follow the PTX ISA's m16n8k16 layouts: a thread
// holds rows lane/4 and lane/4 + 8 of its warp's 16, columns 2 * (lane % 4) +
// {0, 1} of each 8-column block.
constexpr const char* kTensorCoreCommon = R"(
constexpr int kChunks = kE / 8;
constexpr int kQBytes = kBM * kE * 2, kTileBytes = kBN * kE * 2;

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile of ROWS rows:
// the tile is stored as kE / 64 column blocks of [ROWS][64 values] (128-byte
// rows), a chunk at chunk ^ (row % 8) within its row. That is the 128-byte
// swizzle wgmma reads (from a 1024-byte aligned base), and the 8 rows an
// ldmatrix reads hit 8 different banks.
template <int ROWS>
__device__ __forceinline__ fb_u32 fb_swz(int row, int chunk) {
  return (chunk >> 3) * (ROWS * 128) + row * 128 + (((chunk & 7) ^ (row & 7)) << 4);
}
// Two floats as one register of 16-bit values, `lo` in the low half.
__device__ __forceinline__ fb_u32 fb_pack(float lo, float hi) {
  fb_u32 r;
  asm("cvt.rn." FB_T "x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// Rows [row0, row0 + ROWS) of a [rows, E] operand (row stride `stride`) into
// shared memory at `dst`, swizzled; rows from `rows` on are zeros, so they
// add nothing (their scores are masked, their values multiply zeros).
template <int ROWS>
__device__ __forceinline__ void fb_load_tile(fb_u32 dst, const fb_u16* src, long long stride, int row0, int rows,
                                             int aligned) {
#pragma unroll
  for (int it = 0; it < (ROWS * kChunks + kThreads - 1) / kThreads; ++it) {
    const int c = it * kThreads + threadIdx.x, r = c / kChunks, ch = c % kChunks;
    if (ROWS * kChunks % kThreads != 0 && c >= ROWS * kChunks) break;  // 3 warpgroups: the last step is partial
    const bool in = row0 + r < rows;
    const fb_u16* g = src + (in ? (long long)(row0 + r) * stride + ch * 8 : 0);
    if (aligned) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst + fb_swz<ROWS>(r, ch)), "l"(g),
                   "r"(in ? 16 : 0) : "memory");
    } else {
      fb_u32 w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) w[e] = in ? (fb_u32)g[2 * e] | ((fb_u32)g[2 * e + 1] << 16) : 0u;
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" :: "r"(dst + fb_swz<ROWS>(r, ch)), "r"(w[0]), "r"(w[1]),
                   "r"(w[2]), "r"(w[3]) : "memory");
    }
  }
}

// A bool mask's bytes over the warp's 16 rows from trow and kBN keys from
// n0, as many as the lane checks, 16 at a time (fb_mask_keeps): loaded ahead
// of the scores they decide, so the loads overlap the GEMM. Not read (and
// not whole) where the mask's rows are not whole 16-byte chunks or the tile
// passes the last key; rows past p.l count as kept.
constexpr int kMaskLoads = (kBN + 31) / 32;  // the warp's 16 x kBN bytes in 16-byte loads, a lane's share
struct FbMaskTile {
  uint4 w[kMaskLoads];
  bool read;
};
__device__ __forceinline__ FbMaskTile fb_mask_load(const FbAttnParams& p, long long mo, int trow, int n0, int lane) {
  FbMaskTile t;
  const unsigned char* m = (const unsigned char*)p.mask + mo + n0;
  t.read = kMask == 2 && n0 + kBN <= p.s && p.m_col == 1 && p.m_row % 16 == 0 && ((unsigned long long)m) % 16 == 0;
#pragma unroll
  for (int i = 0; i < kMaskLoads; ++i) {
    const int c = i * 32 + lane, row = trow + c / (kBN / 16);
    t.w[i] = t.read && c < kBN && row < p.l ? __ldg((const uint4*)(m + (long long)row * p.m_row + 16 * (c % (kBN / 16))))
                                            : make_uint4(~0u, ~0u, ~0u, ~0u);
  }
  return t;
}
// Whether the mask keeps every key of the tile fb_mask_load read: then its
// scores need no mask (a tril mask's tiles below the diagonal, most of them).
__device__ __forceinline__ bool fb_mask_keeps(const FbMaskTile& t) {
  fb_u32 zero = 0u;  // a zero byte borrows its 0x80 bit
#pragma unroll
  for (int i = 0; i < kMaskLoads; ++i) {
    const uint4 w = t.w[i];
    zero |= ((w.x - 0x01010101u) & ~w.x) | ((w.y - 0x01010101u) & ~w.y) | ((w.z - 0x01010101u) & ~w.z) |
            ((w.w - 0x01010101u) & ~w.w);
  }
  return __all_sync(0xffffffffu, t.read && (zero & 0x80808080u) == 0u);
}

// One 16-row tile's scores s (the m16n8k16 accumulator layout: a thread holds
// rows lane/4 and lane/4 + 8, columns 2 * (lane % 4) + {0, 1} of each of NB
// 8-key blocks, keys from n0, rows from trow) masked and exponentiated
// against the running row max m (log2 units); the running sums l are
// rescaled to the new max, and corr is what the output accumulator must be
// multiplied by (fb_rescale: the caller does, once no mma writes it). A
// positive scale folds into exp2's argument, one FFMA a score (max(c s) = c
// max(s)): the softmax, not the tensor cores, bounds head dim 64. A float
// mask adds to the scaled scores, so it scales them first. A bool mask's
// scores are masked one by one only in tiles it does not keep `whole`
// (fb_mask_keeps).
//
// Only the tiles that need a mask pay for it, behind one branch (uniform over
// the warp) around the whole tile: a test per score inside the loop became
// selects that every tile issued (4-6 instructions a score, PTX of the
// causal head dim 64 kernel, against ~5 for the softmax itself). The last
// key a row sees (causal: its own, else the last) is one compare a score.
template <int NB>
__device__ __forceinline__ void fb_softmax_tile(float (&s)[NB][4], float (&m)[2], float (&l)[2], float (&corr)[2],
                                                const FbAttnParams& p, long long mo, int n0, int trow, int lane,
                                                bool whole) {
  constexpr bool kFold = kPositiveScale && kMask != 3;
  const float kNegInf = __int_as_float(0xff800000);
  const bool edge = n0 + NB * 8 > p.s, diagonal = kMask == 1 && n0 + NB * 8 - 1 > trow;
  if (!kFold) {
#pragma unroll
    for (int n = 0; n < NB; ++n) s[n][0] *= p.scale_log2, s[n][1] *= p.scale_log2, s[n][2] *= p.scale_log2, s[n][3] *= p.scale_log2;
  }
  if (kMask >= 2) {
    if (kMask == 3 || edge || !whole) {
#pragma unroll
      for (int n = 0; n < NB; ++n) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          s[n][c] = fb_masked(s[n][c], p, mo, trow + (lane >> 2) + (c >> 1) * 8, n0 + n * 8 + (lane & 3) * 2 + (c & 1));
        }
      }
    }
  } else if (edge || diagonal) {
    // The thread's keys are n0 + 2 (lane % 4) + {8 n, 8 n + 1}: each row's
    // last key seen, less that base, against the constant offsets.
    const int col0 = n0 + (lane & 3) * 2;
    int last[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) last[h] = (kMask == 1 ? min(trow + (lane >> 2) + h * 8, p.s - 1) : p.s - 1) - col0;
#pragma unroll
    for (int n = 0; n < NB; ++n) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        if (n * 8 + (c & 1) > last[c >> 1]) s[n][c] = kNegInf;
      }
    }
  }
  // Online softmax over the thread's two rows (a quad shares a row).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float top = kNegInf;
#pragma unroll
    for (int n = 0; n < NB; ++n) top = fmaxf(top, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));
    top = fmaxf(m[h], kFold ? top * p.scale_log2 : top);  // -inf stays -inf (the scale is positive)
    const float base = top == kNegInf ? 0.f : top;  // no key yet: keep exp2(-inf) = 0, not NaN
    corr[h] = fb_exp2(m[h] - base);
    m[h] = top;
    float sum = 0.f;
#pragma unroll
    for (int n = 0; n < NB; ++n) {
#pragma unroll
      for (int c = 2 * h; c < 2 * h + 2; ++c) {
        s[n][c] = fb_exp2(kFold ? fmaf(s[n][c], p.scale_log2, -base) : s[n][c] - base);
        sum += s[n][c];
      }
    }
    l[h] = l[h] * corr[h] + sum;
  }
}
__device__ __forceinline__ void fb_rescale(float (&acc)[kE / 8][4], const float (&corr)[2]) {
#pragma unroll
  for (int e = 0; e < kE / 8; ++e) acc[e][0] *= corr[0], acc[e][1] *= corr[0], acc[e][2] *= corr[1], acc[e][3] *= corr[1];
}

// P's 16 keys from t * 16 as an m16n8k16 A fragment (the same layout wgmma
// takes from registers).
template <int NB>
__device__ __forceinline__ void fb_p_fragment(fb_u32 (&a)[4], const float (&s)[NB][4], int t) {
  a[0] = fb_pack(s[2 * t][0], s[2 * t][1]), a[1] = fb_pack(s[2 * t][2], s[2 * t][3]);
  a[2] = fb_pack(s[2 * t + 1][0], s[2 * t + 1][1]), a[3] = fb_pack(s[2 * t + 1][2], s[2 * t + 1][3]);
}

// out rows trow + lane/4 (+ 8) = acc / l. A row with no key taking part has
// l = 0: 0 * inf is NaN, as PyTorch's math path.
__device__ __forceinline__ void fb_store_tile(const float (&acc)[kE / 8][4], const float (&l)[2], fb_u16* o,
                                              long long o_row, int trow, int rows, int lane) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = l[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = 1.f / sum;
    const int row = trow + (lane >> 2) + h * 8;
    if (row >= rows || (kAlignEnd && row < 0)) continue;
#pragma unroll
    for (int e = 0; e < kE / 8; ++e) {
      *(fb_u32*)(o + row * o_row + e * 8 + (lane & 3) * 2) = fb_pack(acc[e][2 * h] * inv, acc[e][2 * h + 1] * inv);
    }
  }
}
)";

// The mma.sync kernel (every architecture from sm_80): warps of 16 * kMT
// query rows; fragments through ldmatrix.
constexpr const char* kMmaSyncBody = R"(
__device__ __forceinline__ void fb_ldsm(fb_u32* r, fb_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void fb_ldsm_t(fb_u32* r, fb_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void fb_mma(float* d, const fb_u32* a, fb_u32 b0, fb_u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." FB_T "." FB_T ".f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

extern "C" __global__ void __launch_bounds__(kThreads, kMinBlocks) FB_NAME(const FbAttnParams p) {
  extern __shared__ __align__(128) unsigned char fb_shared[];
  FbBlock blk;
  if (!fb_block(p, fb_launch_item(), blk)) return;
  const auto [mo, m0, tiles, q, k, v] = blk;
  const fb_u32 sq = fb_smem(fb_shared);
  fb_load_tile<kBM>(sq, q, p.q_row, m0, p.l, p.aligned);
  fb_load_tile<kBN>(sq + kQBytes, k, p.k_row, 0, p.s, p.aligned);
  fb_load_tile<kBN>(sq + kQBytes + kTileBytes, v, p.v_row, 0, p.s, p.aligned);
  asm volatile("cp.async.commit_group;" ::: "memory");
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  __syncthreads();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wrow = m0 + warp * 16 * kMT;  // the warp's first query row; it owns kMT tiles of 16
  // One m-tile a warp: Q's fragments stay in registers; two: read from shared
  // memory per step, so each K/V fragment feeds two tiles' mma.
  fb_u32 qf[kMT == 1 ? kE / 16 : 1][4];
  if (kMT == 1) {
#pragma unroll
    for (int kk = 0; kk < (kMT == 1 ? kE / 16 : 0); ++kk) {
      const int mi = lane >> 3;
      fb_ldsm(qf[kk], sq + fb_swz<kBM>(warp * 16 + (mi & 1) * 8 + (lane & 7), 2 * kk + (mi >> 1)));
    }
  }
  float acc[kMT][kE / 8][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int e = 0; e < kE / 8; ++e) acc[mt][e][0] = acc[mt][e][1] = acc[mt][e][2] = acc[mt][e][3] = 0.f;
  float mrow[kMT][2], lrow[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) mrow[mt][0] = mrow[mt][1] = __int_as_float(0xff800000), lrow[mt][0] = lrow[mt][1] = 0.f;

  for (int j = 0; j < tiles; ++j) {
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();  // tile j is in; every warp is done with tile j - 1's stage
    if (j + 1 < tiles) {
      const fb_u32 next = sq + kQBytes + ((j + 1) & 1) * 2 * kTileBytes;
      fb_load_tile<kBN>(next, k, p.k_row, (j + 1) * kBN, p.s, p.aligned);
      fb_load_tile<kBN>(next + kTileBytes, v, p.v_row, (j + 1) * kBN, p.s, p.aligned);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    const int n0 = j * kBN;
    if (kMask == 1 && n0 > wrow + 16 * kMT - 1) continue;  // every key of the tile is after the warp's rows
    const fb_u32 ks = sq + kQBytes + (j & 1) * 2 * kTileBytes, vs = ks + kTileBytes;

    float s[kMT][kBN / 8][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int n = 0; n < kBN / 8; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kE / 16; ++kk) {
      const int mi = lane >> 3;
      fb_u32 qa[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if (kMT == 1) {
          qa[mt][0] = qf[kMT == 1 ? kk : 0][0], qa[mt][1] = qf[kMT == 1 ? kk : 0][1];
          qa[mt][2] = qf[kMT == 1 ? kk : 0][2], qa[mt][3] = qf[kMT == 1 ? kk : 0][3];
        } else {
          fb_ldsm(qa[mt], sq + fb_swz<kBM>((warp * kMT + mt) * 16 + (mi & 1) * 8 + (lane & 7), 2 * kk + (mi >> 1)));
        }
      }
#pragma unroll
      for (int jp = 0; jp < kBN / 16; ++jp) {
        fb_u32 bf[4];
        fb_ldsm(bf, ks + fb_swz<kBN>(jp * 16 + (mi >> 1) * 8 + (lane & 7), 2 * kk + (mi & 1)));
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          fb_mma(s[mt][2 * jp], qa[mt], bf[0], bf[1]);
          fb_mma(s[mt][2 * jp + 1], qa[mt], bf[2], bf[3]);
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      float corr[2];
      const bool whole = kMask == 2 && fb_mask_keeps(fb_mask_load(p, mo, wrow + mt * 16, n0, lane));
      fb_softmax_tile(s[mt], mrow[mt], lrow[mt], corr, p, mo, n0, wrow + mt * 16, lane, whole);
      fb_rescale(acc[mt], corr);
    }
    // O += P V: P's accumulator layout is the A operand's, 16 keys per step.
#pragma unroll
    for (int t = 0; t < kBN / 16; ++t) {
      fb_u32 a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) fb_p_fragment(a[mt], s[mt], t);
#pragma unroll
      for (int pe = 0; pe < kE / 16; ++pe) {
        fb_u32 bf[4];
        const int mi = lane >> 3;
        fb_ldsm_t(bf, vs + fb_swz<kBN>(t * 16 + (mi & 1) * 8 + (lane & 7), 2 * pe + (mi >> 1)));
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          fb_mma(acc[mt][2 * pe], a[mt], bf[0], bf[1]);
          fb_mma(acc[mt][2 * pe + 1], a[mt], bf[2], bf[3]);
        }
      }
    }
  }
  fb_elem* const o = fb_out(p, fb_launch_item());
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) fb_store_tile(acc[mt], lrow[mt], o, p.o_row, wrow + mt * 16, p.l, lane);
}
)";

}  // namespace

std::string FlashAttentionSource(const FlashConfig& c) {
  const bool bf16 = c.dtype == DType::kBFloat16, f32 = c.dtype == DType::kFloat32;
  const bool causal = c.mask == backend::AttentionMask::kCausal;
  std::string out = absl::StrCat(
      "// fusebox flash attention (backend/cuda/flash_attention.h): ", DTypeName(c.dtype), ", E ", c.head_dim, ", ",
      backend::AttentionMaskName(c.mask), ", ", c.block_m(), " x ", c.block_n, " tiles, ",
      f32       ? absl::StrCat(c.warps, " warps (f32 FMA)")
      : c.warp_specialized ? absl::StrCat("a TMA producer warpgroup and ", c.consumers(), " wgmma consumers")
      : c.wgmma            ? absl::StrCat(c.warps / 4, " warpgroups (wgmma)")
                : absl::StrCat(c.warps, " warps of ", 16 * c.m_tiles, " rows"),
      "\n#define FB_NAME ", c.KernelName(), "\nconstexpr int kE = ", c.head_dim, ", kBN = ", c.block_n,
      ", kBM = ", c.block_m(), ", kThreads = ", c.threads(), ", kMask = ", static_cast<int>(c.mask),
      ", kMinBlocks = ", c.min_blocks, ";\nconstexpr bool kPositiveScale = ", c.positive_scale ? "true" : "false",
      ", kLastRowsFirst = ", causal ? "true" : "false", ", kPersistent = ", c.persistent ? "true" : "false",
      ", kAlignEnd = ", c.align_end ? "true" : "false",
      ";\nconstexpr int kCausalOrder = ", c.causal_order, ";\ntypedef ",
      f32 ? "float" : "unsigned short",
      " fb_elem;\nconstexpr bool kBF16 = ", bf16 ? "true" : "false", ";\n", kBlockCommon);
  if (f32) return absl::StrCat(out, FlashF32Body());
  absl::StrAppend(&out, "#define FB_T \"", bf16 ? "bf16" : "f16", "\"\n", kTensorCoreCommon);
  if (!c.wgmma) return absl::StrCat(out, "constexpr int kMT = ", c.m_tiles, ";\n", kMmaSyncBody);
  absl::StrAppend(&out, "constexpr int kStages = ", c.stages(), ";\n");
  if (c.warp_specialized) {
    absl::StrAppend(&out, "constexpr int kConsumers = ", c.consumers(), ", kProducerRegisters = ",
                    c.producer_registers(), ", kConsumerRegisters = ", c.consumer_registers(), ";\n");
  }
  return absl::StrCat(out, c.warp_specialized ? FlashWarpSpecializedBody(c) : FlashWgmmaBody(c));
}

}  // namespace fusebox::cuda
