// A/B experiment (not part of the build): softmax over 1024 x 65536 f32 rows
// on the H200, the one issue-6 row that stays far from its goal (3700 GB/s).
// Times row layouts written by hand, with do_bench's method (timing.cuh: zero 256 MB
// buffer before each trial, CUDA events, median), beside a copy of the same
// bytes, so that the winning layout can be taught to the row printer.
//   nvcc -O3 -std=c++17 -arch=sm_90a bench/experiments/long_softmax.cu -o long_softmax
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "timing.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace cg = cooperative_groups;

constexpr int kRows = 1024, kCols = 65536;

struct MaxSum {
  float m, s;
};
__device__ __forceinline__ MaxSum Combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  // exp(-inf - -inf) guards: an empty side has s == 0.
  const float sa = a.s == 0.f ? 0.f : a.s * expf(a.m - m);
  const float sb = b.s == 0.f ? 0.f : b.s * expf(b.m - m);
  return {m, sa + sb};
}

template <typename T, typename F>
__device__ __forceinline__ T WarpReduce(T v, F f) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ MaxSum WarpReduceMs(MaxSum v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum w{__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
    v = Combine(v, w);
  }
  return v;
}

// ---- copy baselines ----
__global__ void Copy(const float4* __restrict__ in, float4* __restrict__ out, long long n4) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
    out[i] = __ldcs(in + i);
  }
}

// ---- cluster, registers only ----
// Row r over a cluster of C blocks of T threads; each thread holds V float4.
// ONLINE: one (max, sum) reduction; else two (max, then sum of exp).
template <int C, int T, int V, bool ONLINE, bool STREAM>
__global__ void __cluster_dims__(C, 1, 1) __launch_bounds__(T) ClusterSoftmax(const float* __restrict__ in, float* __restrict__ out) {
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = (int)cluster.block_rank();
  const long long r = blockIdx.x / C;
  const float4* src = reinterpret_cast<const float4*>(in + r * kCols) + rank * (T * V);
  float4* dst = reinterpret_cast<float4*>(out + r * kCols) + rank * (T * V);
  float4 x[V];
#pragma unroll
  for (int q = 0; q < V; ++q) x[q] = STREAM ? __ldcs(src + threadIdx.x + q * T) : src[threadIdx.x + q * T];
  __shared__ float sm_m[32], sm_s[32];
  __shared__ float slot_m, slot_s;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float M, S;
  if (ONLINE) {
    float m = -INFINITY;
#pragma unroll
    for (int q = 0; q < V; ++q) m = fmaxf(m, fmaxf(fmaxf(x[q].x, x[q].y), fmaxf(x[q].z, x[q].w)));
    float s = 0.f;
#pragma unroll
    for (int q = 0; q < V; ++q) s += expf(x[q].x - m) + expf(x[q].y - m) + expf(x[q].z - m) + expf(x[q].w - m);
    MaxSum v = WarpReduceMs({m, s});
    if (lane == 0) sm_m[warp] = v.m, sm_s[warp] = v.s;
    __syncthreads();
    v = lane < T / 32 ? MaxSum{sm_m[lane], sm_s[lane]} : MaxSum{-INFINITY, 0.f};
    v = WarpReduceMs(v);
    if (threadIdx.x == 0) slot_m = v.m, slot_s = v.s;
    cluster.sync();
    MaxSum t{-INFINITY, 0.f};
#pragma unroll
    for (int c = 0; c < C; ++c) t = Combine(t, MaxSum{*cluster.map_shared_rank(&slot_m, c), *cluster.map_shared_rank(&slot_s, c)});
    M = t.m, S = t.s;
  } else {
    float m = -INFINITY;
#pragma unroll
    for (int q = 0; q < V; ++q) m = fmaxf(m, fmaxf(fmaxf(x[q].x, x[q].y), fmaxf(x[q].z, x[q].w)));
    m = WarpReduce(m, [](float a, float b) { return fmaxf(a, b); });
    if (lane == 0) sm_m[warp] = m;
    __syncthreads();
    m = lane < T / 32 ? sm_m[lane] : -INFINITY;
    m = WarpReduce(m, [](float a, float b) { return fmaxf(a, b); });
    if (threadIdx.x == 0) slot_m = m;
    cluster.sync();
    M = -INFINITY;
#pragma unroll
    for (int c = 0; c < C; ++c) M = fmaxf(M, *cluster.map_shared_rank(&slot_m, c));
    float s = 0.f;
#pragma unroll
    for (int q = 0; q < V; ++q) s += expf(x[q].x - M) + expf(x[q].y - M) + expf(x[q].z - M) + expf(x[q].w - M);
    s = WarpReduce(s, [](float a, float b) { return a + b; });
    if (lane == 0) sm_s[warp] = s;
    __syncthreads();
    s = lane < T / 32 ? sm_s[lane] : 0.f;
    s = WarpReduce(s, [](float a, float b) { return a + b; });
    if (threadIdx.x == 0) slot_s = s;
    cluster.sync();
    S = 0.f;
#pragma unroll
    for (int c = 0; c < C; ++c) S += *cluster.map_shared_rank(&slot_s, c);
  }
  const float inv = 1.f / S;
#pragma unroll
  for (int q = 0; q < V; ++q) {
    float4 y{expf(x[q].x - M) * inv, expf(x[q].y - M) * inv, expf(x[q].z - M) * inv, expf(x[q].w - M) * inv};
    if (STREAM) __stcs(dst + threadIdx.x + q * T, y); else dst[threadIdx.x + q * T] = y;
  }
  cluster.sync();  // no block leaves while another may read its slots
}

