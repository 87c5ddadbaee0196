// A/B experiment (not part of the build): row and column sums of an 8192 x
// 8192 f32 matrix on the H200, the issue-6 rows under their goals (row sum
// 4000 GB/s, column sum 3900). Same method as long_softmax.cu: zero 256 MB
// before each trial, CUDA events, median; a read-only pass over the same
// bytes is the ceiling these kernels can reach under that flush.
//   nvcc -O3 -std=c++17 -arch=sm_90a bench/experiments/sums.cu -o sums
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "timing.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

constexpr int kN = 8192;  // rows = columns

__device__ __forceinline__ float Sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }
__device__ __forceinline__ float4 Add4(float4 a, float4 b) { return {a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w}; }

// Read ceiling: every thread sums its float4s; one store per block.
__global__ void ReadAll(const float4* __restrict__ in, long long n4, float* __restrict__ out) {
  float s = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
    s += Sum4(__ldcs(in + i));
  }
  if (s == 12345.f) out[blockIdx.x] = s;  // keeps the loads
}

// ---- column sums ----
// fusebox's layout: a thread per column, blockIdx.y takes rows [y * R,
// (y + 1) * R), U rows in flight; then a combine over the partials.
template <int T, int U>
__global__ void __launch_bounds__(T) ColPartial1(const float* __restrict__ in, float* __restrict__ partial, int rows_per_chunk) {
  const int col = blockIdx.x * T + threadIdx.x;
  const float* p = in + (long long)blockIdx.y * rows_per_chunk * kN + col;
  float acc = 0;
  for (int r = 0; r < rows_per_chunk; r += U) {
    float v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = __ldcs(p + (long long)(r + u) * kN);
#pragma unroll
    for (int u = 0; u < U; ++u) acc += v[u];
  }
  partial[(long long)blockIdx.y * kN + col] = acc;
}
// PDL: launched as a programmatic dependent of the partial kernel (session
// 10), the combine may start before it ends and waits here for its results.
__global__ void ColCombine(const float* __restrict__ partial, int chunks, float* __restrict__ out) {
  asm volatile("griddepcontrol.wait;" ::: "memory");  // a no-op unless launched as a dependent
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= kN) return;
  float s = 0;
  for (int p = 0; p < chunks; ++p) s += partial[(long long)p * kN + c];
  out[c] = s;
}
// A tile's fold: a thread's U rows, then the block's TY partial rows
// through shared memory; the sum is valid in the threads with ty == 0.
template <int TX, int TY, int U>
__device__ __forceinline__ float4 FoldTile(const float4 (&v)[U], float4 (&fold)[TY][TX], int tx, int ty) {
  float4 acc = v[0];
#pragma unroll
  for (int u = 1; u < U; ++u) acc = Add4(acc, v[u]);
  fold[ty][tx] = acc;
  __syncthreads();
  if (ty == 0) {
#pragma unroll
    for (int y = 1; y < TY; ++y) acc = Add4(acc, fold[y][tx]);
  }
  return acc;
}
// Short-lived 2-D tiles, like a row sum's blocks: TX threads along the
// columns (a float4 each) by TY along the rows, each thread loading U rows
// (TY apart) at once; the block folds its TY partial rows in shared memory
// and writes one partial row of 4 * TX columns for its TY * U rows.
template <int TX, int TY, int U, bool HINT>
__device__ __forceinline__ void ColTilePartial(const float* __restrict__ in, float* __restrict__ partial,
                                               float4 (&fold)[TY][TX]) {
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  const int col4 = blockIdx.x * TX + tx;
  const long long row0 = (long long)blockIdx.y * (TY * U) + ty;
  const float4* p = reinterpret_cast<const float4*>(in) + row0 * (kN / 4) + col4;
  float4 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u) v[u] = HINT ? __ldcs(p + (long long)u * TY * (kN / 4)) : p[(long long)u * TY * (kN / 4)];
  const float4 acc = FoldTile<TX, TY, U>(v, fold, tx, ty);
  if (ty == 0) {
    reinterpret_cast<float4*>(partial)[(long long)blockIdx.y * (kN / 4) + col4] = acc;
  }
}
template <int TX, int TY, int U, bool HINT = true>
__global__ void __launch_bounds__(TX * TY) ColTile(const float* __restrict__ in, float* __restrict__ partial) {
  __shared__ float4 fold[TY][TX];
  ColTilePartial<TX, TY, U, HINT>(in, partial, fold);
}

