// A/B experiment (not part of the build): GPT-2 small's bf16 LayerNorm,
// [8192, 768] (B 8 x T 1024 rows, 25 MB read + written), which fusebox's
// forward profile puts at 68-70% of the 1 GiB copy's bandwidth (issue 24's
// memory-bound goal is 80%). Which row layout gets a 25 MB norm closest to a
// copy of the same bytes? Same method as short_rows.cu (timing.cuh: the
// L2 flushed before each trial, events around one launch, the median).
//   nvcc -O3 -std=c++17 -arch=sm_90a bench/experiments/gpt2_layer_norm.cu -o gpt2_layer_norm
// Variants (each a warp per row, lanes holding 3 16-byte groups of 8):
//   generated   fusebox's printed kernel: 32-thread blocks, a row each, the
//               weight and bias loaded after the two reductions
//   weights     the same, weight and bias loaded before the reductions
//   8 rows      256-thread blocks (a row a warp): past the 32-blocks-an-SM limit
//   2 rows      a warp takes two rows, both loaded before either reduces
//   N an SM     ptxas asked for N 256-thread blocks an SM (fewer registers)
//   persistent  a grid of resident warps walking the rows, the next row
//               loaded before the current one reduces
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "timing.cuh"

#include <cmath>
#include <cstring>
#include <cstdio>
#include <vector>

constexpr int kRows = 8192, kN = 768, kG = kN / 8 / 32;  // groups of 8 a lane: 3

__device__ __forceinline__ float Bf(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
__device__ __forceinline__ unsigned short ToBf(float f) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float Get(const uint4& g, int e) {
  const unsigned w = (&g.x)[e / 2];
  return Bf((unsigned short)(e & 1 ? w >> 16 : w & 0xffff));
}

// One row's statistics from its lane's groups: mean and 1 / sqrt(var + eps).
__device__ __forceinline__ void Stats(const uint4 (&x)[kG], float& mean, float& rstd) {
  float s = 0.f;
#pragma unroll
  for (int g = 0; g < kG; ++g)
#pragma unroll
    for (int e = 0; e < 8; ++e) s += Get(x[g], e);
  mean = WarpSum(s) * (1.f / kN);
  float v = 0.f;
#pragma unroll
  for (int g = 0; g < kG; ++g)
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float d = Get(x[g], e) - mean;
      v += d * d;
    }
  rstd = rsqrtf(WarpSum(v) * (1.f / kN) + 1e-5f);
}
__device__ __forceinline__ void Store(uint4* y, const uint4 (&x)[kG], const uint4 (&w)[kG], const uint4 (&b)[kG],
                                      float mean, float rstd, int lane) {
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    unsigned o[4];
#pragma unroll
    for (int e = 0; e < 8; e += 2) {
      const float lo = (Get(x[g], e) - mean) * rstd * Get(w[g], e) + Get(b[g], e);
      const float hi = (Get(x[g], e + 1) - mean) * rstd * Get(w[g], e + 1) + Get(b[g], e + 1);
      o[e / 2] = ToBf(lo) | (unsigned)ToBf(hi) << 16;
    }
    y[lane + 32 * g] = make_uint4(o[0], o[1], o[2], o[3]);
  }
}
__device__ __forceinline__ void Load(uint4 (&v)[kG], const uint4* p, int lane) {
#pragma unroll
  for (int g = 0; g < kG; ++g) v[g] = p[lane + 32 * g];
}

// kWeightsFirst: weight and bias before the reductions; rows per block from
// blockDim; kMinBlocks of 256 threads an SM asked of ptxas (0: no bound).
template <bool kWeightsFirst, int kMinBlocks = 0>
__global__ void __launch_bounds__(kMinBlocks ? 256 : 1024, kMinBlocks ? kMinBlocks : 1) RowPerWarp(const uint4* __restrict__ x, const uint4* __restrict__ w, const uint4* __restrict__ b,
                           uint4* __restrict__ y) {
  const int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  uint4 xv[kG], wv[kG], bv[kG];
  Load(xv, x + (size_t)row * (kN / 8), lane);
  if (kWeightsFirst) Load(wv, w, lane), Load(bv, b, lane);
  float mean, rstd;
  Stats(xv, mean, rstd);
  if (!kWeightsFirst) Load(wv, w, lane), Load(bv, b, lane);
  Store(y + (size_t)row * (kN / 8), xv, wv, bv, mean, rstd, lane);
}

__global__ void __launch_bounds__(256) TwoRowsPerWarp(const uint4* __restrict__ x, const uint4* __restrict__ w,
                                                      const uint4* __restrict__ b, uint4* __restrict__ y) {
  const int lane = threadIdx.x & 31, row = 2 * (blockIdx.x * 8 + threadIdx.x / 32);
  uint4 x0[kG], x1[kG], wv[kG], bv[kG];
  Load(x0, x + (size_t)row * (kN / 8), lane);
  Load(x1, x + (size_t)(row + 1) * (kN / 8), lane);
  Load(wv, w, lane), Load(bv, b, lane);
  float m0, r0, m1, r1;
  Stats(x0, m0, r0);
  Stats(x1, m1, r1);
  Store(y + (size_t)row * (kN / 8), x0, wv, bv, m0, r0, lane);
  Store(y + (size_t)(row + 1) * (kN / 8), x1, wv, bv, m1, r1, lane);
}

