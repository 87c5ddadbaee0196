// A/B experiment (not part of the build): the two issue-6 row workloads still
// under their goals, layer_norm 16384 x 4096 (4100 GB/s) and softmax 32768 x
// 1024 (4000), with the rows brought on chip by the Hopper bulk copy
// (cp.async.bulk, completed on an mbarrier) into a ring of shared-memory
// stages, several rows ahead of the one being reduced, against fusebox's
// register layouts. The question: do loads that keep flowing while a block
// reduces (no thread holds them) close the gap to Inductor (layer_norm 0.1306
// ms in the same bench)? Method of timing.cuh (zero 256 MB, events, median).
//   nvcc -O3 -std=c++17 -arch=sm_90a bench/experiments/rows_tma.cu -o rows_tma
#include <cuda_runtime.h>

#include "timing.cuh"

#include <cmath>
#include <cstdio>
#include <vector>

__device__ __forceinline__ float Sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

template <typename F>
__device__ __forceinline__ float WarpReduce(float v, F f) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Every thread gets the block's result; `slot` is this call site's own
// shared array, so only the write-then-read barrier is needed per use after
// the first (the caller's next use of the same slot is a row later, past
// other barriers).
template <int T, typename F>
__device__ __forceinline__ float BlockReduce(float v, F f, float* slot) {
  v = WarpReduce(v, f);
  if ((threadIdx.x & 31) == 0) slot[threadIdx.x >> 5] = v;
  __syncthreads();
  v = slot[threadIdx.x & (T / 32 - 1)];
  if (T / 32 < 32) {
#pragma unroll
    for (int o = T / 64; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
  } else {
    v = WarpReduce(v, f);
  }
  return v;
}

// ---- bulk-copy helpers (PTX ISA 8.0, sm_90) ----
__device__ __forceinline__ unsigned Smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void BarInit(unsigned long long* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(Smem(bar)));
}
__device__ __forceinline__ void BarFenceInit() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
// Thread 0: the next `bytes` land at `dst`, completing `bar`'s current phase.
__device__ __forceinline__ void BulkLoad(void* dst, const void* src, unsigned bytes, unsigned long long* bar,
                                         unsigned long long policy) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(Smem(bar)), "r"(bytes) : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          Smem(dst)),
      "l"(src), "r"(bytes), "r"(Smem(bar)), "l"(policy)
      : "memory");
}
__device__ __forceinline__ void BarWait(unsigned long long* bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}" ::"r"(
          Smem(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ unsigned long long EvictFirst() {
  unsigned long long p;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}

// ---- layer_norm over rows of N: y = (x - mean) * rsqrt(var + eps) * w + b ----
constexpr int kLnRows = 16384, kLnN = 4096;
constexpr float kEps = 1e-5f;

template <int H>
__device__ __forceinline__ float4 LdHint(const float4* p, unsigned long long policy) {
  float4 v;
  if (H == 1) {
    asm volatile("ld.global.L1::evict_last.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p), "l"(policy));
  } else if (H == 2) {
    asm volatile("ld.global.L1::evict_first.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p), "l"(policy));
  } else {
    v = *p;
  }
  return v;
}
__device__ __forceinline__ unsigned long long EvictLast() {
  unsigned long long p;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p;
}
// Subtracts the mean from a thread's V float4 of the row; 1 / std over the block.
template <int T, int V>
__device__ __forceinline__ float CenterAndInvStd(float4 (&v)[V], float mean, float* slot) {
  float ss = 0;
#pragma unroll
  for (int q = 0; q < V; ++q) {
    v[q] = float4{v[q].x - mean, v[q].y - mean, v[q].z - mean, v[q].w - mean};
    ss += (v[q].x * v[q].x + v[q].y * v[q].y) + (v[q].z * v[q].z + v[q].w * v[q].w);
  }
  return rsqrtf(BlockReduce<T>(ss, [](float a, float c) { return a + c; }, slot) / kLnN + kEps);
}

// fusebox's layout today: a block of T threads per row, each holding
// N / 4 / T float4 in registers, two block reductions.
// HINTS: x evict-first, the weights evict-last (Inductor's last pass).
template <int T, bool HINTS = false>
__global__ void __launch_bounds__(T) LnRegisters(const float* __restrict__ x, const float* __restrict__ w,
                                                 const float* __restrict__ b, float* __restrict__ y) {
  constexpr int V = kLnN / 4 / T;
  __shared__ float s1[32], s2[32];
  const float4* row = reinterpret_cast<const float4*>(x) + (long long)blockIdx.x * (kLnN / 4);
  float4 v[V];
#pragma unroll
  for (int q = 0; q < V; ++q) v[q] = LdHint<HINTS ? 2 : 0>(row + threadIdx.x + q * T, EvictFirst());
  float s = 0;
#pragma unroll
  for (int q = 0; q < V; ++q) s += Sum4(v[q]);
  const float mean = BlockReduce<T>(s, [](float a, float c) { return a + c; }, s1) / kLnN;
  const float inv = CenterAndInvStd<T, V>(v, mean, s2);
  float4* out = reinterpret_cast<float4*>(y) + (long long)blockIdx.x * (kLnN / 4);
#pragma unroll
  for (int q = 0; q < V; ++q) {
    const float4 wq = LdHint<HINTS ? 1 : 0>(reinterpret_cast<const float4*>(w) + threadIdx.x + q * T, EvictLast());
    const float4 bq = LdHint<HINTS ? 1 : 0>(reinterpret_cast<const float4*>(b) + threadIdx.x + q * T, EvictLast());
    out[threadIdx.x + q * T] = float4{v[q].x * inv * wq.x + bq.x, v[q].y * inv * wq.y + bq.y, v[q].z * inv * wq.z + bq.z,
                                      v[q].w * inv * wq.w + bq.w};
  }
}

// Persistent blocks of T threads walking rows r = blockIdx.x + k * gridDim.x;
// a ring of S row-sized stages in shared memory, thread 0 keeping S rows in
// flight by bulk copy; the weights live in registers for the whole walk.
// B blocks per SM (launch bounds); STCS: streaming stores.
template <int T, int S, int B, bool STCS>
__global__ void __launch_bounds__(T, B) LnBulk(const float* __restrict__ x, const float* __restrict__ w,
                                            const float* __restrict__ b, float* __restrict__ y) {
  constexpr int V = kLnN / 4 / T;
  constexpr unsigned kBytes = kLnN * 4;
  extern __shared__ __align__(128) float4 stage[];  // S * N / 4
  __shared__ __align__(8) unsigned long long bar[S];
  __shared__ float s1[32], s2[32];
  const unsigned long long policy = EvictFirst();
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) BarInit(&bar[s]);
    BarFenceInit();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      const long long r = blockIdx.x + (long long)s * gridDim.x;
      if (r < kLnRows) BulkLoad(stage + s * (kLnN / 4), x + r * kLnN, kBytes, &bar[s], policy);
    }
  }
  float4 wv[V], bv[V];
#pragma unroll
  for (int q = 0; q < V; ++q) {
    wv[q] = reinterpret_cast<const float4*>(w)[threadIdx.x + q * T];
    bv[q] = reinterpret_cast<const float4*>(b)[threadIdx.x + q * T];
  }
  int k = 0;
  for (long long r = blockIdx.x; r < kLnRows; r += gridDim.x, ++k) {
    const int s = k % S;
    BarWait(&bar[s], (k / S) & 1);
    const float4* src = stage + s * (kLnN / 4);
    float4 v[V];
#pragma unroll
    for (int q = 0; q < V; ++q) v[q] = src[threadIdx.x + q * T];
    float sum = 0;
#pragma unroll
    for (int q = 0; q < V; ++q) sum += Sum4(v[q]);
    // The reduction's barrier also tells thread 0 that every thread has read stage s.
    const float mean = BlockReduce<T>(sum, [](float a, float c) { return a + c; }, s1) / kLnN;
    if (threadIdx.x == 0) {
      const long long next = r + (long long)S * gridDim.x;
      if (next < kLnRows) BulkLoad(stage + s * (kLnN / 4), x + next * kLnN, kBytes, &bar[s], policy);
    }
    const float inv = CenterAndInvStd<T, V>(v, mean, s2);
    float4* out = reinterpret_cast<float4*>(y) + r * (kLnN / 4);
#pragma unroll
    for (int q = 0; q < V; ++q) {
      const float4 o{v[q].x * inv * wv[q].x + bv[q].x, v[q].y * inv * wv[q].y + bv[q].y, v[q].z * inv * wv[q].z + bv[q].z,
                     v[q].w * inv * wv[q].w + bv[q].w};
      if (STCS) __stcs(out + threadIdx.x + q * T, o); else out[threadIdx.x + q * T] = o;
    }
    // s1 is written again only after the next row's wait; s2's next write
    // comes after s1's barrier, which every thread passes after reading s2.
  }
}