// Session 11: ColTile's serial fold (one thread per column walks all TY
// partial rows while the block holds its slot with no load in flight) as a
// two-stage tree: TY / 8 threads per column each fold 8 rows, then one thread
// folds those. TRIGGER lets a programmatic dependent (the combine) launch at
// once; ROWS_FIRST orders blocks row group fastest instead of column strip.
template <int TX, int TY, int U, bool TRIGGER, bool ROWS_FIRST = false>
__global__ void __launch_bounds__(TX * TY) ColTree(const float* __restrict__ in, float* __restrict__ partial) {
  static_assert(TY % 8 == 0);
  if constexpr (TRIGGER) asm volatile("griddepcontrol.launch_dependents;");
  __shared__ float4 fold[TY][TX];
  __shared__ float4 fold8[8][TX];
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  const int strip = ROWS_FIRST ? blockIdx.y : blockIdx.x, group = ROWS_FIRST ? blockIdx.x : blockIdx.y;
  const int col4 = strip * TX + tx;
  const long long row0 = (long long)group * (TY * U) + ty;
  const float4* p = reinterpret_cast<const float4*>(in) + row0 * (kN / 4) + col4;
  float4 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u) v[u] = __ldcs(p + (long long)u * TY * (kN / 4));
  float4 acc = v[0];
#pragma unroll
  for (int u = 1; u < U; ++u) acc = Add4(acc, v[u]);
  fold[ty][tx] = acc;
  __syncthreads();
  if (ty < 8) {
#pragma unroll
    for (int y = ty + 8; y < TY; y += 8) acc = Add4(acc, fold[y][tx]);
    fold8[ty][tx] = acc;
  }
  __syncthreads();
  if (ty == 0) {
#pragma unroll
    for (int y = 1; y < 8; ++y) acc = Add4(acc, fold8[y][tx]);
    reinterpret_cast<float4*>(partial)[(long long)group * (kN / 4) + col4] = acc;
  }
}
// Session 11, call 3: where a tile's rows and strips lie. MODE 0: thread
// rows ty + u * TY (ColTree's); 1: each thread's U rows adjacent (ty * U +
// u); 2: strips rotated by the row group ((x + y) % strips), so blocks
// running together read different column offsets of different rows.
template <int TX, int TY, int U, int MODE>
__global__ void __launch_bounds__(TX * TY) ColPlace(const float* __restrict__ in, float* __restrict__ partial) {
  __shared__ float4 fold[TY][TX];
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  constexpr int strips = kN / 4 / TX;
  const int group = blockIdx.y;
  const int strip = MODE == 2 ? (blockIdx.x + blockIdx.y) % strips : blockIdx.x;
  const int col4 = strip * TX + tx;
  const float4* base = reinterpret_cast<const float4*>(in) + col4;
  float4 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const long long row = (long long)group * (TY * U) + (MODE == 1 ? ty * U + u : ty + u * TY);
    v[u] = __ldcs(base + row * (kN / 4));
  }
  const float4 acc = FoldTile<TX, TY, U>(v, fold, tx, ty);
  if (ty == 0) {
    reinterpret_cast<float4*>(partial)[(long long)group * (kN / 4) + col4] = acc;
  }
}
// The row sum's block shape as a column partial: a block of 1024 reads R whole rows (2 float4 per thread per row,
// all R * 2 loads at once) and stores one partial row; R = 8 is 1024
// partial rows (the combine reads 32 MB): only to see what the access
// pattern alone costs against ColPlace, not a candidate.
template <int R>
__global__ void __launch_bounds__(1024) ColRowBlocks(const float* __restrict__ in, float* __restrict__ partial) {
  const float4* p = reinterpret_cast<const float4*>(in) + (long long)blockIdx.x * R * (kN / 4) + threadIdx.x;
  float4 v[R][2];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int c = 0; c < 2; ++c) v[r][c] = __ldcs(p + (long long)r * (kN / 4) + c * 1024);
  float4* out = reinterpret_cast<float4*>(partial) + (long long)blockIdx.x * (kN / 4) + threadIdx.x;
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    float4 acc = v[0][c];
#pragma unroll
    for (int r = 1; r < R; ++r) acc = Add4(acc, v[r][c]);
    out[c * 1024] = acc;
  }
}

