#include "backend/cpu/blas_gemm.h"

#include <cblas.h>  // Debian: /usr/include/x86_64-linux-gnu/cblas.h, OpenBLAS's through alternatives

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fusion/plan.h"
#include "tensor/dtype.h"

// Threads: OpenBLAS's default (one per core, or OPENBLAS_NUM_THREADS). Each
// call here is one GEMM of the plan, so its own threads are the parallelism.

namespace fusebox::backend::cpu {
namespace {

// How a rows x cols view is handed to cblas in row-major order: as is
// (NoTrans, `ld` = row stride), or as the transpose of a row-major cols x
// rows matrix (Trans, `ld` = column stride). `fits` is false only for a
// vector whose stride along its length is not positive (DenseMatrixStrides allows
// any stride on a dim of extent 1); that one is packed row-major.
struct BlasLayout {
  bool fits = true;
  CBLAS_TRANSPOSE trans = CblasNoTrans;
  int64_t ld = 1;
};

BlasLayout LayoutOf(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  const int64_t cols1 = std::max<int64_t>(1, cols), rows1 = std::max<int64_t>(1, rows);
  if ((cols <= 1 || col_stride == 1) && (rows <= 1 || row_stride >= cols1)) {
    return {true, CblasNoTrans, rows <= 1 ? cols1 : row_stride};
  }
  if ((rows <= 1 || row_stride == 1) && (cols <= 1 || col_stride >= rows1)) {
    return {true, CblasTrans, cols <= 1 ? rows1 : col_stride};
  }
  return {false, CblasNoTrans, cols1};
}

// The leading dimension of `layout` once copied densely into scratch.
int64_t DenseLd(const BlasLayout& layout, int64_t rows, int64_t cols) {
  return std::max<int64_t>(1, layout.trans == CblasTrans ? rows : cols);
}

// Copies a strided rows x cols view into dense f32 scratch in `layout`'s
// order, walking the source along its unit-stride dim. `load(i)` reads
// element i of the source as f32.
template <typename Load>
void Gather(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride, CBLAS_TRANSPOSE trans, Load load,
            float* out) {
  if (trans == CblasTrans) {
    for (int64_t j = 0; j < cols; ++j) {
      for (int64_t i = 0; i < rows; ++i) out[j * rows + i] = load(i * row_stride + j * col_stride);
    }
  } else {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) out[i * cols + j] = load(i * row_stride + j * col_stride);
    }
  }
}

// An operand of `dtype` widened to (or, for f32, packed as) dense f32.
void Widen(DType dtype, const void* src, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride,
           CBLAS_TRANSPOSE trans, std::vector<float>& out) {
  out.resize(std::max<int64_t>(1, rows * cols));
  switch (dtype) {
    case DType::kFloat16: {
      const auto* p = static_cast<const uint16_t*>(src);
      return Gather(rows, cols, row_stride, col_stride, trans, [p](int64_t i) { return HalfToFloat(p[i]); }, out.data());
    }
    case DType::kBFloat16: {
      const auto* p = static_cast<const uint16_t*>(src);
      return Gather(rows, cols, row_stride, col_stride, trans, [p](int64_t i) { return BFloat16ToFloat(p[i]); },
                    out.data());
    }
    default: {
      const auto* p = static_cast<const float*>(src);
      return Gather(rows, cols, row_stride, col_stride, trans, [p](int64_t i) { return p[i]; }, out.data());
    }
  }
}

// Rounds a dense m x n f32 result into C (row stride `c_row`), once.
void Narrow(DType dtype, const std::vector<float>& acc, int64_t m, int64_t n, int64_t c_row, void* c) {
  auto* out = static_cast<uint16_t*>(c);
  for (int64_t i = 0; i < m; ++i) {
    const float* row = acc.data() + i * n;
    uint16_t* dst = out + i * c_row;
    if (dtype == DType::kFloat16) {
      for (int64_t j = 0; j < n; ++j) dst[j] = FloatToHalf(row[j]);
    } else {
      for (int64_t j = 0; j < n; ++j) dst[j] = FloatToBFloat16(row[j]);
    }
  }
}

float GeluTanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

// The epilogue on an m x n f32 block with row stride `ld`, in place.
void ApplyEpilogue(GemmEpilogue e, const float* bias, int64_t m, int64_t n, int64_t ld, float* c) {
  if (e == GemmEpilogue::kNone) return;
  const bool relu = e == GemmEpilogue::kRelu || e == GemmEpilogue::kBiasRelu;
  const bool gelu = e == GemmEpilogue::kGelu || e == GemmEpilogue::kBiasGelu;
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ld;
    for (int64_t j = 0; j < n; ++j) {
      float v = row[j] + (bias != nullptr ? bias[j] : 0.0f);
      if (relu) v = std::max(v, 0.0f);
      if (gelu) v = GeluTanh(v);
      row[j] = v;
    }
  }
}

absl::Status CheckOperand(const char* name, const GemmProblem& p, int64_t rows, int64_t cols, int64_t row_stride,
                          int64_t col_stride) {
  if (fusion::DenseMatrixStrides(rows, cols, row_stride, col_stride)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "BlasGemm: operand ", name, " (", rows, "x", cols, ", strides ", row_stride, ", ", col_stride,
      ") has no unit-stride dim whose other stride covers it; make it contiguous first (", p.ToString(), ")"));
}

absl::Status Check(const GemmProblem& p, const void* a, const void* b, void* c, const void* bias,
                   const void* residual) {
  if (p.dtype != DType::kFloat32 && p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16) {
    return absl::InvalidArgumentError(absl::StrCat("BlasGemm: dtype ", DTypeName(p.dtype),
                                                   " is not supported (float32, bfloat16, float16)"));
  }
  if (p.batch < 0 || p.m < 0 || p.n < 0 || p.k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("BlasGemm: negative size in ", p.ToString()));
  }
  if (absl::Status s = CheckOperand("A", p, p.m, p.k, p.a_row, p.a_col); !s.ok()) return s;
  if (absl::Status s = CheckOperand("B", p, p.k, p.n, p.b_row, p.b_col); !s.ok()) return s;
  if (p.m > 1 && p.c_row < std::max<int64_t>(1, p.n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("BlasGemm: C's row stride ", p.c_row, " is below n = ", p.n, " (", p.ToString(), ")"));
  }
  constexpr int64_t kMaxIndex = std::numeric_limits<blasint>::max();
  for (int64_t v : {p.m, p.n, p.k, p.a_row, p.a_col, p.b_row, p.b_col, p.c_row}) {
    if (v > kMaxIndex) {
      return absl::InvalidArgumentError(
          absl::StrCat("BlasGemm: ", v, " does not fit BLAS's 32-bit indices (", p.ToString(), ")"));
    }
  }
  const bool work = p.batch > 0 && p.m > 0 && p.n > 0;
  if (work && (c == nullptr || (p.k > 0 && (a == nullptr || b == nullptr)))) {
    return absl::InvalidArgumentError(absl::StrCat("BlasGemm: null operand pointer (", p.ToString(), ")"));
  }
  if (work && GemmEpilogueHasBias(p.epilogue) && bias == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("BlasGemm: epilogue ", GemmEpilogueName(p.epilogue),
                                                   " needs a bias (", p.ToString(), ")"));
  }
  if (work && p.residual && (residual == nullptr || residual == c)) {
    return absl::InvalidArgumentError(
        absl::StrCat("BlasGemm: the residual needs its own pointer, apart from C (", p.ToString(), ")"));
  }
  return absl::OkStatus();
}

// One operand of one batch entry as cblas takes it: f32 that fits is passed
// as is; anything else is widened or packed into `scratch`, once for a
// broadcast operand (`reuse`).
struct Operand {
  const float* data;
  CBLAS_TRANSPOSE trans;
  blasint ld;
};

