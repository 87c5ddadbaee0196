// The fused flash-attention kernel of scaled_dot_product_attention on CUDA
// (issue 24), FlashAttention-2's schedule: a block owns BM query rows (16 per
// warp), streams K and V tiles of BN keys through shared memory (cp.async,
// two stages), keeps the softmax online in f32 registers (exp2, the scale
// folded into log2 e) and multiplies on the tensor cores (mma.sync m16n8k16
// fed by ldmatrix; wgmma on sm_90; f32 by FMA). One CUDA source per FlashConfig, compiled by NVRTC through
// the compile cache and launched on the legacy default stream, in order with
// fusebox's other launches.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/attention.h"
#include "backend/compile_cache.h"
#include "backend/tuning.h"

namespace fusebox::cuda {

// Head dims and dtypes the fused kernel takes (64 and 128; bf16, f16 and
// f32, the last by FMA); others keep the decomposition.
bool FlashAttentionSupports(DType dtype, int64_t head_dim);

using backend::AttentionMask;
using backend::AttentionProblem;

// What specializes the kernel's source.
struct FlashConfig {
  int head_dim = 64;  // 64 or 128
  DType dtype = DType::kBFloat16;
  AttentionMask mask = AttentionMask::kNone;
  int block_n = 64;  // keys per tile
  int warps = 8;     // 16 * m_tiles query rows each
  int m_tiles = 1;   // 16-row tiles per warp: 2 feeds each K/V fragment to two mma (Q then read from shared memory)
  int min_blocks = 1;  // blocks per SM the registers must allow (__launch_bounds__)
  // sm_90: warpgroups of 4 warps and 64 query rows multiply by wgmma
  // (compiled for sm_90a); m_tiles is then unused.
  bool wgmma = false;
  // wgmma with a TMA producer warpgroup (FlashAttention-3's warp
  // specialization): the first 4 warps load, the rest multiply in
  // warpgroups of 64 query rows (warps 16 at head dim 64: three consumers, block_m 192; 12 at 128).
  bool warp_specialized = false;
  // The softmax folds the scale into exp2's argument where it is positive
  // (the 16-bit kernels; any other scale is applied to each score first).
  bool positive_scale = true;
  int thread_rows = 4;  // f32: query rows a thread holds (a block of 16 x 16 threads takes 16 x this)
  // Causal: the order blocks start in (fb_block_place): 1 batch by batch,
  // each batch's longest row tiles first; 2 longest first over the grid.
  int causal_order = 1;
  // Warp-specialized: a block per SM taking items (batch, row tile) from a
  // counter, one after another (FlashAttention-3's persistent kernel).
  bool persistent = false;
  // Warp-specialized, causal: row tiles end at the last query row, so the
  // partial tile (L not a multiple of block_m) is the first and shortest
  // rather than the last and longest (GPT-2's T 1024 in 192-row tiles: 81
  // consumer-tiles a head instead of 96, 72 seen).
  bool align_end = false;
  int block_m() const;  // query rows a block

  int threads() const { return 32 * warps; }
  int stages() const;  // K/V tiles in flight: 2 (mma.sync), 3 (wgmma, where they fit)
  int consumers() const { return (warps - 4) / 4; }  // warp-specialized: the multiplying warpgroups
  // The producer thread's registers: 24; the persistent kernel's item loop
  // spills there, so 32 at head dim 64 and 40 at 128 (two TMA boxes a tile),
  // the least ptxas takes without spills (the consumers keep 160 at three
  // warpgroups, 232 at two, 240 with the 24-register producer).
  int producer_registers() const { return !persistent ? 24 : head_dim == 64 ? 32 : 40; }
  // A thread's registers at launch: what __launch_bounds__(threads(), 1)
  // leaves (168 at 384 threads, 128 at 512; ptxas gives the warp-specialized
  // kernels all of it).
  int launch_registers() const;
  int consumer_registers() const;  // each consumer thread's, after the producer's
  int64_t SharedBytes() const;  // Q, then the stages of K and V (wgmma: and 1024 bytes to align)
  // "fb_flash_attention_e64_bf16_causal_n64_w8" (a scale <= 0: "..._sneg"; causal order 2: "_o2"; persistent: "_p";
  // align_end: "_e")
  std::string KernelName() const;
  friend bool operator==(const FlashConfig&, const FlashConfig&) = default;
};

// The config for a problem on sm_<arch> under `tuning` (FUSEBOX_TUNE_FLASH_*).
FlashConfig ChooseFlashConfig(int64_t head_dim, DType dtype, AttentionMask mask, int arch,
                              const backend::TuningSnapshot& tuning);
// The config that runs `p` on sm_<arch>, or nothing where the fused kernel
// does not take it (FlashAttentionSupports): what preparing, describing and
// compiling ahead an attention node all ask.
std::optional<FlashConfig> FlashConfigFor(const AttentionProblem& p, int arch, const backend::TuningSnapshot& tuning);
// What runs a warp-specialized config's problem where TMA cannot read the
// operands: the cp.async wgmma kernel (any other config: itself).
FlashConfig FlashCpAsyncTwin(const FlashConfig& c);
// Every config the default tuning chooses on sm_<arch> (the NVRTC test compiles each).
std::vector<FlashConfig> DefaultFlashConfigs(int arch);

// The kernel's CUDA source: pure, no compiler.
std::string FlashAttentionSource(const FlashConfig& config);

// A compiled (and, given a device, loaded) kernel; kept for the process.
struct FlashKernel {
  FlashConfig config;
  std::string source;
  std::shared_ptr<const backend::CompiledBinary> binary;
  CUfunction function = nullptr;  // null when only compiled (no device)
  int arch = 0;                   // compiled for sm_<arch>
};

// Compiles `config` for sm_<arch> through the compile cache and, for a device
// >= 0, loads it there (once per device and config).
absl::StatusOr<const FlashKernel*> GetFlashKernel(const FlashConfig& config, int device, int arch);

// Enqueues `p` on `device` (its context current): q, k, v, mask (kBool: one
// byte per element; kFloat: p.dtype) are device pointers as `p`'s strides
// describe them, and `out` as p.o_batch and p.o_row do. l, s > 0. A
// warp-specialized kernel whose operands TMA cannot read (unaligned, more
// than three batch coordinates) runs its cp.async twin instead, compiled on
// first need.
absl::Status LaunchFlashAttention(int device, const FlashKernel& kernel, const AttentionProblem& p, const void* q,
                                  const void* k, const void* v, const void* mask, void* out);
// Launches of warp-specialized kernels so far, and those of them that ran
// the cp.async twin instead (for tests and the debug log).
struct FlashTmaLaunches {
  int64_t tma = 0, twin = 0;
};
FlashTmaLaunches CountFlashTmaLaunches();

}  // namespace fusebox::cuda