__global__ void __launch_bounds__(256, 4) Persistent(const uint4* __restrict__ x, const uint4* __restrict__ w,
                                                  const uint4* __restrict__ b, uint4* __restrict__ y) {
  const int lane = threadIdx.x & 31, warps = gridDim.x * 8;
  int row = blockIdx.x * 8 + threadIdx.x / 32;
  uint4 cur[kG], next[kG], wv[kG], bv[kG];
  Load(cur, x + (size_t)row * (kN / 8), lane);
  Load(wv, w, lane), Load(bv, b, lane);
  for (; row < kRows; row += warps) {
    const bool more = row + warps < kRows;
    if (more) Load(next, x + (size_t)(row + warps) * (kN / 8), lane);
    float mean, rstd;
    Stats(cur, mean, rstd);
    Store(y + (size_t)row * (kN / 8), cur, wv, bv, mean, rstd, lane);
#pragma unroll
    for (int g = 0; g < kG; ++g) cur[g] = next[g];
  }
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t n = (size_t)kRows * kN, bytes = n * 2;
  std::vector<unsigned short> hx(n), hw(kN), hb(kN), got(n);
  const std::vector<float> fx = Random(n, 4, 3), fw = Random(kN, 5, 1), fb = Random(kN, 6, 1);
  auto bf = [](float f) {  // round to nearest even, as __float2bfloat16_rn
    unsigned u;
    std::memcpy(&u, &f, 4);
    return (unsigned short)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
  };
  auto unbf = [](unsigned short h) {
    const unsigned u = (unsigned)h << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  for (size_t i = 0; i < n; ++i) hx[i] = bf(fx[i]);
  for (int i = 0; i < kN; ++i) hw[i] = bf(fw[i]), hb[i] = bf(fb[i]);
  uint4 *x, *w, *b, *y;
  CHECK(cudaMalloc(&x, bytes));
  CHECK(cudaMalloc(&y, bytes));
  CHECK(cudaMalloc(&w, kN * 2));
  CHECK(cudaMalloc(&b, kN * 2));
  CHECK(cudaMemcpy(x, hx.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(w, hw.data(), kN * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b, hb.data(), kN * 2, cudaMemcpyHostToDevice));
  MedianTimer timer;
  // The ceiling as fusebox's profiler measures it: a 1 GiB device-to-device copy.
  void *big_in, *big_out;
  const size_t big = size_t{1} << 30;
  CHECK(cudaMalloc(&big_in, big));
  CHECK(cudaMalloc(&big_out, big));
  const double big_ms = timer.MedianMs([&] { CHECK(cudaMemcpyAsync(big_out, big_in, big, cudaMemcpyDeviceToDevice)); }, 20);
  const double ceiling = 2.0 * big / 1e9 / big_ms * 1e3;
  std::printf("ceiling: 1 GiB copy %.3f ms, %.0f GB/s; %d SMs\n", big_ms, ceiling, sms);
  CHECK(cudaFree(big_in));
  CHECK(cudaFree(big_out));

  auto report = [&](const char* name, bool check, auto launch) {
    CHECK(cudaMemset(y, 0, bytes));
    const double ms = timer.MedianMs(launch, 100);
    launch();
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(got.data(), y, bytes, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int r = 0; check && r < kRows; r += 37) {
      double m = 0, v = 0;
      for (int j = 0; j < kN; ++j) m += unbf(hx[(size_t)r * kN + j]);
      m /= kN;
      for (int j = 0; j < kN; ++j) v += (unbf(hx[(size_t)r * kN + j]) - m) * (unbf(hx[(size_t)r * kN + j]) - m);
      const double rstd = 1 / std::sqrt(v / kN + 1e-5);
      for (int j = 0; j < kN; ++j) {
        const double want = (unbf(hx[(size_t)r * kN + j]) - m) * rstd * unbf(hw[j]) + unbf(hb[j]);
        worst = std::max(worst, std::fabs(want - unbf(got[(size_t)r * kN + j])) / (1 + std::fabs(want)));
      }
    }
    const double gbs = 2.0 * bytes / 1e9 / ms * 1e3;
    std::printf("%-34s %8.4f ms %6.0f GB/s %5.1f%% of the copy ceiling  max rel err %.1e\n", name, ms, gbs,
                100 * gbs / ceiling, worst);
  };
  report("copy (25 MB, Copy4)", false,
         [&] { Copy4<<<n / 8 / 2048, 512>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y)); });
  report("generated (32-thread blocks)", true, [&] { RowPerWarp<false><<<kRows, 32>>>(x, w, b, y); });
  report("weights first", true, [&] { RowPerWarp<true><<<kRows, 32>>>(x, w, b, y); });
  report("8 rows a block", true, [&] { RowPerWarp<false><<<kRows / 8, 256>>>(x, w, b, y); });
  report("8 rows a block, weights first", true, [&] { RowPerWarp<true><<<kRows / 8, 256>>>(x, w, b, y); });
  report("8 rows a block, 6 an SM (42 registers)", true, [&] { RowPerWarp<false, 6><<<kRows / 8, 256>>>(x, w, b, y); });
  report("8 rows a block, 8 an SM (32 registers)", true, [&] { RowPerWarp<false, 8><<<kRows / 8, 256>>>(x, w, b, y); });
  report("2 rows a warp", true, [&] { TwoRowsPerWarp<<<kRows / 16, 256>>>(x, w, b, y); });
  for (int per_sm : {2, 3, 4}) {
    char name[64];
    std::snprintf(name, sizeof name, "persistent, %d blocks an SM", per_sm);
    report(name, true, [&] { Persistent<<<sms * per_sm, 256>>>(x, w, b, y); });
  }
  return 0;
}
