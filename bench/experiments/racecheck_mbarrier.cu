// Does compute-sanitizer's racecheck follow mbarrier arrive/wait chains?
// (Not part of the build.) racecheck reports a hazard pair in every
// persistent warp-specialized flash kernel (bench/NOTES.md, "GPU tests"):
// the consumers' read of `fb_next`, the item the producer thread hands on
// through shared memory, against the producer's next write, which the code
// orders by mbarriers (backend/cuda/flash_attention_ws.cc). This kernel hands
// items the same way, correct by construction, in three variants that
// differ only in how the consumer warps release the slot:
//   0  lane 0 of each warp arrives on `empty`, the other lanes' reads
//      ordered before it by a bar.sync among the consumers (as the flash
//      kernel's turn barrier orders them)
//   1  __syncwarp, then lane 0 arrives
//   2  every consumer thread arrives (count 128)
// Each checks the consumers' sum of the items. Hazards from racecheck on a
// variant that checks out mean racecheck does not model that handoff.
//   nvcc -O3 -std=c++17 -arch=sm_90a bench/experiments/racecheck_mbarrier.cu -o racecheck_mbarrier
//   compute-sanitizer --tool racecheck ./racecheck_mbarrier
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

constexpr int kConsumerWarps = 4, kItems = 64;

__device__ __forceinline__ unsigned Smem(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void Init(unsigned bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void Arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void Wait(unsigned bar, int parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n@!done bra WAIT;\n}" ::"r"(
          bar),
      "r"(parity)
      : "memory");
}

// Warp 0 lane 0 produces; warps 1..kConsumerWarps consume.
template <int kVariant>
__global__ void Handoff(long long* sums) {
  __shared__ __align__(8) unsigned long long bars[2];  // full, empty
  __shared__ long long next;
  const unsigned full = Smem(&bars[0]), empty = Smem(&bars[1]);
  if (threadIdx.x == 0) {
    Init(full, 1);
    Init(empty, kVariant == 2 ? 32 * kConsumerWarps : kConsumerWarps);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 0) {
    if (lane == 0) {
      for (int k = 0; k <= kItems; ++k) {
        Wait(empty, (k & 1) ^ 1);  // the consumers are done with item k - 1
        next = k < kItems ? k + 1 : -1;
        Arrive(full);
      }
    }
    return;
  }
  long long sum = 0;
  for (int k = 0;; ++k) {
    Wait(full, k & 1);
    const long long item = *(volatile long long*)&next;
    if (item < 0) break;
    sum += item;
    if (kVariant == 0) asm volatile("bar.sync 1, %0;" ::"n"(32 * kConsumerWarps) : "memory");
    if (kVariant == 1) __syncwarp();
    if (kVariant == 2 || lane == 0) Arrive(empty);
  }
  sums[blockIdx.x * 32 * kConsumerWarps + threadIdx.x - 32] = sum;
}

template <int kVariant>
bool Run(long long* sums, int blocks) {
  const int threads = 32 * (1 + kConsumerWarps), consumers = blocks * 32 * kConsumerWarps;
  cudaMemset(sums, 0, consumers * sizeof(long long));
  Handoff<kVariant><<<blocks, threads>>>(sums);
  if (cudaDeviceSynchronize() != cudaSuccess) return false;
  std::vector<long long> host(consumers);
  cudaMemcpy(host.data(), sums, consumers * sizeof(long long), cudaMemcpyDeviceToHost);
  for (long long s : host) {
    if (s != kItems * (kItems + 1LL) / 2) return false;
  }
  return true;
}

int main() {
  constexpr int kBlocks = 4;
  long long* sums = nullptr;
  cudaMalloc(&sums, kBlocks * 32 * kConsumerWarps * sizeof(long long));
  const bool ok[3] = {Run<0>(sums, kBlocks), Run<1>(sums, kBlocks), Run<2>(sums, kBlocks)};
  for (int v = 0; v < 3; ++v) std::printf("variant %d: %s\n", v, ok[v] ? "sums right" : "WRONG");
  cudaFree(sums);
  return ok[0] && ok[1] && ok[2] ? 0 : 1;
}