// The softmax of a row held by a block of T threads, N float4 values each
// (at(q)): a block max, a block sum of exp(v - max), then store(q, y) with
// y = exp(v - max) * (1 / sum), or / sum with DIV. `m`: the thread's max of
// values it has already seen (-inf: none).
template <int T, int N, bool DIV = false, typename At, typename Store>
__device__ __forceinline__ void SoftmaxOfHeldRow(At at, Store store, float m = -INFINITY) {
  __shared__ float sm_m[32], sm_s[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int q = 0; q < N; ++q) {
    const float4 v = at(q);
    m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
  }
  m = WarpReduce(m, [](float a, float b) { return fmaxf(a, b); });
  if (lane == 0) sm_m[warp] = m;
  __syncthreads();
  m = lane < T / 32 ? sm_m[lane] : -INFINITY;
  const float M = WarpReduce(m, [](float a, float b) { return fmaxf(a, b); });
  float s = 0.f;
#pragma unroll
  for (int q = 0; q < N; ++q) {
    const float4 v = at(q);
    s += expf(v.x - M) + expf(v.y - M) + expf(v.z - M) + expf(v.w - M);
  }
  s = WarpReduce(s, [](float a, float b) { return a + b; });
  if (lane == 0) sm_s[warp] = s;
  __syncthreads();
  s = lane < T / 32 ? sm_s[lane] : 0.f;
  const float S = WarpReduce(s, [](float a, float b) { return a + b; }), inv = 1.f / S;
#pragma unroll
  for (int q = 0; q < N; ++q) {
    const float4 v = at(q);
    store(q, DIV ? float4{expf(v.x - M) / S, expf(v.y - M) / S, expf(v.z - M) / S, expf(v.w - M) / S}
                 : float4{expf(v.x - M) * inv, expf(v.y - M) * inv, expf(v.z - M) * inv, expf(v.w - M) * inv});
  }
}