// Inductor's kernel for this graph, written by hand (a looped
// `triton_red_`: a 512-thread block per row, three passes of two steps, one
// float4 per thread per step, accumulated per lane and reduced once per
// pass; the first two passes load x evict-last, the last evict-first, the
// weights evict-last). HINTS=false: plain loads.
template <bool HINTS, int STEPS>
__global__ void __launch_bounds__(512) LnLooped(const float* __restrict__ x, const float* __restrict__ w,
                                               const float* __restrict__ b, float* __restrict__ y) {
  constexpr int T = kLnN / 4 / STEPS;  // threads
  const unsigned long long last = EvictLast(), first = EvictFirst();
  __shared__ float s1[32], s2[32];
  const float4* row = reinterpret_cast<const float4*>(x) + (long long)blockIdx.x * (kLnN / 4);
  float4 acc{0, 0, 0, 0};
  for (int s = 0; s < STEPS; ++s) {
    const float4 v = LdHint<HINTS ? 1 : 0>(row + threadIdx.x + s * T, last);
    acc = float4{acc.x + v.x, acc.y + v.y, acc.z + v.z, acc.w + v.w};
  }
  const float mean = BlockReduce<T>(Sum4(acc), [](float a, float c) { return a + c; }, s1) / kLnN;
  acc = float4{0, 0, 0, 0};
  for (int s = 0; s < STEPS; ++s) {
    const float4 v = LdHint<HINTS ? 1 : 0>(row + threadIdx.x + s * T, last);
    const float4 d{v.x - mean, v.y - mean, v.z - mean, v.w - mean};
    acc = float4{acc.x + d.x * d.x, acc.y + d.y * d.y, acc.z + d.z * d.z, acc.w + d.w * d.w};
  }
  const float inv = rsqrtf(BlockReduce<T>(Sum4(acc), [](float a, float c) { return a + c; }, s2) / kLnN + kEps);
  float4* out = reinterpret_cast<float4*>(y) + (long long)blockIdx.x * (kLnN / 4);
  for (int s = 0; s < STEPS; ++s) {
    const float4 v = LdHint<HINTS ? 2 : 0>(row + threadIdx.x + s * T, first);
    const float4 wq = LdHint<HINTS ? 1 : 0>(reinterpret_cast<const float4*>(w) + threadIdx.x + s * T, last);
    const float4 bq = LdHint<HINTS ? 1 : 0>(reinterpret_cast<const float4*>(b) + threadIdx.x + s * T, last);
    out[threadIdx.x + s * T] = float4{(v.x - mean) * inv * wq.x + bq.x, (v.y - mean) * inv * wq.y + bq.y,
                                      (v.z - mean) * inv * wq.z + bq.z, (v.w - mean) * inv * wq.w + bq.w};
  }
}

