// A/B experiment (not part of the build): softmax over 32768 rows of 1024
// f32 on the H200, the issue-6 row under its goal (4000 GB/s; fusebox's
// printed warp-per-row kernel 3962, a streaming gelu of the same 268 MB
// 4011). Which register layout of a short read-once row streams closest to
// a plain copy of its size? Same method as sums.cu (timing.cuh).
//   nvcc -O3 -std=c++17 -arch=sm_90a bench/experiments/short_rows.cu -o short_rows
#include <cuda_runtime.h>

#include "timing.cuh"

#include <cmath>
#include <cstdio>
#include <vector>

constexpr int kRows = 32768, kN = 1024, kN4 = kN / 4;

__device__ __forceinline__ float Max4(float4 v) { return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)); }
__device__ __forceinline__ float Sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }
template <int W = 32, typename F>
__device__ __forceinline__ float Reduce(float v, F f) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
constexpr MaxOp kMax;
constexpr AddOp kAdd;

// Load/store flavours: 0 plain, 1 streaming (.cs), 2 L1::no_allocate load.
template <int H>
__device__ __forceinline__ float4 Load(const float4* p) {
  if constexpr (H == 1) return __ldcs(p);
  if constexpr (H == 2) {
    float4 v;
    asm volatile("ld.global.L1::no_allocate.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
  }
  return *p;
}
template <int H>
__device__ __forceinline__ void Store(float4* p, float4 v) {
  if constexpr (H == 1) {
    __stcs(p, v);
  } else {
    *p = v;
  }
}

// Softmax of V float4 per lane over a group of L lanes (one row); FAST:
// __expf (ex2.approx of x * log2(e), as Triton's tl.exp) instead of expf.
template <int L, int V, int ST, bool FAST = false>
__device__ __forceinline__ void RowSoftmax(float4 (&v)[V], float4* out, int lane) {
  auto ex = [](float x) { return FAST ? __expf(x) : expf(x); };
  float m = -INFINITY;
#pragma unroll
  for (int q = 0; q < V; ++q) m = fmaxf(m, Max4(v[q]));
  m = Reduce<L>(m, kMax);
  float s = 0;
#pragma unroll
  for (int q = 0; q < V; ++q) {
    v[q] = float4{ex(v[q].x - m), ex(v[q].y - m), ex(v[q].z - m), ex(v[q].w - m)};
    s += Sum4(v[q]);
  }
  const float inv = 1.f / Reduce<L>(s, kAdd);
#pragma unroll
  for (int q = 0; q < V; ++q) Store<ST>(out + lane + q * L, float4{v[q].x * inv, v[q].y * inv, v[q].z * inv, v[q].w * inv});
}

// L lanes per row (32: fusebox's layout; 16: a half warp), R rows per
// block, one row per lane group, short-lived blocks.
template <int L, int R, int LD, int ST, bool FAST = false>
__global__ void __launch_bounds__(R * L) Lanes(const float* __restrict__ x, float* __restrict__ y) {
  constexpr int V = kN4 / L;
  const long long r = blockIdx.x * (long long)R + threadIdx.x / L;
  const int lane = threadIdx.x % L;
  const float4* row = reinterpret_cast<const float4*>(x) + r * kN4;
  float4 v[V];
#pragma unroll
  for (int q = 0; q < V; ++q) v[q] = Load<LD>(row + lane + q * L);
  RowSoftmax<L, V, ST, FAST>(v, reinterpret_cast<float4*>(y) + r * kN4, lane);
}

// A warp per row, K rows per warp loaded together (K x 8 float4 in flight).
template <int K, int W>
__global__ void __launch_bounds__(W * 32) WarpRows(const float* __restrict__ x, float* __restrict__ y) {
  constexpr int V = kN4 / 32;
  const long long r0 = (blockIdx.x * (long long)W + threadIdx.x / 32) * K;
  const int lane = threadIdx.x % 32;
  float4 v[K][V];
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int q = 0; q < V; ++q) v[k][q] = reinterpret_cast<const float4*>(x)[(r0 + k) * kN4 + lane + q * 32];
#pragma unroll
  for (int k = 0; k < K; ++k) RowSoftmax<32, V, 0>(v[k], reinterpret_cast<float4*>(y) + (r0 + k) * kN4, lane);
}