// ---- one block per row, registers + shared memory (fusebox's layout now) ----
// T threads, VR float4 in registers and VS in dynamic shared memory.
template <int T, int VR, int VS>
__global__ void __launch_bounds__(T) BlockSoftmaxOnline(const float* __restrict__ in, float* __restrict__ out) {
  extern __shared__ float4 smem[];
  const long long r = blockIdx.x;
  const float4* src = reinterpret_cast<const float4*>(in + r * kCols);
  float4* dst = reinterpret_cast<float4*>(out + r * kCols);
  float4 x[VR];
#pragma unroll
  for (int q = 0; q < VR; ++q) x[q] = __ldcs(src + threadIdx.x + q * T);
#pragma unroll
  for (int q = 0; q < VS; ++q) smem[threadIdx.x + q * T] = __ldcs(src + threadIdx.x + (VR + q) * T);
  auto at = [&](int q) { return q < VR ? x[q] : smem[threadIdx.x + (q - VR) * T]; };
  __shared__ float sm_m[32], sm_s[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // One (max, sum) reduction: each thread's sum is rescaled as they combine.
  float m = -INFINITY;
#pragma unroll
  for (int q = 0; q < VR + VS; ++q) {
    float4 v = at(q);
    m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
  }
  float s = 0.f;
#pragma unroll
  for (int q = 0; q < VR + VS; ++q) {
    float4 v = at(q);
    s += expf(v.x - m) + expf(v.y - m) + expf(v.z - m) + expf(v.w - m);
  }
  MaxSum t = WarpReduceMs({m, s});
  if (lane == 0) sm_m[warp] = t.m, sm_s[warp] = t.s;
  __syncthreads();
  t = lane < T / 32 ? MaxSum{sm_m[lane], sm_s[lane]} : MaxSum{-INFINITY, 0.f};
  t = WarpReduceMs(t);
  const float inv = 1.f / t.s;
#pragma unroll
  for (int q = 0; q < VR + VS; ++q) {
    float4 v = at(q);
    __stcs(dst + threadIdx.x + q * T, float4{expf(v.x - t.m) * inv, expf(v.y - t.m) * inv, expf(v.z - t.m) * inv, expf(v.w - t.m) * inv});
  }
}

// The same layout with fusebox's generated details switchable: DIV (x / S
// instead of x * (1 / S)), STRIDED (shared memory holds each element of a
// group T words apart, scalar accesses), HINT (evict-first loads and stores).
template <int T, int VR, int VS, bool DIV, bool STRIDED, bool HINT>
__global__ void __launch_bounds__(T) BlockSoftmaxAs(const float* __restrict__ in, float* __restrict__ out) {
  extern __shared__ float4 smem[];
  float* sf = reinterpret_cast<float*>(smem);
  const long long r = blockIdx.x;
  const float4* src = reinterpret_cast<const float4*>(in + r * kCols);
  float4* dst = reinterpret_cast<float4*>(out + r * kCols);
  float4 x[VR];
#pragma unroll
  for (int q = 0; q < VR; ++q) x[q] = HINT ? __ldcs(src + threadIdx.x + q * T) : src[threadIdx.x + q * T];
#pragma unroll
  for (int q = 0; q < VS; ++q) {
    const float4 v = HINT ? __ldcs(src + threadIdx.x + (VR + q) * T) : src[threadIdx.x + (VR + q) * T];
    if (STRIDED) {
      float* p = sf + threadIdx.x + q * 4 * T;
      p[0] = v.x, p[T] = v.y, p[2 * T] = v.z, p[3 * T] = v.w;
    } else {
      smem[threadIdx.x + q * T] = v;
    }
  }
  auto at = [&](int q) {
    if (q < VR) return x[q];
    if (!STRIDED) return smem[threadIdx.x + (q - VR) * T];
    const float* p = sf + threadIdx.x + (q - VR) * 4 * T;
    return float4{p[0], p[T], p[2 * T], p[3 * T]};
  };
  SoftmaxOfHeldRow<T, VR + VS, DIV>(at, [&](int q, float4 y) {
    if (HINT) __stcs(dst + threadIdx.x + q * T, y); else dst[threadIdx.x + q * T] = y;
  });
}

// Registers + shared memory, the shared part loaded by cp.async (16 bytes
// per thread per group, global -> shared without staging registers), so all
// of a row's loads are in flight at once.
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}
template <int T, int VR, int VS, bool MAX_FIRST, bool LDCS = false, bool STCS = false>
__global__ void __launch_bounds__(T) CpAsyncSoftmax(const float* __restrict__ in, float* __restrict__ out) {
  extern __shared__ float4 smem[];
  const long long r = blockIdx.x;
  const float4* src = reinterpret_cast<const float4*>(in + r * kCols);
  float4* dst = reinterpret_cast<float4*>(out + r * kCols);
#pragma unroll
  for (int q = 0; q < VS; ++q) CpAsync16(smem + threadIdx.x + q * T, src + threadIdx.x + (VR + q) * T);
  asm volatile("cp.async.commit_group;" ::: "memory");
  float4 x[VR];
#pragma unroll
  for (int q = 0; q < VR; ++q) x[q] = LDCS ? __ldcs(src + threadIdx.x + q * T) : src[threadIdx.x + q * T];
  // MAX_FIRST: the registers' max while the copies are still in flight.
  float m = -INFINITY;
  if (MAX_FIRST) {
#pragma unroll
    for (int q = 0; q < VR; ++q) m = fmaxf(m, fmaxf(fmaxf(x[q].x, x[q].y), fmaxf(x[q].z, x[q].w)));
  }
  asm volatile("cp.async.wait_all;" ::: "memory");  // each thread reads only its own copies
  auto at = [&](int q) { return q < VR ? x[q] : smem[threadIdx.x + (q - VR) * T]; };
  SoftmaxOfHeldRow<T, VR + VS>(at, [&](int q, float4 y) {
    if (STCS) __stcs(dst + threadIdx.x + q * T, y); else dst[threadIdx.x + q * T] = y;
  }, m);
}

