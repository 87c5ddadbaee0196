// An AttentionProblem (backend/attention.h) on the host: the CPU twin of the
// fused flash kernel, so the attention node runs on both devices and the CPU
// tests check the node's recording, strides and masks. Per query row: the
// scores in f32, their max, exp and sum, then the weighted sum of v.
#pragma once

#include <array>

#include "absl/status/status.h"
#include "backend/attention.h"

namespace fusebox::backend::cpu {

// q, k, v and a float mask of the dtypes `in` names (f32, bf16 or f16: the
// numerics check's widened graphs mix them), a bool mask of one byte per
// element, `out` contiguous [batch..., l, e] of p.dtype. A row with no key
// taking part is NaN, as PyTorch's math path.
absl::Status CpuAttention(const AttentionProblem& p, const void* q, const void* k, const void* v, const void* mask,
                          void* out, const std::array<DType, 4>& in);

}  // namespace fusebox::backend::cpu