Operand Prepare(DType dtype, const void* src, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride,
                bool reuse, std::vector<float>& scratch) {
  const BlasLayout layout = LayoutOf(rows, cols, row_stride, col_stride);
  if (dtype == DType::kFloat32 && layout.fits) {
    return {static_cast<const float*>(src), layout.trans, static_cast<blasint>(layout.ld)};
  }
  if (!reuse || scratch.empty()) Widen(dtype, src, rows, cols, row_stride, col_stride, layout.trans, scratch);
  return {scratch.data(), layout.trans, static_cast<blasint>(DenseLd(layout, rows, cols))};
}

}  // namespace

absl::Status BlasGemm(const GemmProblem& p, const void* a, const void* b, void* c, const void* bias,
                      const void* residual) {
  if (absl::Status s = Check(p, a, b, c, bias, residual); !s.ok()) return s;
  if (p.batch == 0 || p.m == 0 || p.n == 0) return absl::OkStatus();
  const bool f32 = p.dtype == DType::kFloat32;
  const int64_t size = DTypeSize(p.dtype);
  std::vector<float> bias32;
  if (GemmEpilogueHasBias(p.epilogue)) Widen(p.dtype, bias, 1, p.n, p.n, 1, CblasNoTrans, bias32);
  const float* bias_f32 = GemmEpilogueHasBias(p.epilogue) ? bias32.data() : nullptr;

  std::vector<float> a_scratch, b_scratch, c_scratch;
  if (!f32) c_scratch.resize(p.m * p.n);
  for (int64_t i = 0; i < p.batch; ++i) {
    const void* a_i = static_cast<const char*>(a) + i * p.a_batch * size;
    const void* b_i = static_cast<const char*>(b) + i * p.b_batch * size;
    void* c_i = static_cast<char*>(c) + i * p.c_batch * size;
    float* out = f32 ? static_cast<float*>(c_i) : c_scratch.data();
    const int64_t ldc = f32 ? (p.m <= 1 ? std::max<int64_t>(1, p.n) : p.c_row) : p.n;
    // With a residual, C starts as it (widened into the scratch for 16-bit)
    // and the GEMM adds to it (beta = 1).
    if (p.residual) {
      const void* r_i = static_cast<const char*>(residual) + i * p.c_batch * size;
      if (f32) {
        for (int64_t r = 0; r < p.m; ++r) std::copy_n(static_cast<const float*>(r_i) + r * p.c_row, p.n, out + r * ldc);
      } else {
        Widen(p.dtype, r_i, p.m, p.n, p.c_row, 1, CblasNoTrans, c_scratch);
      }
    }
    if (p.k == 0) {
      for (int64_t r = 0; r < p.m && !p.residual; ++r) std::fill_n(out + r * ldc, p.n, 0.0f);
    } else {
      const Operand ao = Prepare(p.dtype, a_i, p.m, p.k, p.a_row, p.a_col, p.a_batch == 0, a_scratch);
      const Operand bo = Prepare(p.dtype, b_i, p.k, p.n, p.b_row, p.b_col, p.b_batch == 0, b_scratch);
      cblas_sgemm(CblasRowMajor, ao.trans, bo.trans, static_cast<blasint>(p.m), static_cast<blasint>(p.n),
                  static_cast<blasint>(p.k), 1.0f, ao.data, ao.ld, bo.data, bo.ld, p.residual ? 1.0f : 0.0f, out,
                  static_cast<blasint>(ldc));
    }
    ApplyEpilogue(p.epilogue, bias_f32, p.m, p.n, ldc, out);
    if (!f32) Narrow(p.dtype, c_scratch, p.m, p.n, p.c_row, c_i);
  }
  return absl::OkStatus();
}

}  // namespace fusebox::backend::cpu
