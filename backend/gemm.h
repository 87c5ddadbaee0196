// One (batched) matrix multiply as the vendor libraries run it: C[b] = A[b] @
// B[b] over strided row-major views, with an optional epilogue. The plan runs
// a matmul node as an extern kernel through these (fusion/plan.h,
// KernelKind::kExtern): OpenBLAS on the CPU (backend/cpu/blas_gemm.h),
// cuBLASLt on CUDA (backend/cuda/cublaslt_gemm.h). Never hand-written.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/dtype.h"

namespace fusebox::backend {

// What runs after the product, on each element of C, before it is stored:
// `bias` is a vector of n elements added to every row (PyTorch's linear),
// then relu or gelu (tanh approximation) where asked. A residual
// (GemmProblem::residual) is added to the product before them.
enum class GemmEpilogue { kNone, kBias, kBiasRelu, kBiasGelu, kRelu, kGelu };
const char* GemmEpilogueName(GemmEpilogue e);  // "bias_gelu"
bool GemmEpilogueHasBias(GemmEpilogue e);

struct GemmProblem {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  DType dtype = DType::kFloat32;  // of A, B, C and the bias: f32, bf16, f16
  // Element strides of each operand's logical [batch, rows, cols] view.
  // Rows or columns of A and B may be the unit-stride dim (a transposed view
  // is a GEMM flag, never a copy); C is written row-major with c_row >= n.
  // A batch stride of 0 broadcasts that operand over the batch.
  int64_t a_batch = 0, a_row = 0, a_col = 1;  // A: m x k
  int64_t b_batch = 0, b_row = 0, b_col = 1;  // B: k x n
  int64_t c_batch = 0, c_row = 0;             // C: m x n
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  // C = A @ B + R (+ bias, then the activation): a residual R of C's shape
  // and layout (c_batch, c_row), read, never written (cuBLASLt's C with
  // beta = 1 and our C as its separate D; OpenBLAS's C with beta = 1 over a
  // copy of R). The fuser adds none after an activation: act(AB + bias) + R
  // is not one epilogue.
  bool residual = false;
  // f32 inputs may be multiplied as TF32 (torch.backends.cuda.matmul.allow_tf32).
  bool allow_tf32 = false;

  std::string ToString() const;  // "bf16 1x8192x4096x4096 A(n) B(t) bias_gelu", "... bias +residual"
};

}  // namespace fusebox::backend