// Session 11, prepared for the next session (compiled, not yet run): one
// launch and no partial buffer. A cluster of C blocks covers one 64-column
// strip over all 8192 rows (block `rank` takes rows [rank * 8192 / C, ...),
// S tile steps of TY * U rows each); each block folds its rows into one
// row of 16 float4 in shared memory, and rank 0 sums the C rows through
// distributed shared memory and stores the column sums. C = 16 needs the
// non-portable cluster size (cudaFuncAttributeNonPortableClusterSizeAllowed).
template <int TX, int TY, int U, int C>
__global__ void __launch_bounds__(TX * TY) ColCluster(const float* __restrict__ in, float* __restrict__ out) {
  namespace cg = cooperative_groups;
  constexpr int kRowsPerBlock = kN / C, kSteps = kRowsPerBlock / (TY * U);
  static_assert(kSteps * TY * U * C == kN);
  __shared__ float4 fold[TY][TX];
  __shared__ float4 block_row[TX];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = (int)cluster.block_rank();
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  const int col4 = blockIdx.x * TX + tx;
  const float4* p = reinterpret_cast<const float4*>(in) + ((long long)rank * kRowsPerBlock + ty) * (kN / 4) + col4;
  float4 acc{0, 0, 0, 0};
  for (int step = 0; step < kSteps; ++step) {
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = __ldcs(p + ((long long)step * TY * U + u * TY) * (kN / 4));
#pragma unroll
    for (int u = 0; u < U; ++u) acc = Add4(acc, v[u]);
  }
  fold[ty][tx] = acc;
  __syncthreads();
  if (ty == 0) {
#pragma unroll 8
    for (int y = 1; y < TY; ++y) acc = Add4(acc, fold[y][tx]);
    block_row[tx] = acc;
  }
  cluster.sync();  // every block's row is in its shared memory
  if (rank == 0 && ty == 0) {
    float4 sum = block_row[tx];
    for (int c = 1; c < C; ++c) sum = Add4(sum, *cluster.map_shared_rank(&block_row[tx], c));
    reinterpret_cast<float4*>(out)[col4] = sum;
  }
  cluster.sync();  // the other blocks keep their shared memory until rank 0 has read it
}

// Session 12: ColTile with the load's PTX spelled out. H -1: __ldcs
// (ColTile's); 0: ld.global.cs; 1: .cs with the L2::256B prefetch size; 2:
// .nc L1::no_allocate with L2::256B; 3: L1::no_allocate with an L2
// evict-first policy.
template <int H>
__device__ __forceinline__ float4 LoadHinted(const float4* p) {
  float4 v;
  if constexpr (H < 0) {
    v = __ldcs(p);
  } else if constexpr (H == 0) {
    asm volatile("ld.global.cs.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  } else if constexpr (H == 1) {
    asm volatile("ld.global.cs.L2::256B.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  } else if constexpr (H == 2) {
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  } else {
    unsigned long long policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.f32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p), "l"(policy));
  }
  return v;
}
// Block (blockIdx.x, blockIdx.y)'s tile: U rows TY apart per thread, loaded
// by LoadHinted<H>, folded; the sum of the block's TY * U rows where ty == 0.
template <int TX, int TY, int U, int H>
__device__ __forceinline__ float4 TileSum(const float* __restrict__ in, float4 (&fold)[TY][TX], int tx, int ty) {
  const int col4 = blockIdx.x * TX + tx;
  const float4* p = reinterpret_cast<const float4*>(in) + ((long long)blockIdx.y * (TY * U) + ty) * (kN / 4) + col4;
  float4 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u) v[u] = LoadHinted<H>(p + (long long)u * TY * (kN / 4));
  return FoldTile<TX, TY, U>(v, fold, tx, ty);
}
template <int TX, int TY, int U, int H>
__global__ void __launch_bounds__(TX * TY) ColTileHinted(const float* __restrict__ in, float* __restrict__ partial) {
  __shared__ float4 fold[TY][TX];
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  const float4 acc = TileSum<TX, TY, U, H>(in, fold, tx, ty);
  if (ty == 0) reinterpret_cast<float4*>(partial)[(long long)blockIdx.y * (kN / 4) + blockIdx.x * TX + tx] = acc;
}
// Session 12: one launch after a memset of the output: ColTile's partial
// row goes straight into the column sums as float4 atomics (sm_90's
// red.global.add.v4.f32); the order of the adds, so the last bits of the
// sum, differs from run to run.
template <int TX, int TY, int U>
__global__ void __launch_bounds__(TX * TY) ColTileAtomic(const float* __restrict__ in, float* __restrict__ out) {
  __shared__ float4 fold[TY][TX];
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  const float4 acc = TileSum<TX, TY, U, -1>(in, fold, tx, ty);
  if (ty == 0) atomicAdd(reinterpret_cast<float4*>(out) + blockIdx.x * TX + tx, acc);
}