// ---- softmax over rows of 1024 ----
constexpr int kSmRows = 32768, kSmN = 1024;

// A row's softmax from a warp's registers (V float4 per lane) to `out`.
template <int V>
__device__ __forceinline__ void SoftmaxRowOfWarp(float4 (&v)[V], float4* out, int lane) {
  float m = -INFINITY;
#pragma unroll
  for (int q = 0; q < V; ++q) m = fmaxf(m, fmaxf(fmaxf(v[q].x, v[q].y), fmaxf(v[q].z, v[q].w)));
  m = WarpReduce(m, [](float a, float c) { return fmaxf(a, c); });
  float s = 0;
#pragma unroll
  for (int q = 0; q < V; ++q) {
    v[q] = float4{__expf(v[q].x - m), __expf(v[q].y - m), __expf(v[q].z - m), __expf(v[q].w - m)};
    s += Sum4(v[q]);
  }
  const float inv = 1.f / WarpReduce(s, [](float a, float c) { return a + c; });
#pragma unroll
  for (int q = 0; q < V; ++q) __stcs(out + lane + q * 32, float4{v[q].x * inv, v[q].y * inv, v[q].z * inv, v[q].w * inv});
}

// A warp per row, 8 rows per block of 256, registers (the plain layout).
__global__ void __launch_bounds__(256) SmWarpRegisters(const float* __restrict__ x, float* __restrict__ y) {
  constexpr int V = kSmN / 4 / 32;
  const long long r = blockIdx.x * 8LL + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  const float4* row = reinterpret_cast<const float4*>(x) + r * (kSmN / 4);
  float4 v[V];
#pragma unroll
  for (int q = 0; q < V; ++q) v[q] = row[lane + q * 32];
  SoftmaxRowOfWarp<V>(v, reinterpret_cast<float4*>(y) + r * (kSmN / 4), lane);
}

