#include "backend/attention.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fusebox::backend {

const char* AttentionMaskName(AttentionMask m) {
  switch (m) {
    case AttentionMask::kNone: return "none";
    case AttentionMask::kCausal: return "causal";
    case AttentionMask::kBool: return "bool_mask";
    case AttentionMask::kFloat: return "float_mask";
  }
  return "?";
}

int64_t AttentionProblem::BatchCount() const {
  int64_t n = 1;
  for (int64_t b : batch) n *= b;
  return n;
}

std::string AttentionProblem::ToString() const {
  return absl::StrCat(DTypeName(dtype), " [", absl::StrJoin(batch, ", "), "] L ", l, " S ", s, " E ", e, " ",
                      AttentionMaskName(mask));
}

}  // namespace fusebox::backend
