// One scaled-dot-product attention as the extern kernels run it (issue 24):
// out[b, i] = softmax_j(q[b, i] . k[b, j] * scale (+ mask[b, i, j])) @ v[b, j]
// over strided views, E unit-stride. The plan runs an attention node
// (graph op `attention`, fusion::KernelKind::kExtern) through this: the fused
// flash kernel on CUDA (backend/cuda/flash_attention.h), a plain loop on the
// CPU (backend/cpu/attention.h). Pure data, so both and the tests share it.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "tensor/dtype.h"

namespace fusebox::backend {

// What masks the scores: nothing, the causal top-left triangle (query i sees
// keys j <= i, PyTorch's is_causal), a bool mask (true: the key takes part)
// or a float mask of q's dtype added to the scaled scores.
enum class AttentionMask { kNone, kCausal, kBool, kFloat };
const char* AttentionMaskName(AttentionMask m);  // "causal"

// Batch dims the kernels index (outermost first; fewer are padded with size 1).
inline constexpr int kAttentionBatchDims = 4;

struct AttentionProblem {
  DType dtype = DType::kBFloat16;  // of q, k, v, the output and a float mask
  int64_t l = 0, s = 0, e = 0;     // queries, keys, head dim (v's too)
  double scale = 1;
  AttentionMask mask = AttentionMask::kNone;
  std::array<int64_t, kAttentionBatchDims> batch = {1, 1, 1, 1};
  // Element strides: per batch dim, then along L (q, mask) or S (k, v); q, k
  // and v are unit-stride along E, the mask has a stride along S. 0 broadcasts.
  std::array<int64_t, kAttentionBatchDims> q_batch{}, k_batch{}, v_batch{}, m_batch{};
  int64_t q_row = 0, k_row = 0, v_row = 0, m_row = 0, m_col = 0;
  // The output's strides (unit-stride along E): contiguous [batch..., l, e],
  // or a permutation of it where the node stores its result in its consumer's
  // layout (graph::Node::axes).
  std::array<int64_t, kAttentionBatchDims> o_batch{};
  int64_t o_row = 0;

  int64_t BatchCount() const;
  std::string ToString() const;  // "bf16 [2, 16] L 1024 S 1024 E 64 causal"
};

}  // namespace fusebox::backend