// Persistent: one block per SM walks rows r, r + gridDim.x, ...; the output
// pass stores group q of row r and loads group q of the next row into the
// same registers / shared memory, so the next row's loads overlap this
// row's stores and the HBM stream pauses only for the two reductions.
template <int T, int VR, int VS>
__global__ void __launch_bounds__(T) PipelinedSoftmax(const float* __restrict__ in, float* __restrict__ out) {
  extern __shared__ float4 smem[];
  float4 x[VR];
  long long r = blockIdx.x;
  if (r >= kRows) return;
  {
    const float4* src = reinterpret_cast<const float4*>(in + r * kCols);
#pragma unroll
    for (int q = 0; q < VR; ++q) x[q] = __ldcs(src + threadIdx.x + q * T);
#pragma unroll
    for (int q = 0; q < VS; ++q) smem[threadIdx.x + q * T] = __ldcs(src + threadIdx.x + (VR + q) * T);
  }
  __shared__ float sm_m[2][32], sm_s[2][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int it = 0; r < kRows; r += gridDim.x, ++it) {
    float m = -INFINITY;
#pragma unroll
    for (int q = 0; q < VR; ++q) m = fmaxf(m, fmaxf(fmaxf(x[q].x, x[q].y), fmaxf(x[q].z, x[q].w)));
#pragma unroll
    for (int q = 0; q < VS; ++q) {
      float4 v = smem[threadIdx.x + q * T];
      m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    }
    m = WarpReduce(m, [](float a, float b) { return fmaxf(a, b); });
    if (lane == 0) sm_m[it & 1][warp] = m;
    __syncthreads();
    m = lane < T / 32 ? sm_m[it & 1][lane] : -INFINITY;
    const float M = WarpReduce(m, [](float a, float b) { return fmaxf(a, b); });
    float s = 0.f;
#pragma unroll
    for (int q = 0; q < VR; ++q) s += expf(x[q].x - M) + expf(x[q].y - M) + expf(x[q].z - M) + expf(x[q].w - M);
#pragma unroll
    for (int q = 0; q < VS; ++q) {
      float4 v = smem[threadIdx.x + q * T];
      s += expf(v.x - M) + expf(v.y - M) + expf(v.z - M) + expf(v.w - M);
    }
    s = WarpReduce(s, [](float a, float b) { return a + b; });
    if (lane == 0) sm_s[it & 1][warp] = s;
    __syncthreads();
    s = lane < T / 32 ? sm_s[it & 1][lane] : 0.f;
    const float inv = 1.f / WarpReduce(s, [](float a, float b) { return a + b; });
    const long long next = r + gridDim.x;
    const bool more = next < kRows;
    float4* dst = reinterpret_cast<float4*>(out + r * kCols);
    const float4* nsrc = reinterpret_cast<const float4*>(in + (more ? next : r) * kCols);
#pragma unroll
    for (int q = 0; q < VR + VS; ++q) {
      float4 v = q < VR ? x[q] : smem[threadIdx.x + (q - VR) * T];
      __stcs(dst + threadIdx.x + q * T, float4{expf(v.x - M) * inv, expf(v.y - M) * inv, expf(v.z - M) * inv, expf(v.w - M) * inv});
      if (more) {
        const float4 w = __ldcs(nsrc + threadIdx.x + q * T);
        if (q < VR) x[q] = w; else smem[threadIdx.x + (q - VR) * T] = w;
      }
    }
  }
}