// Each warp walks its own rows (global warp g, g + warps, ...) with a ring
// of S one-row stages of its own: lane 0 bulk-copies, the warp never waits
// for another warp (no block barrier at all).
template <int W, int S>
__global__ void __launch_bounds__(W * 32) SmWarpBulk(const float* __restrict__ x, float* __restrict__ y) {
  constexpr int V = kSmN / 4 / 32;
  constexpr unsigned kBytes = kSmN * 4;
  extern __shared__ __align__(128) float4 stage[];  // W * S * N / 4
  __shared__ __align__(8) unsigned long long bars[W * S];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  unsigned long long* bar = bars + warp * S;
  float4* ring = stage + warp * S * (kSmN / 4);
  const long long warps = (long long)gridDim.x * W, g = blockIdx.x * (long long)W + warp;
  const unsigned long long policy = EvictFirst();
  if (lane == 0) {
    for (int s = 0; s < S; ++s) BarInit(&bar[s]);
    BarFenceInit();
    for (int s = 0; s < S; ++s) {
      const long long r = g + s * warps;
      if (r < kSmRows) BulkLoad(ring + s * (kSmN / 4), x + r * kSmN, kBytes, &bar[s], policy);
    }
  }
  __syncwarp();
  int k = 0;
  for (long long r = g; r < kSmRows; r += warps, ++k) {
    const int s = k % S;
    BarWait(&bar[s], (k / S) & 1);
    float4 v[V];
#pragma unroll
    for (int q = 0; q < V; ++q) v[q] = ring[s * (kSmN / 4) + lane + q * 32];
    __syncwarp();
    if (lane == 0) {
      const long long next = r + S * warps;
      if (next < kSmRows) BulkLoad(ring + s * (kSmN / 4), x + next * kSmN, kBytes, &bar[s], policy);
    }
    SoftmaxRowOfWarp<V>(v, reinterpret_cast<float4*>(y) + r * (kSmN / 4), lane);
  }
}

