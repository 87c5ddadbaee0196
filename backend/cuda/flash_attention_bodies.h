// The flash-attention kernel bodies that live apart from
// flash_attention_source.cc (which prints the shared parts, the constants and
// the mma.sync body, and calls these): each is CUDA text that reads the
// constants (kE, kBN, kBM, kThreads, kMask, kMinBlocks), fb_elem and the
// shared part (FbAttnParams, fb_block, fb_out, fb_masked) printed before it.
#pragma once

#include <string>

#include "backend/cuda/flash_attention.h"

namespace fusebox::cuda {

// sm_90: the wgmma helpers (fences, descriptors, the two wgmma shapes spelled
// out for `config`, issuing S = Q K^T and O += P V), after the 16-bit common part.
std::string FlashWgmmaCommon(const FlashConfig& config);
// sm_90: warpgroups multiplying by wgmma, loading by cp.async (FlashWgmmaCommon first).
std::string FlashWgmmaBody(const FlashConfig& config);
// sm_90: a TMA producer warpgroup and two or three consumers (FlashWgmmaCommon first).
std::string FlashWarpSpecializedBody(const FlashConfig& config);

// f32 by FMA on 16 x 16 threads (any architecture).
const char* FlashF32Body();

}  // namespace fusebox::cuda