// The combine as float4 columns, 64 threads per block (32 blocks).
__global__ void ColCombine4(const float* __restrict__ partial, int chunks, float* __restrict__ out) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= kN / 4) return;
  const float4* p = reinterpret_cast<const float4*>(partial) + c;
  float4 s{0, 0, 0, 0};
#pragma unroll 8
  for (int q = 0; q < chunks; ++q) s = Add4(s, p[(long long)q * (kN / 4)]);
  reinterpret_cast<float4*>(out)[c] = s;
}

// Session 13: the combine with the chunk count known (as fusebox prints it,
// fully unrolled: a thread's 32 loads at once) and split over S threads per
// column: a block of CW columns by S, thread (c, s) folds chunks s, s + S,
// ...; then the S values of each column through shared memory. More
// threads, fewer loads each: ncu put fusebox's combine (32 blocks of 256)
// at 3.4 us after the partial kernel's 63 us.
template <int CW, int S, int CHUNKS>
__global__ void __launch_bounds__(CW * S) ColCombineSplit(const float* __restrict__ partial, int, float* __restrict__ out) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  __shared__ float fold[S][CW];
  const int cx = threadIdx.x % CW, sy = threadIdx.x / CW, c = blockIdx.x * CW + cx;
  float v[CHUNKS / S];
#pragma unroll
  for (int q = 0; q < CHUNKS / S; ++q) v[q] = partial[(long long)(sy + q * S) * kN + c];
  float acc = v[0];
#pragma unroll
  for (int q = 1; q < CHUNKS / S; ++q) acc += v[q];
  if constexpr (S == 1) {
    out[c] = acc;
  } else {
    fold[sy][cx] = acc;
    __syncthreads();
    if (sy == 0) {
#pragma unroll
      for (int q = 1; q < S; ++q) acc += fold[q][cx];
      out[c] = acc;
    }
  }
}

// One launch (session 10): ColTile's partial rows, then the last block to
// finish each column strip (an arrival counter per strip, reset by that
// block) folds the strip's partials, TY threads per column in parallel,
// instead of a second kernel of a thread per column walking all partials.
template <int TX, int TY, int U>
__global__ void __launch_bounds__(TX * TY) ColTileLast(const float* __restrict__ in, float* __restrict__ partial,
                                                      unsigned* __restrict__ count, float* __restrict__ out) {
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  const int col4 = blockIdx.x * TX + tx;
  __shared__ float4 fold[TY][TX];
  __shared__ bool last;
  ColTilePartial<TX, TY, U, true>(in, partial, fold);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&count[blockIdx.x], 1u) == gridDim.y - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  float4 acc{0, 0, 0, 0};
  for (int q = ty; q < (int)gridDim.y; q += TY) acc = Add4(acc, __ldcg(reinterpret_cast<const float4*>(partial) + (long long)q * (kN / 4) + col4));
  fold[ty][tx] = acc;
  __syncthreads();
  if (ty == 0) {
    for (int y = 1; y < TY; ++y) acc = Add4(acc, fold[y][tx]);
    reinterpret_cast<float4*>(out)[col4] = acc;
    if (tx == 0) count[blockIdx.x] = 0;
  }
}

// Row-shaped column blocks (session 9): a block of T threads covers whole
// rows (each thread kN / 4 / T float4 columns) and walks R consecutive rows,
// U rows' loads in flight, so each block reads one contiguous R * 32 KB run,
// as the row sum's blocks do (3987 GB/s with `ldcs`, against 3670-3725 for
// the tiles); one partial row per block, then the combine over kN / R.
template <int T, int R, int U>
__global__ void __launch_bounds__(T) ColRows(const float* __restrict__ in, float* __restrict__ partial) {
  constexpr int C = kN / 4 / T;  // float4 columns per thread
  const float4* p = reinterpret_cast<const float4*>(in) + (long long)blockIdx.x * R * (kN / 4) + threadIdx.x;
  float4 acc[C];
#pragma unroll
  for (int c = 0; c < C; ++c) acc[c] = float4{0, 0, 0, 0};
  for (int r = 0; r < R; r += U) {
    float4 v[U][C];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int c = 0; c < C; ++c) v[u][c] = __ldcs(p + (long long)(r + u) * (kN / 4) + c * T);
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int c = 0; c < C; ++c) acc[c] = Add4(acc[c], v[u][c]);
  }
  float4* out = reinterpret_cast<float4*>(partial) + (long long)blockIdx.x * (kN / 4) + threadIdx.x;
#pragma unroll
  for (int c = 0; c < C; ++c) out[c * T] = acc[c];
}

