// Rows too long for one block's registers (over fusion::kPersistentRowLimit)
// but not for a thread-block cluster's (sm_90+): each of the cluster's blocks
// keeps its part of the row in registers, reduces it (fb_block_reduce), and
// the blocks combine their partial results through distributed shared
// memory, so a multi-pass kernel (softmax, layer_norm) reads HBM once.
#pragma once

#include <string>

#include "backend/cuda/row_spread.h"
#include "backend/kernel_ir.h"
#include "backend/tuning.h"

namespace fusebox::backend {

inline constexpr int kCudaMinClusterArch = 90;    // thread-block clusters: Hopper and later
inline constexpr int kCudaMaxClusterBlocks = 8;   // the portable cluster size
// The SM count the rules assume where a kernel is lowered without a device
// (tests, the kernel snapshot): the reference device's (an H200's 132).
inline constexpr int kCudaReferenceSmCount = 132;
// The kernel's device's SM count (Kernel::cuda_sm_count), or the reference's.
inline int CudaSmCount(const Kernel& k) { return k.cuda_sm_count > 0 ? k.cuda_sm_count : kCudaReferenceSmCount; }

// CUDA, sm_90+: each row spread over a thread-block cluster of `blocks`
// blocks of `threads` threads, each thread holding `slots` elements of the
// row per cached load in registers (backend/cuda/cuda_cluster.h). blocks == 0:
// not clustered. Part of the kernel's CudaSchedule (cuda_schedule.h).
struct ClusterLayout {
  int blocks = 0;
  int threads = 0;
  int slots = 0;  // 0 (blocks > 1): looped, each block walks its share every pass
  friend bool operator==(const ClusterLayout&, const ClusterLayout&) = default;
};


// Pure: how a device of compute capability `arch` (90 for sm_90) spreads each
// row of `kernel` (a block per row in `spread`) over a cluster, or {} (blocks 0) to keep the looped
// kernel: below sm_90, for argmax/argmin, split or run-time row counts, and
// rows that do not end in the innermost dim. Rows whose values would not fit
// 32 registers per thread in 8 blocks take a looped cluster (slots 0: each
// block loops over its share, re-reading it each pass) where the rows are
// fewer than the device's SMs (Kernel::cuda_sm_count), else the looped kernel.
ClusterLayout CudaClusterLayout(const Kernel& kernel, const CudaRowSpread& spread, int arch);

// ChooseCudaSchedule uses CudaClusterLayout for rows a block would loop over
// where they are fewer than the device's SMs (Knob::kClusters 1, the rule; 2:
// every such row). On the H200 the cluster softmax over 1024 x 65536 ran at
// 1544 GB/s, the looped kernel that walks the grid with one block per SM at
// 2395: where the rows fill the device, the looped kernel stays.

// The cluster helpers (barrier halves, fb_cluster_map, fb_cluster_reduce),
// after CudaPrelude; the outer reduction printer shares them.
const char* CudaClusterPrelude();

// The kernel's CUDA source in `cluster` (blocks > 1), its schedule's;
// PrintCuda calls it. One launch of num_rows * blocks blocks, `threads` each.
std::string PrintCudaCluster(const Kernel& kernel, const ClusterLayout& cluster, const TuningSnapshot& tuning);

}  // namespace fusebox::backend
