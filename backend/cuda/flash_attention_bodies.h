// The flash-attention kernel bodies that live apart from
// flash_attention_source.cc (which prints the shared parts, the constants and
// the mma.sync body, and calls these): each is CUDA text that reads the
// constants (kE, kBN, kBM, kThreads, kMask, kMinBlocks), fb_elem and the
// shared part (FbAttnParams, fb_block, fb_out, fb_masked) printed before it.
#pragma once

#include <string>

#include "backend/cuda/flash_attention.h"

namespace fusebox::cuda {

// sm_90: warpgroups multiplying by wgmma (after the 16-bit common part), its
// wgmma shapes spelled out for `config`.
std::string FlashWgmmaBody(const FlashConfig& config);

// f32 by FMA on 16 x 16 threads (any architecture).
const char* FlashF32Body();

}  // namespace fusebox::cuda