// ---- row sums ----
// Block of T threads per row, float4 loads, all of a thread's loads issued first.
template <int T, bool HINT = true>
__global__ void __launch_bounds__(T) RowSumBlock(const float* __restrict__ in, float* __restrict__ out) {
  constexpr int V = kN / 4 / T;
  const float4* p = reinterpret_cast<const float4*>(in) + (long long)blockIdx.x * (kN / 4);
  float4 v[V];
#pragma unroll
  for (int q = 0; q < V; ++q) v[q] = HINT ? __ldcs(p + threadIdx.x + q * T) : p[threadIdx.x + q * T];
  float s = 0;
#pragma unroll
  for (int q = 0; q < V; ++q) s += Sum4(v[q]);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  __shared__ float w[32];
  if ((threadIdx.x & 31) == 0) w[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < T / 32 ? w[threadIdx.x] : 0;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
  }
}
int main(int argc, char** argv) {
  // Arguments: run only the cases whose names hold one of them.
  auto wanted = [&](const char* name) {
    for (int i = 1; i < argc; ++i)
      if (std::strstr(name, argv[i])) return true;
    return argc == 1;
  };
  const size_t n = (size_t)kN * kN, bytes = n * 4;
  float *in, *out, *partial;
  MedianTimer t;
  CHECK(cudaMalloc(&in, bytes));
  CHECK(cudaMalloc(&out, kN * 4));
  CHECK(cudaMalloc(&partial, 4096 * kN * 4));  // ColRowBlocks<2>: 4096 partial rows
  const std::vector<float> x = Random(n, 777, 1);
  CHECK(cudaMemcpy(in, x.data(), bytes, cudaMemcpyHostToDevice));
  std::vector<double> col(kN, 0), row(kN, 0);
  for (int r = 0; r < kN; ++r)
    for (int c = 0; c < kN; ++c) col[c] += x[(size_t)r * kN + c], row[r] += x[(size_t)r * kN + c];
  int sms;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const double gb = bytes / 1e9;
  auto check = [&](const std::vector<double>& want) {
    std::vector<float> got(kN);
    CHECK(cudaMemcpy(got.data(), out, kN * 4, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int i = 0; i < kN; ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
    return worst;
  };
  auto report = [&](const char* name, const std::vector<double>* want, auto launch) {
    if (!wanted(name)) return;
    CHECK(cudaMemset(out, 0, kN * 4));
    const double ms = t.MedianMs(launch, 80);
    launch();
    CHECK(cudaDeviceSynchronize());
    std::printf("%-48s %8.4f ms %7.0f GB/s  max abs err %.2e\n", name, ms, gb / ms * 1e3, want ? check(*want) : 0.0);
  };
  for (int k : {4, 8, 16}) {
    char name[64];
    std::snprintf(name, sizeof name, "read all (ceiling), %d blocks/SM x 512", k);
    report(name, nullptr, [&] { ReadAll<<<sms * k, 512>>>((const float4*)in, n / 4, out); });
  }
  // A column sum's two launches: `partials` writes `chunks` partial rows, the combine folds them.
  auto col_partials = [&](const std::string& name, int chunks, auto partials) {
    report((name + " + combine").c_str(), &col, [&] {
      partials();
      ColCombine<<<kN / 256, 256>>>(partial, chunks, out);
    });
  };
  // The same, the combine launched with programmatic stream serialization.
  auto col_partials_pdl = [&](const std::string& name, int chunks, auto partials) {
    report((name + " + PDL combine").c_str(), &col, [&] {
      partials();
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr.val.programmaticStreamSerializationAllowed = 1;
      cudaLaunchConfig_t config{};
      config.gridDim = kN / 256;
      config.blockDim = 256;
      config.attrs = &attr;
      config.numAttrs = 1;
      CHECK(cudaLaunchKernelEx(&config, ColCombine, (const float*)partial, chunks, out));
    });
  };
#define COL1(T, U, CHUNKS)                                                                     \
  col_partials("col scalar T=" #T " U=" #U " chunks=" #CHUNKS, CHUNKS,                         \
               [&] { ColPartial1<T, U><<<dim3(kN / T, CHUNKS), T>>>(in, partial, kN / CHUNKS); })
  COL1(256, 8, 16);
#define COLTILE(TX, TY, U, ...)                                                                \
  col_partials("col tile TX=" #TX " TY=" #TY " U=" #U " " #__VA_ARGS__, kN / (TY * U), [&] {   \
    ColTile<TX, TY, U __VA_OPT__(, ) __VA_ARGS__><<<dim3(kN / 4 / TX, kN / (TY * U)), TX * TY>>>(in, partial); \
  })
  COLTILE(32, 32, 8);
  COLTILE(32, 32, 8, false);
  COLTILE(32, 32, 4);
  COLTILE(32, 16, 8);
  COLTILE(16, 64, 4);
  COLTILE(32, 8, 32);
  COLTILE(32, 32, 2);
  COLTILE(64, 16, 4);
  COLTILE(32, 16, 16, false);
  col_partials_pdl("col tile TX=16 TY=64 U=4", kN / 256,
                   [&] { ColTile<16, 64, 4><<<dim3(kN / 4 / 16, kN / 256), 1024>>>(in, partial); });
  col_partials_pdl("col tile TX=32 TY=32 U=8", kN / 256,
                   [&] { ColTile<32, 32, 8><<<dim3(kN / 4 / 32, kN / 256), 1024>>>(in, partial); });
  col_partials_pdl("col scalar T=256 U=8 chunks=16", 16,
                   [&] { ColPartial1<256, 8><<<dim3(kN / 256, 16), 256>>>(in, partial, kN / 16); });
  // Session 11: the tree fold, the early trigger, the float4 combine.
  auto pdl_launch = [&](auto kernel, int grid, int block, int chunks) {
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.attrs = &attr;
    config.numAttrs = 1;
    CHECK(cudaLaunchKernelEx(&config, kernel, (const float*)partial, chunks, out));
  };
#define COLTREE(TX, TY, U, TRIG, ROWS_FIRST, COMBINE)                                                   \
  report("col tree TX=" #TX " TY=" #TY " U=" #U " trigger=" #TRIG " rows_first=" #ROWS_FIRST " " #COMBINE, \
         &col, [&] {                                                                                    \
           const int groups = kN / (TY * U), strips = kN / 4 / TX;                                       \
           ColTree<TX, TY, U, TRIG, ROWS_FIRST>                                                         \
               <<<ROWS_FIRST ? dim3(groups, strips) : dim3(strips, groups), TX * TY>>>(in, partial);    \
           if (#COMBINE[0] == 'p') {                                                                    \
             pdl_launch(ColCombine, kN / 256, 256, groups);                                             \
           } else if (#COMBINE[0] == 'v') {                                                             \
             pdl_launch(ColCombine4, kN / 4 / 64, 64, groups);                                          \
           } else if (#COMBINE[0] == 't') {                                                             \
             ColCombine<<<kN / 256, 256>>>(partial, groups, out);                                       \
           }                                                                                            \
         })
  COLTREE(16, 64, 4, false, false, two_launches);
  COLTREE(16, 64, 4, false, false, pdl);
  COLTREE(16, 64, 4, true, false, pdl);
  COLTREE(16, 64, 4, true, false, vec_pdl);
  COLTREE(16, 64, 4, true, true, pdl);
  COLTREE(32, 32, 8, true, false, pdl);
  COLTREE(16, 32, 8, true, false, pdl);
  COLTREE(8, 128, 2, true, false, pdl);
  COLTREE(16, 64, 8, true, false, pdl);
  COLTREE(32, 32, 4, true, false, pdl);
  COLTREE(64, 16, 8, true, false, pdl);
  COLTREE(16, 64, 2, true, false, pdl);
  // A tile kernel's partial launch alone (no combine), over (strips, row groups).
  auto tile_partial_only = [&](const std::string& name, int tx, int ty, int u, void (*kernel)(const float*, float*)) {
    report((name + " partial only").c_str(), nullptr,
           [&] { kernel<<<dim3(kN / 4 / tx, kN / (ty * u)), tx * ty>>>(in, partial); });
  };
#define COLPLACE(TX, TY, U, MODE) \
  tile_partial_only("col place TX=" #TX " TY=" #TY " U=" #U " mode=" #MODE, TX, TY, U, ColPlace<TX, TY, U, MODE>)
  COLPLACE(16, 64, 4, 0);
  COLPLACE(16, 64, 4, 1);
  COLPLACE(16, 64, 4, 2);
  COLPLACE(32, 32, 8, 1);
  COLPLACE(16, 32, 8, 1);
  COLPLACE(16, 64, 8, 1);
  COLPLACE(32, 32, 4, 2);
  COLPLACE(16, 64, 4, 0);
  report("col row blocks R=2 partial only", nullptr, [&] { ColRowBlocks<2><<<kN / 2, 1024>>>(in, partial); });
  report("col row blocks R=4 partial only", nullptr, [&] { ColRowBlocks<4><<<kN / 4, 1024>>>(in, partial); });
  report("col row blocks R=8 partial only", nullptr, [&] { ColRowBlocks<8><<<kN / 8, 1024>>>(in, partial); });
#define COLCLUSTER(TX, TY, U, C)                                                                        \
  {                                                                                                      \
    if (C > 8) CHECK(cudaFuncSetAttribute(ColCluster<TX, TY, U, C>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1)); \
    cudaLaunchAttribute attr{};                                                                          \
    attr.id = cudaLaunchAttributeClusterDimension;                                                       \
    attr.val.clusterDim.x = 1;                                                                           \
    attr.val.clusterDim.y = C;                                                                           \
    attr.val.clusterDim.z = 1;                                                                           \
    cudaLaunchConfig_t config{};                                                                         \
    config.gridDim = dim3(kN / 4 / TX, C);                                                               \
    config.blockDim = TX * TY;                                                                           \
    config.attrs = &attr;                                                                                \
    config.numAttrs = 1;                                                                                 \
    report("col cluster TX=" #TX " TY=" #TY " U=" #U " C=" #C " (one launch)", &col,                     \
           [&] { CHECK(cudaLaunchKernelEx(&config, ColCluster<TX, TY, U, C>, (const float*)in, out)); });  \
  }
  COLCLUSTER(16, 64, 4, 16);
  COLCLUSTER(16, 64, 4, 8);
  COLCLUSTER(16, 32, 8, 16);
  COLCLUSTER(32, 32, 4, 16);
  COLCLUSTER(16, 64, 8, 8);
  COLCLUSTER(16, 16, 4, 8);
  COLCLUSTER(16, 32, 4, 8);
  COLCLUSTER(16, 32, 4, 16);
  COLCLUSTER(16, 16, 4, 16);
  COLCLUSTER(32, 16, 4, 8);
  COLCLUSTER(16, 64, 4, 4);
  COLCLUSTER(16, 64, 4, 2);
#define COLATOMIC(TX, TY, U)                                                                   \
  report("col tile atomic TX=" #TX " TY=" #TY " U=" #U " (memset + one launch)", &col, [&] {   \
    CHECK(cudaMemsetAsync(out, 0, kN * 4));                                                    \
    ColTileAtomic<TX, TY, U><<<dim3(kN / 4 / TX, kN / (TY * U)), TX * TY>>>(in, out);          \
  })
  COLATOMIC(16, 64, 4);
  COLATOMIC(32, 32, 8);
  COLATOMIC(16, 64, 8);
  COLATOMIC(16, 32, 8);
  COLATOMIC(256, 4, 4);
  COLATOMIC(128, 8, 4);
  COLATOMIC(512, 2, 4);
  COLATOMIC(256, 2, 8);
  COLATOMIC(64, 16, 4);
  // Wider strips (H = 0: the ld.global.cs of ColTile's __ldcs), then the other load flavors.
#define COLHINT(TX, TY, U, H) \
  tile_partial_only("col hinted tile TX=" #TX " TY=" #TY " U=" #U " H=" #H, TX, TY, U, ColTileHinted<TX, TY, U, H>)
  COLHINT(16, 64, 4, 0);
  COLHINT(32, 32, 4, 0);
  COLHINT(64, 16, 4, 0);
  COLHINT(128, 8, 4, 0);
  COLHINT(256, 4, 4, 0);
  COLHINT(512, 2, 4, 0);
  COLHINT(256, 4, 8, 0);
  COLHINT(256, 2, 8, 0);
  COLHINT(512, 1, 8, 0);
  COLHINT(64, 8, 8, 0);
  COLHINT(16, 64, 4, 1);
  COLHINT(16, 64, 4, 2);
  COLHINT(16, 64, 4, 3);
  COLHINT(256, 4, 4, 1);
  COLHINT(256, 4, 4, 2);
  report("col memset alone", nullptr, [&] { CHECK(cudaMemsetAsync(out, 0, kN * 4)); });
  report("col tree TX=16 TY=64 U=4 partial only", nullptr,
         [&] { ColTree<16, 64, 4, false><<<dim3(kN / 4 / 16, kN / 256), 1024>>>(in, partial); });
  report("col tree TX=32 TY=32 U=8 partial only", nullptr,
         [&] { ColTree<32, 32, 8, false><<<dim3(kN / 4 / 32, kN / 256), 1024>>>(in, partial); });
  // The partial launch alone (no combine): what the second kernel costs.
  report("col tile TX=16 TY=64 U=4 partial only", nullptr,
         [&] { ColTile<16, 64, 4><<<dim3(kN / 4 / 16, kN / 256), 1024>>>(in, partial); });
  report("col tile TX=32 TY=32 U=8 partial only", nullptr,
         [&] { ColTile<32, 32, 8><<<dim3(kN / 4 / 32, kN / 256), 1024>>>(in, partial); });
  report("col scalar T=256 U=8 chunks=16 partial only", nullptr,
         [&] { ColPartial1<256, 8><<<dim3(kN / 256, 16), 256>>>(in, partial, kN / 16); });
  unsigned* count;
  CHECK(cudaMalloc(&count, kN * 4));
  CHECK(cudaMemset(count, 0, kN * 4));
#define COLLAST(TX, TY, U)                                                                     \
  report("col tile last-block fold TX=" #TX " TY=" #TY " U=" #U, &col, [&] {                  \
    ColTileLast<TX, TY, U><<<dim3(kN / 4 / TX, kN / (TY * U)), TX * TY>>>(in, partial, count, out); \
  })
  COLLAST(16, 64, 4);
  COLLAST(32, 32, 8);
  COLLAST(32, 32, 4);
  COLLAST(16, 64, 2);
  COLLAST(32, 16, 8);
  COLLAST(16, 32, 8);
#define COLROWS(T, R, U) \
  col_partials("col rows T=" #T " R=" #R " U=" #U, kN / R, [&] { ColRows<T, R, U><<<kN / R, T>>>(in, partial); })
  COLROWS(1024, 32, 2);
  COLROWS(1024, 32, 4);
  COLROWS(1024, 64, 4);
  COLROWS(512, 32, 2);
  COLROWS(512, 64, 2);
  COLROWS(256, 64, 1);
  COLROWS(1024, 16, 2);
  // Session 13: fusebox's default partial (ColTile 16 x 64 x 4, 32 chunks), then each split combine by PDL.
#define COLSPLIT(CW, S)                                                                               \
  report("col tile TX=16 TY=64 U=4 + PDL combine split CW=" #CW " S=" #S, &col, [&] {                 \
    ColTile<16, 64, 4><<<dim3(kN / 4 / 16, kN / 256), 1024>>>(in, partial);                           \
    pdl_launch(ColCombineSplit<CW, S, kN / 256>, kN / CW, CW * S, kN / 256);                           \
  })
  COLSPLIT(256, 1);
  COLSPLIT(64, 1);
  COLSPLIT(32, 1);
  COLSPLIT(32, 2);
  COLSPLIT(32, 4);
  COLSPLIT(32, 8);
  COLSPLIT(64, 4);
  COLSPLIT(128, 2);
  COLSPLIT(32, 32);
  COLSPLIT(64, 16);
  COLSPLIT(256, 1);
  // Session 13: fewer bytes in flight per block (U = 2: 32 KB, the row sum's), partial launch alone.
  tile_partial_only("col tile v13 TX=16 TY=64 U=2", 16, 64, 2, ColTile<16, 64, 2>);
  tile_partial_only("col tile v13 TX=16 TY=32 U=4", 16, 32, 4, ColTile<16, 32, 4>);
  tile_partial_only("col tile v13 TX=16 TY=32 U=2", 16, 32, 2, ColTile<16, 32, 2>);
  tile_partial_only("col tile v13 TX=32 TY=32 U=2", 32, 32, 2, ColTile<32, 32, 2>);
  tile_partial_only("col tile v13 TX=16 TY=16 U=4", 16, 16, 4, ColTile<16, 16, 4>);
  tile_partial_only("col tile v13 TX=8 TY=64 U=4", 8, 64, 4, ColTile<8, 64, 4>);
  tile_partial_only("col tile v13 TX=16 TY=64 U=1", 16, 64, 1, ColTile<16, 64, 1>);
  tile_partial_only("col tile v13 TX=16 TY=64 U=4", 16, 64, 4, ColTile<16, 64, 4>);
  report("col tile TX=16 TY=64 U=4 partial alone", nullptr,
         [&] { ColTile<16, 64, 4><<<dim3(kN / 4 / 16, kN / 256), 1024>>>(in, partial); });
  report("row block T=1024 no hint", &row, [&] { RowSumBlock<1024, false><<<kN, 1024>>>(in, out); });
  report("row block T=512 no hint", &row, [&] { RowSumBlock<512, false><<<kN, 512>>>(in, out); });
  report("row block T=512", &row, [&] { RowSumBlock<512><<<kN, 512>>>(in, out); });
  report("row block T=1024", &row, [&] { RowSumBlock<1024><<<kN, 1024>>>(in, out); });

  std::printf("done\n");
}
