// The fused flash-attention kernel of scaled_dot_product_attention on CUDA
// (issue 24), FlashAttention-2's schedule: a block owns BM query rows (16 per
// warp), streams K and V tiles of BN keys through shared memory (cp.async,
// two stages), keeps the softmax online in f32 registers (exp2, the scale
// folded into log2 e) and multiplies on the tensor cores (mma.sync m16n8k16
// fed by ldmatrix). One CUDA source per FlashConfig, compiled by NVRTC through
// the compile cache and launched on the legacy default stream, in order with
// fusebox's other launches.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/attention.h"
#include "backend/compile_cache.h"
#include "backend/tuning.h"

namespace fusebox::cuda {

// Head dims and dtypes the fused kernel takes; others keep the decomposition.
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
  int block_m() const { return 16 * m_tiles * warps; }
  int threads() const { return 32 * warps; }
  int64_t SharedBytes() const;  // Q, then two stages of K and V
  std::string KernelName() const;  // "fb_flash_attention_e64_bf16_causal_n64_w8"
  friend bool operator==(const FlashConfig&, const FlashConfig&) = default;
};

// The config for a problem under `tuning` (FUSEBOX_TUNE_FLASH_BLOCK_N, _WARPS).
FlashConfig ChooseFlashConfig(int64_t head_dim, DType dtype, AttentionMask mask, const backend::TuningSnapshot& tuning);
// Every config the default tuning can choose (the NVRTC test compiles each).
std::vector<FlashConfig> DefaultFlashConfigs();

// The kernel's CUDA source: pure, no compiler.
std::string FlashAttentionSource(const FlashConfig& config);

// A compiled (and, given a device, loaded) kernel; kept for the process.
struct FlashKernel {
  FlashConfig config;
  std::string source;
  std::shared_ptr<const backend::CompiledBinary> binary;
  CUfunction function = nullptr;  // null when only compiled (no device)
};

// Compiles `config` for sm_<arch> through the compile cache and, for a device
// >= 0, loads it there (once per device and config).
absl::StatusOr<const FlashKernel*> GetFlashKernel(const FlashConfig& config, int device, int arch);

// Enqueues `p` on `device` (its context current): q, k, v, mask (kBool: one
// byte per element; kFloat: p.dtype) are device pointers as `p`'s strides
// describe them; `out` is contiguous [batch..., l, e]. l, s > 0.
absl::Status LaunchFlashAttention(int device, const FlashKernel& kernel, const AttentionProblem& p, const void* q,
                                  const void* k, const void* v, const void* mask, void* out);

}  // namespace fusebox::cuda
