// The CUDA text of the flash-attention kernel (flash_attention.h): one
// template body, specialized by the constants at its top. Kept apart from the
// host side so the kernel reads as one piece.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "backend/cuda/flash_attention.h"

namespace fusebox::cuda {
namespace {

// The body. Shared memory holds Q [BM][E], then per stage K [BN][E] and
// V [BN][E], rows of E 16-bit values split into 16-byte chunks stored at
// chunk ^ (row % 8), so the 8 rows an ldmatrix reads hit 8 different banks.
// Fragments follow the PTX ISA's m16n8k16 layouts: a thread holds rows
// lane/4 and lane/4 + 8 of its warp's 16, columns 2 * (lane % 4) + {0, 1} of
// each 8-column block.
constexpr const char* kBody = R"(
typedef unsigned int fb_u32;
typedef unsigned short fb_u16;
constexpr int kChunks = kE / 8, kRowBytes = kE * 2, kThreads = kWarps * 32, kBM = kWarps * 16 * kMT;
constexpr int kQBytes = kBM * kRowBytes, kTileBytes = kBN * kRowBytes;
static_assert(kBM * kChunks % kThreads == 0 && kBN * kChunks % kThreads == 0, "tiles split evenly over the threads");

// Mirrors the host's FlashParams (flash_attention.cc), field by field.
struct FbAttnParams {
  const fb_u16* q; const fb_u16* k; const fb_u16* v; const void* mask; fb_u16* o;
  long long q_batch[4], k_batch[4], v_batch[4], m_batch[4];
  long long q_row, k_row, v_row, m_row, m_col;
  long long batch_sizes[4];
  long long batch;
  int l, s;
  float scale_log2;  // scale * log2(e): scores go to exp2 in log2 units
  int aligned;       // every row 16-byte aligned: cp.async, else plain loads
};

__device__ __forceinline__ fb_u32 fb_smem(const void* p) {
  unsigned long long a;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
  return (fb_u32)a;
}
__device__ __forceinline__ fb_u32 fb_swz(int row, int chunk) { return row * kRowBytes + ((chunk ^ (row & 7)) << 4); }
__device__ __forceinline__ float fb_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// Two floats as one register of 16-bit values, `lo` in the low half.
__device__ __forceinline__ fb_u32 fb_pack(float lo, float hi) {
  fb_u32 r;
  asm("cvt.rn." FB_T "x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ float fb_to_f32(fb_u16 h) {
  float f;
  if (kBF16) asm("mov.b32 %0, %1;" : "=f"(f) : "r"(((fb_u32)h) << 16));
  else asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
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

// Rows [row0, row0 + ROWS) of a [rows, E] operand (row stride `stride`) into
// shared memory at `dst`, swizzled; rows from `rows` on are zeros, so they
// add nothing (their scores are masked, their values multiply zeros).
template <int ROWS>
__device__ __forceinline__ void fb_load_tile(fb_u32 dst, const fb_u16* src, long long stride, int row0, int rows,
                                             int aligned) {
#pragma unroll
  for (int it = 0; it < ROWS * kChunks / kThreads; ++it) {
    const int c = it * kThreads + threadIdx.x, r = c / kChunks, ch = c % kChunks;
    const bool in = row0 + r < rows;
    const fb_u16* g = src + (in ? (long long)(row0 + r) * stride + ch * 8 : 0);
    if (aligned) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst + fb_swz(r, ch)), "l"(g),
                   "r"(in ? 16 : 0) : "memory");
    } else {
      fb_u32 w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) w[e] = in ? (fb_u32)g[2 * e] | ((fb_u32)g[2 * e + 1] << 16) : 0u;
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" :: "r"(dst + fb_swz(r, ch)), "r"(w[0]), "r"(w[1]),
                   "r"(w[2]), "r"(w[3]) : "memory");
    }
  }
}

extern "C" __global__ void __launch_bounds__(kThreads, kMinBlocks) FB_NAME(const FbAttnParams p) {
  extern __shared__ __align__(128) unsigned char fb_shared[];
  const long long b = (long long)blockIdx.z * gridDim.y + blockIdx.y;
  if (b >= p.batch) return;
  // Causal: the blocks of the last rows (the most keys) start first.
  const int m0 = (kMask == 1 ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * kBM;
  long long qo = 0, ko = 0, vo = 0, mo = 0, rest = b;
#pragma unroll
  for (int d = 3; d >= 0; --d) {
    const long long i = rest % p.batch_sizes[d];
    rest /= p.batch_sizes[d];
    qo += i * p.q_batch[d], ko += i * p.k_batch[d], vo += i * p.v_batch[d], mo += i * p.m_batch[d];
  }
  const fb_u16 *q = p.q + qo, *k = p.k + ko, *v = p.v + vo;
  const fb_u32 sq = fb_smem(fb_shared);
  const int n_end = kMask == 1 ? min(p.s, m0 + kBM) : p.s;  // causal: keys past the block's last row never count
  const int tiles = (n_end + kBN - 1) / kBN;
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
      fb_ldsm(qf[kk], sq + fb_swz(warp * 16 + (mi & 1) * 8 + (lane & 7), 2 * kk + (mi >> 1)));
    }
  }
  float acc[kMT][kE / 8][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int e = 0; e < kE / 8; ++e) acc[mt][e][0] = acc[mt][e][1] = acc[mt][e][2] = acc[mt][e][3] = 0.f;
  const float kNegInf = __int_as_float(0xff800000);
  float mrow[kMT][2], lrow[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) mrow[mt][0] = mrow[mt][1] = kNegInf, lrow[mt][0] = lrow[mt][1] = 0.f;

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
          fb_ldsm(qa[mt], sq + fb_swz((warp * kMT + mt) * 16 + (mi & 1) * 8 + (lane & 7), 2 * kk + (mi >> 1)));
        }
      }
