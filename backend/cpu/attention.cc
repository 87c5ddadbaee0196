#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/parallel_for.h"

namespace fusebox::backend::cpu {
namespace {

float Load(const void* base, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kBFloat16: return BFloat16ToFloat(static_cast<const uint16_t*>(base)[i]);
    case DType::kFloat16: return HalfToFloat(static_cast<const uint16_t*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

void Store(void* base, DType dtype, int64_t i, float x) {
  switch (dtype) {
    case DType::kBFloat16: static_cast<uint16_t*>(base)[i] = FloatToBFloat16(x); break;
    case DType::kFloat16: static_cast<uint16_t*>(base)[i] = FloatToHalf(x); break;
    default: static_cast<float*>(base)[i] = x;
  }
}

// Element offset of batch `b` (flat, row-major over p.batch) along `strides`.
int64_t BatchOffset(const AttentionProblem& p, int64_t b, const std::array<int64_t, kAttentionBatchDims>& strides) {
  int64_t offset = 0;
  for (int d = kAttentionBatchDims - 1; d >= 0; --d) {
    offset += b % p.batch[d] * strides[d];
    b /= p.batch[d];
  }
  return offset;
}

}  // namespace

absl::Status CpuAttention(const AttentionProblem& p, const void* q, const void* k, const void* v, const void* mask,
                          void* out, const std::array<DType, 4>& in) {
  for (DType d : {p.dtype, in[0], in[1], in[2], p.mask == AttentionMask::kFloat ? in[3] : p.dtype}) {
    if (d != DType::kFloat32 && d != DType::kBFloat16 && d != DType::kFloat16) {
      return absl::InvalidArgumentError(absl::StrCat("attention on the CPU takes f32, bf16 or f16, got ",
                                                     DTypeName(d), " in ", p.ToString()));
    }
  }
  const int64_t l = p.l, s = p.s, e = p.e;
  const float scale = static_cast<float>(p.scale);
  std::vector<float> kf(s * e), vf(s * e);
  for (int64_t b = 0; b < p.BatchCount(); ++b) {
    const int64_t qo = BatchOffset(p, b, p.q_batch), mo = BatchOffset(p, b, p.m_batch);
    const int64_t ko = BatchOffset(p, b, p.k_batch), vo = BatchOffset(p, b, p.v_batch), oo = BatchOffset(p, b, p.o_batch);
    for (int64_t j = 0; j < s; ++j) {  // this batch's keys and values, once, in f32
      for (int64_t c = 0; c < e; ++c) {
        kf[j * e + c] = Load(k, in[1], ko + j * p.k_row + c);
        vf[j * e + c] = Load(v, in[2], vo + j * p.v_row + c);
      }
    }
    ParallelFor(l, s * e * 2, [&](int64_t begin, int64_t end) {
      std::vector<float> qrow(e), scores(s), acc(e);
      for (int64_t i = begin; i < end; ++i) {
        for (int64_t c = 0; c < e; ++c) qrow[c] = Load(q, in[0], qo + i * p.q_row + c);
        float top = -INFINITY;
        for (int64_t j = 0; j < s; ++j) {
          const int64_t at = mo + i * p.m_row + j * p.m_col;
          float x = -INFINITY;
          const bool takes_part = p.mask == AttentionMask::kCausal ? j <= i
                                  : p.mask == AttentionMask::kBool ? static_cast<const uint8_t*>(mask)[at] != 0
                                                                   : true;
          if (takes_part) {
            float dot = 0;
            for (int64_t c = 0; c < e; ++c) dot += qrow[c] * kf[j * e + c];
            x = dot * scale + (p.mask == AttentionMask::kFloat ? Load(mask, in[3], at) : 0.f);
          }
          scores[j] = x;
          top = std::max(top, x);
        }
        // All keys masked: exp(-inf - -inf) is NaN, and so is the row, as PyTorch's math path.
        float total = 0;
        for (float& x : scores) total += x = std::exp(x - top);
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int64_t j = 0; j < s; ++j) {
          for (int64_t c = 0; c < e; ++c) acc[c] += scores[j] * vf[j * e + c];
        }
        for (int64_t c = 0; c < e; ++c) Store(out, p.dtype, oo + i * p.o_row + c, acc[c] / total);
      }
    });
  }
  return absl::OkStatus();
}

}  // namespace fusebox::backend::cpu
