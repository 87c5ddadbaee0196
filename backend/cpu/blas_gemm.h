// The CPU matmul: a GemmProblem (backend/gemm.h) run on host pointers by
// OpenBLAS. Vendor GEMMs beat anything fusebox would generate, so a matmul
// node runs here as an extern kernel; only its epilogue is ours.
#pragma once

#include "absl/status/status.h"
#include "backend/gemm.h"

namespace fusebox::backend::cpu {

// Runs `p` on host pointers with OpenBLAS: f32 through cblas_sgemm on the
// operands as they lie (a transposed view is a flag, never a copy); bf16 and
// f16 operands are widened to f32 into scratch, multiplied with cblas_sgemm,
// the epilogue (bias add, relu, gelu tanh-approximation) applied in f32, and
// the result rounded back once. One BLAS call per batch entry; a batch stride
// of 0 broadcasts that operand. `bias` (n elements of p.dtype) is read only
// when the epilogue has one; `residual` only with p.residual (laid out as C,
// apart from it: C starts as its copy, then cblas_sgemm with beta = 1).
// InvalidArgument for other dtypes, operand views failing
// fusion::DenseMatrixStrides, or sizes beyond BLAS's 32-bit indices.
absl::Status BlasGemm(const GemmProblem& p, const void* a, const void* b, void* c, const void* bias,
                      const void* residual = nullptr);

}  // namespace fusebox::backend::cpu