#pragma unroll
      for (int jp = 0; jp < kBN / 16; ++jp) {
        fb_u32 bf[4];
        fb_ldsm(bf, ks + fb_swz(jp * 16 + (mi >> 1) * 8 + (lane & 7), 2 * kk + (mi & 1)));
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          fb_mma(s[mt][2 * jp], qa[mt], bf[0], bf[1]);
          fb_mma(s[mt][2 * jp + 1], qa[mt], bf[2], bf[3]);
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      const int trow = wrow + mt * 16;  // this m-tile's first row
      // Scores in log2 units; masked ones -inf.
      const bool edge = n0 + kBN > p.s, diagonal = kMask == 1 && n0 + kBN - 1 > trow;
#pragma unroll
      for (int n = 0; n < kBN / 8; ++n) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          float x = s[mt][n][c] * p.scale_log2;
          if (kMask >= 2 || edge || diagonal) {
            const int col = n0 + n * 8 + (lane & 3) * 2 + (c & 1), row = trow + (lane >> 2) + (c >> 1) * 8;
            const long long at = mo + (long long)row * p.m_row + (long long)col * p.m_col;
            if (col >= p.s || (kMask == 1 && col > row)) {
              x = kNegInf;
            } else if (kMask == 2 && row < p.l) {
              if (!((const unsigned char*)p.mask)[at]) x = kNegInf;
            } else if (kMask == 3 && row < p.l) {
              x += fb_to_f32(((const fb_u16*)p.mask)[at]) * 1.4426950408889634f;
            }
          }
          s[mt][n][c] = x;
        }
      }
      // Online softmax over the thread's two rows of the tile (a quad shares a row).
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float top = mrow[mt][h];
#pragma unroll
        for (int n = 0; n < kBN / 8; ++n) top = fmaxf(top, fmaxf(s[mt][n][2 * h], s[mt][n][2 * h + 1]));
        top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
        top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));
        const float base = top == kNegInf ? 0.f : top;  // no key yet: keep exp2(-inf) = 0, not NaN
        const float corr = fb_exp2(mrow[mt][h] - base);
        mrow[mt][h] = top;
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < kBN / 8; ++n) {
          s[mt][n][2 * h] = fb_exp2(s[mt][n][2 * h] - base);
          s[mt][n][2 * h + 1] = fb_exp2(s[mt][n][2 * h + 1] - base);
          sum += s[mt][n][2 * h] + s[mt][n][2 * h + 1];
        }
        lrow[mt][h] = lrow[mt][h] * corr + sum;
#pragma unroll
        for (int e = 0; e < kE / 8; ++e) acc[mt][e][2 * h] *= corr, acc[mt][e][2 * h + 1] *= corr;
      }
    }
    // O += P V: P's accumulator layout is the A operand's, 16 keys per step.
#pragma unroll
    for (int t = 0; t < kBN / 16; ++t) {
      fb_u32 a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        a[mt][0] = fb_pack(s[mt][2 * t][0], s[mt][2 * t][1]), a[mt][1] = fb_pack(s[mt][2 * t][2], s[mt][2 * t][3]);
        a[mt][2] = fb_pack(s[mt][2 * t + 1][0], s[mt][2 * t + 1][1]);
        a[mt][3] = fb_pack(s[mt][2 * t + 1][2], s[mt][2 * t + 1][3]);
      }
#pragma unroll
      for (int pe = 0; pe < kE / 16; ++pe) {
        fb_u32 bf[4];
        const int mi = lane >> 3;
        fb_ldsm_t(bf, vs + fb_swz(t * 16 + (mi & 1) * 8 + (lane & 7), 2 * pe + (mi >> 1)));
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          fb_mma(acc[mt][2 * pe], a[mt], bf[0], bf[1]);
          fb_mma(acc[mt][2 * pe + 1], a[mt], bf[2], bf[3]);
        }
      }
    }
  }
  // A row with no key taking part has l = 0: 0 * inf is NaN, as PyTorch's math path.
  fb_u16* o = p.o + b * p.l * kE;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = lrow[mt][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = 1.f / l;
      const int row = wrow + mt * 16 + (lane >> 2) + h * 8;
      if (row >= p.l) continue;
#pragma unroll
      for (int e = 0; e < kE / 8; ++e) {
        *(fb_u32*)(o + (long long)row * kE + e * 8 + (lane & 3) * 2) =
            fb_pack(acc[mt][e][2 * h] * inv, acc[mt][e][2 * h + 1] * inv);
      }
    }
  }
}
)";

}  // namespace

std::string FlashAttentionSource(const FlashConfig& c) {
  const bool bf16 = c.dtype == DType::kBFloat16;
  return absl::StrCat("// fusebox flash attention (backend/cuda/flash_attention.h): ", DTypeName(c.dtype), ", E ",
                      c.head_dim, ", ", backend::AttentionMaskName(c.mask), ", ", c.block_m(), " x ", c.block_n,
                      " tiles, ", c.warps, " warps of ", 16 * c.m_tiles, " rows\n#define FB_T \"", bf16 ? "bf16" : "f16",
                      "\"\n#define FB_NAME ", c.KernelName(), "\nconstexpr int kE = ", c.head_dim, ", kBN = ", c.block_n,
                      ", kWarps = ", c.warps, ", kMask = ", static_cast<int>(c.mask), ", kMinBlocks = ", c.min_blocks,
                      ", kMT = ", c.m_tiles, ";\nconstexpr bool kBF16 = ", bf16 ? "true" : "false", ";\n", kBody);
}

}  // namespace fusebox::cuda
