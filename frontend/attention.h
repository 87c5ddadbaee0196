// Attention, spelled as torch.nn.functional.scaled_dot_product_attention.
// Where q, k and v are bf16, f16 or f32 with head dim 64 or 128, it is one fused
// kernel: flash attention on CUDA (backend/cuda/flash_attention.h), its CPU
// twin on the host; q, k, v views such as x.view(B, T, H, D).transpose(1, 2)
// are read by their strides. Otherwise it is the decomposition PyTorch's math
// path runs (q @ k^T * scale, the mask, softmax over the keys, @ v), whose
// mask and softmax fuse into one kernel between the two GEMMs in compile().
// Attention written out by hand becomes the same node in compile()
// (fusion/recognize_attention.h).
#pragma once

#include <optional>

#include "tensor/tensor.h"

namespace fusebox {

// q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev]; the batch dims
// broadcast. attn_mask (broadcast to [..., L, S]): bool (true: the key takes
// part) or a float mask added to the scores. is_causal masks keys after the
// query (the top-left triangle of L x S, as PyTorch); it excludes attn_mask.
// scale defaults to 1 / sqrt(E). A row with every key masked is NaN, as
// PyTorch's math path. dropout_p > 0 drops attention weights after the
// softmax (dropout(), always applied: pass 0 in eval, as with PyTorch's).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt);

}  // namespace fusebox
