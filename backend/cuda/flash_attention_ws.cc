// The sm_90 warp-specialized body of the flash-attention kernel
// (flash_attention_bodies.h): FlashAttention-3's schedule.
#include "absl/strings/str_cat.h"
#include "backend/cuda/flash_attention_bodies.h"

namespace fusebox::cuda {
namespace {

// 1 + kConsumers warpgroups (3 consumers at head dim 64, 2 at 128:
// WgmmaConfig). The first is the producer: one thread loads Q once and
// then every K and V tile by TMA (cp.async.bulk.tensor, the 128-byte swizzle
// the wgmma descriptors read) into kStages stages, each stage's K and V
// behind their own "full" mbarrier (the copy's bytes complete it) and "empty"
// one (each consumer warp arrives once it is done reading). It then gives
// its registers away (setmaxnreg) to the consumers, warpgroups of 64
// query rows each, which multiply as the wgmma body does (S of tile j + 1
// beside P V of tile j, the softmax overlapping P V) but never wait for one
// another: no __syncthreads in the loop, so a warpgroup's softmax runs while
// another's GEMMs hold the tensor cores (ping-pong: named barriers 1 + c
// hand the issue of the GEMMs from one to the next, so their softmaxes fall
// between the others' GEMMs rather than beside them).
constexpr const char* kWarpSpecializedBody = R"(
// The host's FlashWsParams: the plain parameters, then tensor maps of q, k
// and v (cuTensorMapEncodeTiled: 5 dims, E, rows, three batch coordinates),
// read in place by TMA (the kernel takes them as a __grid_constant__).
struct __align__(128) FbTmap { unsigned long long v[16]; };
struct FbWsParams {
  FbAttnParams a;
  FbTmap tq, tk, tv;
  signed char q_dim[4], k_dim[4], v_dim[4];  // per batch dim: the map coordinate it adds to, -1 none
};
static_assert(sizeof(FbWsParams) == 896, "FbWsParams must match the host's FlashWsParams");
static_assert(kMask == 0 || kMask == 1, "masks take the cp.async kernel: WgmmaConfig");


__device__ __forceinline__ void fb_mbar_init(fb_u32 bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void fb_mbar_expect_tx(fb_u32 bar, fb_u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void fb_mbar_arrive(fb_u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
// Waits until the barrier's phase of parity `parity` has completed.
__device__ __forceinline__ void fb_mbar_wait(fb_u32 bar, int parity) {
  asm volatile("{\n.reg .pred done;\nFB_WAIT:\nmbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra FB_WAIT;\n}" :: "r"(bar), "r"(parity) : "memory");
}
// A consumer warp is done reading a stage (its wgmma waited): lane 0 arrives.
__device__ __forceinline__ void fb_release(fb_u32 bar, int lane) {
  if (lane == 0) fb_mbar_arrive(bar);
}
// Ping-pong: consumer c waits for its turn to issue GEMMs (barrier 1 + c),
// then hands the turn to the next, round the kConsumers (each barrier: 128
// threads wait, 128 arrive).
__device__ __forceinline__ void fb_turn_wait(int c) { asm volatile("bar.sync %0, 256;" :: "r"(1 + c) : "memory"); }
__device__ __forceinline__ void fb_turn_give(int c) {
  asm volatile("bar.arrive %0, 256;" :: "r"(1 + (c + 1) % kConsumers) : "memory");
}

// ROWS rows of a tensor map from row0 into `dst` (kE / 64 boxes of [ROWS][64
// values], the column blocks fb_swz lays out), completing `bar`'s bytes.
template <int ROWS>
__device__ __forceinline__ void fb_tma_tile(fb_u32 dst, const FbTmap* map, fb_u32 bar, int row0, const int (&c)[3]) {
#pragma unroll
  for (int h = 0; h < kE / 64; ++h) {
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, "
        "%6}], [%7];" :: "r"(dst + h * ROWS * 128), "l"((unsigned long long)map), "r"(h * 64), "r"(row0), "r"(c[0]),
        "r"(c[1]), "r"(c[2]), "r"(bar) : "memory");
  }
}
// The block's batch index as each operand map's three batch coordinates:
// batch dims merged into one map dim count in mixed radix.
__device__ __forceinline__ void fb_add_coord(int (&c)[3], int (&radix)[3], int dim, int i, int n) {
#pragma unroll
  for (int g = 0; g < 3; ++g) {
    if (dim == g) c[g] += i * radix[g], radix[g] *= n;
  }
}

// The items a block takes (fb_block_place): its own (a block per item), or,
// persistent (kPersistent, a block per SM), items one after another from
// p.a.work's counter, so a block's next Q and K/V tiles load while its
// consumers finish the item before and short causal items fill in where
// long ones end. The producer thread takes each item and passes it on in
// fb_next, written before the Q barrier's arrival (its release) that the
// consumers wait on (their acquire); it writes the next only once every
// consumer warp is done with Q (the Q-empty barrier), which they read the
// item before. Past the last item it arrives without Q: the consumers end.
extern "C" __global__ void __launch_bounds__(kThreads, 1) FB_NAME(const __grid_constant__ FbWsParams p) {
  extern __shared__ __align__(1024) unsigned char fb_shared[];
  // Q full; per stage K full, V full, K empty, V empty; Q empty.
  __shared__ __align__(8) unsigned long long fb_bars[2 + 4 * kStages];
  __shared__ long long fb_next;
  if (!kPersistent) {  // blocks past the batches (the grid rounds them up) leave
    FbBlock blk;
    if (!fb_block(p.a, fb_launch_item(), blk)) return;
  }
#define FB_ITEMS (fb_row_tiles(p.a) * p.a.batch)  // read again where needed: a register less through the loop
  const fb_u32 sq = (fb_smem(fb_shared) + 1023) & ~1023u;  // the host asks for 1024 bytes more
  const fb_u32 bars = fb_smem(fb_bars);
#define FB_STAGE(st) (sq + kQBytes + (st) * 2 * kTileBytes)
#define FB_K_FULL(st) (bars + 8 * (1 + (st)))
#define FB_V_FULL(st) (bars + 8 * (1 + kStages + (st)))
#define FB_K_EMPTY(st) (bars + 8 * (1 + 2 * kStages + (st)))
#define FB_V_EMPTY(st) (bars + 8 * (1 + 3 * kStages + (st)))
#define FB_Q_EMPTY (bars + 8 * (1 + 4 * kStages))
  if (threadIdx.x == 0) {
    fb_mbar_init(bars, 1);
#pragma unroll
    for (int st = 0; st < kStages; ++st) {
      fb_mbar_init(FB_K_FULL(st), 1), fb_mbar_init(FB_V_FULL(st), 1);
      fb_mbar_init(FB_K_EMPTY(st), 4 * kConsumers), fb_mbar_init(FB_V_EMPTY(st), 4 * kConsumers);  // their warps
    }
    fb_mbar_init(FB_Q_EMPTY, 4 * kConsumers);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x >> 7, 0), lane = threadIdx.x & 31;

  if (wg == 0) {  // the producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(kProducerRegisters) : "memory");
    if (threadIdx.x == 0) {
      int t = 0;  // K/V tiles loaded, over the items
      long long item = kPersistent ? (long long)blockIdx.x : fb_launch_item();
      for (int k = 0;; ++k) {
        if (kPersistent) {
          if (k > 0) item = gridDim.x + (long long)atomicAdd(p.a.work, 1ull);
          fb_mbar_wait(FB_Q_EMPTY, (k & 1) ^ 1);  // the item before's last S is in
          fb_next = item;
          if (item >= FB_ITEMS) {
            fb_mbar_arrive(bars);
            break;
          }
        }
        FbBlock blk;
        fb_block(p.a, item, blk);
        int cq[3] = {0, 0, 0}, ck[3] = {0, 0, 0}, cv[3] = {0, 0, 0};
        int rq[3] = {1, 1, 1}, rk[3] = {1, 1, 1}, rv[3] = {1, 1, 1};
        // The batch found again rather than kept from fb_block: held, it
        // spills the persistent producer's 32 registers at head dim 64.
        long long rest = fb_block_batch(p.a, item);
#pragma unroll
        for (int d = 3; d >= 0; --d) {
          const int n = (int)p.a.batch_sizes[d], i = (int)(rest % n);
          rest /= n;
          fb_add_coord(cq, rq, p.q_dim[d], i, n), fb_add_coord(ck, rk, p.k_dim[d], i, n);
          fb_add_coord(cv, rv, p.v_dim[d], i, n);
        }
        fb_mbar_expect_tx(bars, kQBytes);
        fb_tma_tile<kBM>(sq, &p.tq, bars, blk.m0, cq);
        for (int j = 0; j < blk.tiles; ++j, ++t) {
          // Round t / kStages of a stage waits for the consumers' release of
          // the round before (the first round's wait passes at once).
          const int st = t % kStages, parity = ((t / kStages) & 1) ^ 1;
          fb_mbar_wait(FB_K_EMPTY(st), parity);
          fb_mbar_expect_tx(FB_K_FULL(st), kTileBytes);
          fb_tma_tile<kBN>(FB_STAGE(st), &p.tk, FB_K_FULL(st), j * kBN, ck);
          fb_mbar_wait(FB_V_EMPTY(st), parity);
          fb_mbar_expect_tx(FB_V_FULL(st), kTileBytes);
          fb_tma_tile<kBN>(FB_STAGE(st) + kTileBytes, &p.tv, FB_V_FULL(st), j * kBN, cv);
        }
        if (!kPersistent) break;
      }
      // The last block done zeroes the counters for the next launch (stream
      // order: launches of one kernel never overlap).
      if (kPersistent) {
        __threadfence();
        if (atomicAdd(p.a.work + 1, 1ull) == gridDim.x - 1) p.a.work[0] = 0, p.a.work[1] = 0;
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(kConsumerRegisters) : "memory");
  const int c = wg - 1;  // the consumer: query rows m0 + 64 c on
  const int wrow0 = c * 64 + ((threadIdx.x >> 5) & 3) * 16;  // the warp's first row in the block
  const fb_u32 qs = sq + c * 64 * 128;
  float s[kBN / 8][4];
  fb_u32 pf[kBN / 16][4];
  int t = 0;  // K/V tiles taken, over the items
  for (int k = 0;; ++k) {
    fb_mbar_wait(bars, k & 1);  // Q, and with it the item
    const long long item = kPersistent ? *(volatile long long*)&fb_next : fb_launch_item();
    if (kPersistent && item >= FB_ITEMS) break;
    FbBlock blk;
    fb_block(p.a, item, blk);
    const long long mo = blk.mo;
    const int tiles = blk.tiles, wrow = blk.m0 + wrow0;
    float acc[kE / 8][4];
#pragma unroll
    for (int e = 0; e < kE / 8; ++e) acc[e][0] = acc[e][1] = acc[e][2] = acc[e][3] = 0.f;
    float mrow[2] = {__int_as_float(0xff800000), __int_as_float(0xff800000)}, lrow[2] = {0.f, 0.f};
    // Every consumer takes its turn at every tile, so the turns pair up:
    // consumer 0 starts (the last gives it the first turn), and the last
    // gives no turn after its last GEMM (none would take it). The causal
    // diagonal masks what the first consumers' rows do not see. (Skipping
    // those GEMMs, passing the turn, measured slower: bench/experiments/
    // flash_causal_sections_skip.patch.)
    if (c == kConsumers - 1) fb_turn_give(c);
    {  // tile 0's P
      fb_mbar_wait(FB_K_FULL(t % kStages), (t / kStages) & 1);
      fb_turn_wait(c);
      fb_start_qk(s, qs, FB_STAGE(t % kStages));
      fb_turn_give(c);
      fb_wgmma_wait<0>();
      fb_fence_regs(s);
      fb_release(FB_K_EMPTY(t % kStages), lane);
      if (kPersistent && tiles == 1) fb_release(FB_Q_EMPTY, lane);
      float corr[2];
      fb_softmax_tile(s, mrow, lrow, corr, p.a, mo, 0, wrow, lane, false);
      fb_pack_p(pf, s);
    }
    for (int j = 0; j < tiles; ++j) {
      const int u = t + j, st = u % kStages, parity = (u / kStages) & 1;
      if (j + 1 < tiles) {
        const int next = (u + 1) % kStages;
        fb_mbar_wait(FB_K_FULL(next), ((u + 1) / kStages) & 1);
        fb_mbar_wait(FB_V_FULL(st), parity);
        fb_turn_wait(c);
        fb_start_qk_pv(s, qs, FB_STAGE(next), acc, pf, FB_STAGE(st) + kTileBytes);
        fb_turn_give(c);
        fb_wgmma_wait<1>();  // S of tile j + 1 is in; P V may still run
        fb_fence_regs(s);
        fb_release(FB_K_EMPTY(next), lane);
        if (kPersistent && j + 2 == tiles) fb_release(FB_Q_EMPTY, lane);  // the item's last S: Q is free
        float corr[2];
        fb_softmax_tile(s, mrow, lrow, corr, p.a, mo, (j + 1) * kBN, wrow, lane, false);
        fb_wgmma_wait<0>();
        fb_release(FB_V_EMPTY(st), lane);
        fb_next_p(acc, pf, s, corr);
      } else {  // the last tile: P V alone
        fb_mbar_wait(FB_V_FULL(st), parity);
        fb_turn_wait(c);
        fb_start_pv(acc, pf, FB_STAGE(st) + kTileBytes);
        if (c != kConsumers - 1) fb_turn_give(c);
        fb_wgmma_wait<0>();
        fb_fence_regs(acc);
        if (kPersistent) fb_release(FB_V_EMPTY(st), lane);
      }
    }
    fb_store_tile(acc, lrow, fb_out(p.a, item), p.a.o_row, wrow, p.a.l, lane);
    t += tiles;
    if (!kPersistent) break;
  }
#undef FB_STAGE
#undef FB_K_FULL
#undef FB_V_FULL
#undef FB_K_EMPTY
#undef FB_V_EMPTY
#undef FB_Q_EMPTY
#undef FB_ITEMS
}
)";

}  // namespace

std::string FlashWarpSpecializedBody(const FlashConfig& config) {
  return FlashWgmmaCommon(config) + kWarpSpecializedBody;
}

}  // namespace fusebox::cuda
