// The experiments' shared harness: CHECK for CUDA calls, the Copy4 ceiling
// kernel, reproducible random inputs, a float64 check of softmax rows, and
// MedianMs, which
// times a launch as triton.testing.do_bench does (zero 256 MB by a fill
// kernel before each trial, CUDA events around the launch, the median);
// FLUSH_MEMSET=1 zeroes with cudaMemsetAsync instead (measured the same).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                             \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

__global__ void FillZero(int4* p, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    p[i] = int4{0, 0, 0, 0};
  }
}

// A streaming copy (the ceiling of a plain kernel over the same bytes), 4
// float4 in flight per thread, a block per 4 * 512 float4.
__global__ void __launch_bounds__(512) Copy4(const float4* __restrict__ in, float4* __restrict__ out) {
  const long long base = blockIdx.x * 2048LL + threadIdx.x;
  float4 v[4];
#pragma unroll
  for (int u = 0; u < 4; ++u) v[u] = __ldcs(in + base + u * 512);
#pragma unroll
  for (int u = 0; u < 4; ++u) __stcs(out + base + u * 512, v[u]);
}

// n floats uniform in [-half_width, half_width), from an LCG seeded `seed`.
inline std::vector<float> Random(size_t n, unsigned seed, float half_width) {
  std::vector<float> x(n);
  for (auto& v : x) {
    seed = seed * 1664525u + 1013904223u;
    v = ((seed >> 8) * (1.f / 16777216.f)) * (2 * half_width) - half_width;
  }
  return x;
}

// The largest error of y = softmax(x) over every 61st of `rows` rows of `n`,
// against float64.
inline double WorstSoftmaxError(const std::vector<float>& x, const std::vector<float>& y, int rows, int n) {
  double worst = 0;
  for (int r = 0; r < rows; r += 61) {
    const float* xr = x.data() + (size_t)r * n;
    double m = -INFINITY, s = 0;
    for (int j = 0; j < n; ++j) m = std::max(m, (double)xr[j]);
    for (int j = 0; j < n; ++j) s += std::exp(xr[j] - m);
    for (int j = 0; j < n; ++j) worst = std::max(worst, std::fabs(std::exp(xr[j] - m) / s - y[(size_t)r * n + j]));
  }
  return worst;
}

class MedianTimer {
 public:
  MedianTimer() {
    CHECK(cudaMalloc(&flush_, kFlushBytes));
    CHECK(cudaEventCreate(&start_));
    CHECK(cudaEventCreate(&end_));
  }
  template <typename F>
  double MedianMs(F launch, int trials = 60) {
    for (int i = 0; i < 5; ++i) launch();
    CHECK(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int i = 0; i < trials; ++i) {
      if (std::getenv("FLUSH_MEMSET")) {
        CHECK(cudaMemsetAsync(flush_, 0, kFlushBytes));
      } else {
        FillZero<<<132 * 4, 512>>>(reinterpret_cast<int4*>(flush_), kFlushBytes / 16);
      }
      CHECK(cudaEventRecord(start_));
      launch();
      CHECK(cudaEventRecord(end_));
      CHECK(cudaEventSynchronize(end_));
      float ms;
      CHECK(cudaEventElapsedTime(&ms, start_, end_));
      t.push_back(ms);
    }
    CHECK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }

 private:
  static constexpr size_t kFlushBytes = size_t{256} << 20;
  void* flush_ = nullptr;
  cudaEvent_t start_, end_;
};

// A softmax experiment over `rows` x `n` floats: the input (Random(rows * n,
// 4, 3)) on the GPU as x, the output as y. Report() prints a launch's median
// time, GB/s (read + write) and, with `check`, its float64 error; lines start
// with `label`. ReportCopy() reports Copy4 over the same bytes, the ceiling.
class SoftmaxRun {
 public:
  SoftmaxRun(MedianTimer& timer, int rows, int n, const char* label, int trials)
      : timer_(timer), rows_(rows), n_(n), label_(label), trials_(trials), hx_(Random((size_t)rows * n, 4, 3)),
        got_(hx_.size()) {
    CHECK(cudaMalloc(&x, bytes()));
    CHECK(cudaMalloc(&y, bytes()));
    CHECK(cudaMemcpy(x, hx_.data(), bytes(), cudaMemcpyHostToDevice));
  }
  ~SoftmaxRun() {
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
  }
  SoftmaxRun(const SoftmaxRun&) = delete;
  SoftmaxRun& operator=(const SoftmaxRun&) = delete;

  template <typename F>
  void Report(const char* name, bool check, F launch) {
    CHECK(cudaMemset(y, 0, bytes()));
    const double ms = timer_.MedianMs(launch, trials_);
    launch();
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(got_.data(), y, bytes(), cudaMemcpyDeviceToHost));
    const double worst = check ? WorstSoftmaxError(hx_, got_, rows_, n_) : 0;
    std::printf("%s %-44s %8.4f ms %7.0f GB/s  max abs err %.2e\n", label_, name, ms, 2.0 * bytes() / 1e9 / ms * 1e3,
                worst);
  }
  void ReportCopy(const char* name) {
    Report(name, false, [&] {
      Copy4<<<hx_.size() / 4 / 2048, 512>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y));
    });
  }

  float* x = nullptr;
  float* y = nullptr;

 private:
  size_t bytes() const { return hx_.size() * sizeof(float); }
  MedianTimer& timer_;
  const int rows_, n_;
  const char* label_;
  const int trials_;
  const std::vector<float> hx_;
  std::vector<float> got_;
};