// ---- harness ----
struct Bench {
  float* in;
  float* out;
  double ref_err(const std::vector<float>& x) {
    std::vector<float> y((size_t)kRows * kCols);
    CHECK(cudaMemcpy(y.data(), out, y.size() * 4, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int r : {0, 1, 517, kRows - 1}) {
      const float* xr = x.data() + (size_t)r * kCols;
      double m = -INFINITY, s = 0;
      for (int j = 0; j < kCols; ++j) m = std::max(m, (double)xr[j]);
      for (int j = 0; j < kCols; ++j) s += std::exp(xr[j] - m);
      for (int j = 0; j < kCols; ++j) {
        const double want = std::exp(xr[j] - m) / s;
        worst = std::max(worst, std::fabs(y[(size_t)r * kCols + j] - want) / (want + 1e-30));
      }
    }
    return worst;
  }
  MedianTimer timer;
  template <typename F>
  double median_ms(F launch) { return timer.MedianMs(launch); }
};

template <typename K>
void SetSmem(K kernel, int bytes) {
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

int main() {
  const size_t n = (size_t)kRows * kCols, bytes = n * 4;
  Bench b;
  CHECK(cudaMalloc(&b.in, bytes));
  CHECK(cudaMalloc(&b.out, bytes));
  const std::vector<float> x = Random(n, 12345, 4);
  CHECK(cudaMemcpy(b.in, x.data(), bytes, cudaMemcpyHostToDevice));
  int sms;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const double gb = 2.0 * bytes / 1e9;

  const double copy = b.median_ms([&] { Copy<<<sms * 8, 512>>>((const float4*)b.in, (float4*)b.out, n / 4); });
  std::printf("%-44s %8.4f ms %7.0f GB/s\n", "copy (ceiling, same flush)", copy, gb / copy * 1e3);

  const double copy4 = b.median_ms([&] { Copy4<<<n / 4 / 2048, 512>>>((const float4*)b.in, (float4*)b.out); });
  std::printf("%-44s %8.4f ms %7.0f GB/s\n", "copy, 4 float4 per thread", copy4, gb / copy4 * 1e3);

  auto report = [&](const char* name, auto launch) {
    CHECK(cudaMemset(b.out, 0, bytes));
    const double ms = b.median_ms(launch);
    launch();
    CHECK(cudaDeviceSynchronize());
    std::printf("%-44s %8.4f ms %7.0f GB/s  max rel err %.2e\n", name, ms, gb / ms * 1e3, b.ref_err(x));
  };
  // Every layout measured in session 7 (bench/NOTES.md), best last.
#define CLUSTER(C, T, V, ON, ST) \
  report("cluster C=" #C " T=" #T " V=" #V " online=" #ON " stream=" #ST, [&] { ClusterSoftmax<C, T, V, ON, ST><<<kRows * C, T>>>(b.in, b.out); })
  CLUSTER(2, 1024, 8, true, true);
  CLUSTER(4, 512, 8, true, true);
  CLUSTER(4, 512, 8, false, true);
  CLUSTER(4, 512, 8, true, false);
  CLUSTER(8, 256, 8, true, true);
  CLUSTER(8, 256, 8, false, true);
  CLUSTER(8, 512, 4, true, true);
  CLUSTER(4, 1024, 4, true, true);
  CLUSTER(2, 512, 16, true, true);
  SetSmem(BlockSoftmaxOnline<1024, 8, 8>, 8 * 1024 * 16);
  report("block T=1024 regs=8 smem=8 online (one reduction)",
         [&] { BlockSoftmaxOnline<1024, 8, 8><<<kRows, 1024, 8 * 1024 * 16>>>(b.in, b.out); });
#define AS(DIV, STRIDED, HINT)                                                                       \
  do {                                                                                               \
    SetSmem(BlockSoftmaxAs<1024, 8, 8, DIV, STRIDED, HINT>, 8 * 1024 * 16);                         \
    report("block as fusebox: div=" #DIV " strided=" #STRIDED " hint=" #HINT,                       \
           [&] { BlockSoftmaxAs<1024, 8, 8, DIV, STRIDED, HINT><<<kRows, 1024, 8 * 1024 * 16>>>(b.in, b.out); }); \
  } while (0)
  AS(true, true, false);  // the layout fusebox printed before session 7
  AS(false, true, false);
  AS(true, false, false);
  AS(true, true, true);
  AS(false, false, true);
  AS(false, false, false);
#define PIPE(T, VR, VS, GRID)                                                                        \
  do {                                                                                               \
    SetSmem(PipelinedSoftmax<T, VR, VS>, VS * T * 16);                                               \
    report("pipelined T=" #T " regs=" #VR " smem=" #VS " grid=" #GRID,                              \
           [&] { PipelinedSoftmax<T, VR, VS><<<GRID, T, VS * T * 16>>>(b.in, b.out); });              \
  } while (0)
  PIPE(1024, 8, 8, sms);
  PIPE(1024, 6, 10, sms);
#define CPA(T, VR, VS, MF, LD, ST)                                                                   \
  do {                                                                                               \
    SetSmem(CpAsyncSoftmax<T, VR, VS, MF, LD, ST>, VS * T * 16);                                     \
    report("cp.async T=" #T " regs=" #VR " smem=" #VS " max_first=" #MF " ldcs=" #LD " stcs=" #ST, \
           [&] { CpAsyncSoftmax<T, VR, VS, MF, LD, ST><<<kRows, T, VS * T * 16>>>(b.in, b.out); });   \
  } while (0)
  CPA(1024, 4, 12, false, false, false);
  CPA(512, 8, 24, false, false, false);
  CPA(1024, 8, 8, true, false, false);
  CPA(1024, 8, 8, false, true, false);
  CPA(1024, 8, 8, false, false, true);
  CPA(1024, 8, 8, false, false, false);  // what fusebox prints now
  std::printf("done\n");
}