int main() {
  MedianTimer t;
  int sms;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // layer_norm
  {
    const size_t n = (size_t)kLnRows * kLnN;
    std::vector<float> hx = Random(n, 1, 3), hw = Random(kLnN, 2, 3), hb = Random(kLnN, 3, 3);
    float *x, *w, *b, *y;
    CHECK(cudaMalloc(&x, n * 4));
    CHECK(cudaMalloc(&y, n * 4));
    CHECK(cudaMalloc(&w, kLnN * 4));
    CHECK(cudaMalloc(&b, kLnN * 4));
    CHECK(cudaMemcpy(x, hx.data(), n * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(w, hw.data(), kLnN * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b, hb.data(), kLnN * 4, cudaMemcpyHostToDevice));
    const double gb = (2.0 * n + 2 * kLnN) * 4 / 1e9;
    std::vector<float> got(n);
    auto report = [&](const char* name, auto launch) {
      CHECK(cudaMemset(y, 0, n * 4));
      const double ms = t.MedianMs(launch, 80);
      launch();
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaMemcpy(got.data(), y, n * 4, cudaMemcpyDeviceToHost));
      double worst = 0;
      for (int r = 0; r < kLnRows; r += 97) {  // a spread of rows, float64 reference
        double mean = 0, var = 0;
        for (int j = 0; j < kLnN; ++j) mean += hx[(size_t)r * kLnN + j];
        mean /= kLnN;
        for (int j = 0; j < kLnN; ++j) var += (hx[(size_t)r * kLnN + j] - mean) * (hx[(size_t)r * kLnN + j] - mean);
        const double inv = 1 / std::sqrt(var / kLnN + kEps);
        for (int j = 0; j < kLnN; ++j) {
          const double want = (hx[(size_t)r * kLnN + j] - mean) * inv * hw[j] + hb[j];
          worst = std::max(worst, std::fabs(want - got[(size_t)r * kLnN + j]));
        }
      }
      std::printf("layer_norm %-40s %8.4f ms %7.0f GB/s  max abs err %.2e\n", name, ms, gb / ms * 1e3, worst);
    };
    report("registers T=512 (fusebox)", [&] { LnRegisters<512><<<kLnRows, 512>>>(x, w, b, y); });
    report("registers T=256", [&] { LnRegisters<256><<<kLnRows, 256>>>(x, w, b, y); });
    report("looped T=512 x 2 steps, Inductor's hints", [&] { LnLooped<true, 2><<<kLnRows, 512>>>(x, w, b, y); });
    report("looped T=512 x 2 steps, no hints", [&] { LnLooped<false, 2><<<kLnRows, 512>>>(x, w, b, y); });
    report("looped T=256 x 4 steps, Inductor's hints", [&] { LnLooped<true, 4><<<kLnRows, 256>>>(x, w, b, y); });
    report("registers T=512, Inductor's last-pass hints", [&] { LnRegisters<512, true><<<kLnRows, 512>>>(x, w, b, y); });
    report("registers T=512 (fusebox), again", [&] { LnRegisters<512><<<kLnRows, 512>>>(x, w, b, y); });
#define LNBULK(T, S, B, STCS)                                                                           \
  {                                                                                                     \
    const int smem = S * kLnN * 4;                                                                      \
    CHECK(cudaFuncSetAttribute(LnBulk<T, S, B, STCS>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)); \
    report("bulk T=" #T " S=" #S " B=" #B " stcs=" #STCS,                                               \
           [&] { LnBulk<T, S, B, STCS><<<sms * B, T, smem>>>(x, w, b, y); });                              \
  }
    LNBULK(512, 4, 2, true);
    LNBULK(512, 4, 2, false);
    LNBULK(512, 3, 3, true);
    LNBULK(512, 2, 4, true);
    LNBULK(256, 3, 4, true);
    LNBULK(256, 2, 6, true);
    LNBULK(1024, 8, 1, true);
    LNBULK(1024, 6, 2, true);
    LNBULK(1024, 12, 1, true);
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
  }
  // softmax
  {
    SoftmaxRun run(t, kSmRows, kSmN, "softmax   ", 80);
    float *x = run.x, *y = run.y;
    auto report = [&](const char* name, bool check, auto launch) { run.Report(name, check, launch); };
    run.ReportCopy("copy (ceiling at this size)");
    report("warp registers 8 rows/block", true, [&] { SmWarpRegisters<<<kSmRows / 8, 256>>>(x, y); });
#define SMBULK(W, S, B)                                                                                \
  {                                                                                                    \
    const int smem = W * S * kSmN * 4;                                                                 \
    CHECK(cudaFuncSetAttribute(SmWarpBulk<W, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));  \
    report("warp bulk W=" #W " S=" #S " B=" #B, true, [&] { SmWarpBulk<W, S><<<sms * B, W * 32, smem>>>(x, y); }); \
  }
    SMBULK(8, 4, 1);
    SMBULK(8, 2, 2);
    SMBULK(4, 4, 3);
    SMBULK(16, 2, 1);
    SMBULK(8, 3, 2);
    SMBULK(4, 2, 6);
    SMBULK(16, 3, 1);
  }
  std::printf("done\n");
}
