#include "backend/gemm.h"

#include "absl/strings/str_cat.h"

namespace fusebox::backend {

const char* GemmEpilogueName(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kNone: return "none";
    case GemmEpilogue::kBias: return "bias";
    case GemmEpilogue::kBiasRelu: return "bias_relu";
    case GemmEpilogue::kBiasGelu: return "bias_gelu";
    case GemmEpilogue::kRelu: return "relu";
    case GemmEpilogue::kGelu: return "gelu";
  }
  return "?";
}

bool GemmEpilogueHasBias(GemmEpilogue e) {
  return e == GemmEpilogue::kBias || e == GemmEpilogue::kBiasRelu || e == GemmEpilogue::kBiasGelu;
}

std::string GemmProblem::ToString() const {
  auto layout = [](int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
    return col_stride == 1 || cols <= 1 ? "n" : (row_stride == 1 || rows <= 1 ? "t" : "strided");
  };
  return absl::StrCat(Traits(dtype).short_name, " ", batch, "x", m, "x", n, "x", k, " A(", layout(m, k, a_row, a_col),
                      ") B(", layout(k, n, b_row, b_col), ")", epilogue == GemmEpilogue::kNone ? "" : " ",
                      epilogue == GemmEpilogue::kNone ? "" : GemmEpilogueName(epilogue), residual ? " +residual" : "",
                      allow_tf32 ? " tf32" : "");
}

}  // namespace fusebox::backend