// Persistent warps: each walks rows g, g + warps, ..., the next row's
// loads issued before the current row is computed (registers double-buffered).
template <int W>
__global__ void __launch_bounds__(W * 32) WarpPrefetch(const float* __restrict__ x, float* __restrict__ y) {
  constexpr int V = kN4 / 32;
  const long long warps = (long long)gridDim.x * W;
  const int lane = threadIdx.x % 32;
  long long r = blockIdx.x * (long long)W + threadIdx.x / 32;
  const float4* in = reinterpret_cast<const float4*>(x);
  float4 cur[V], next[V];
#pragma unroll
  for (int q = 0; q < V; ++q) cur[q] = r < kRows ? in[r * kN4 + lane + q * 32] : float4{0, 0, 0, 0};
  for (; r < kRows; r += warps) {
    const long long n = r + warps;
#pragma unroll
    for (int q = 0; q < V; ++q) next[q] = n < kRows ? in[n * kN4 + lane + q * 32] : float4{0, 0, 0, 0};
    RowSoftmax<32, V, 0>(cur, reinterpret_cast<float4*>(y) + r * kN4, lane);
#pragma unroll
    for (int q = 0; q < V; ++q) cur[q] = next[q];
  }
}

// A block of 256 per row, one float4 per thread (a row sum's shape): a
// warp reduction, then the 8 warps' values through shared memory, twice.
template <int LD, int ST>
__global__ void __launch_bounds__(256) BlockRow(const float* __restrict__ x, float* __restrict__ y) {
  __shared__ float red[2][8];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float4 v = Load<LD>(reinterpret_cast<const float4*>(x) + blockIdx.x * (long long)kN4 + threadIdx.x);
  float m = Reduce(Max4(v), kMax);
  if (lane == 0) red[0][warp] = m;
  __syncthreads();
  m = Reduce<8>(red[0][lane % 8], kMax);
  v = float4{expf(v.x - m), expf(v.y - m), expf(v.z - m), expf(v.w - m)};
  float s = Reduce(Sum4(v), kAdd);
  if (lane == 0) red[1][warp] = s;
  __syncthreads();
  const float inv = 1.f / Reduce<8>(red[1][lane % 8], kAdd);
  Store<ST>(reinterpret_cast<float4*>(y) + blockIdx.x * (long long)kN4 + threadIdx.x,
            float4{v.x * inv, v.y * inv, v.z * inv, v.w * inv});
}

int main() {
  MedianTimer t;
  int sms;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  SoftmaxRun run(t, kRows, kN, "softmax-1024", 100);
  float *x = run.x, *y = run.y;
  auto report = [&](const char* name, bool check, auto launch) { run.Report(name, check, launch); };
  run.ReportCopy("copy (ceiling at this size)");
#define LANES(L, R, LD, ST) \
  report("lanes L=" #L " R=" #R " ld=" #LD " st=" #ST, true, [&] { Lanes<L, R, LD, ST><<<kRows / R, L * R>>>(x, y); })
  LANES(32, 8, 0, 0);  // fusebox's printed layout
  LANES(32, 8, 1, 0);
  LANES(32, 8, 0, 1);
  LANES(32, 8, 2, 0);
  LANES(32, 4, 0, 0);
  LANES(32, 16, 0, 0);
  LANES(32, 32, 0, 0);
  LANES(32, 2, 0, 0);
  LANES(16, 16, 0, 0);
  LANES(16, 8, 0, 0);
  LANES(8, 32, 0, 0);
  report("warp rows K=2 W=8", true, [&] { WarpRows<2, 8><<<kRows / 16, 256>>>(x, y); });
  report("warp rows K=2 W=4", true, [&] { WarpRows<2, 4><<<kRows / 8, 128>>>(x, y); });
  for (int b : {2, 4, 8}) {
    char name[64];
    std::snprintf(name, sizeof name, "warp prefetch W=8, %d blocks/SM", b);
    report(name, true, [&] { WarpPrefetch<8><<<sms * b, 256>>>(x, y); });
  }
  report("block row T=256 ld=0 st=0", true, [&] { BlockRow<0, 0><<<kRows, 256>>>(x, y); });
  report("block row T=256 ld=1 st=0", true, [&] { BlockRow<1, 0><<<kRows, 256>>>(x, y); });
  report("block row T=256 ld=1 st=1", true, [&] { BlockRow<1, 1><<<kRows, 256>>>(x, y); });
  report("lanes L=32 R=8 __expf", true, [&] { Lanes<32, 8, 0, 0, true><<<kRows / 8, 256>>>(x, y); });
  report("lanes L=32 R=4 __expf", true, [&] { Lanes<32, 4, 0, 0, true><<<kRows / 4, 128>>>(x, y); });
  LANES(32, 8, 0, 0);  // again, for the drift between samples
  run.ReportCopy("copy (ceiling at this size), again");
  std::printf("done\n");
}
