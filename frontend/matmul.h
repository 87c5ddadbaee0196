// Matrix products, spelled as in PyTorch. A matmul is one extern kernel of
// the plan (a vendor GEMM: cuBLASLt on CUDA, OpenBLAS on the CPU); a
// transposed operand is a view the GEMM reads through its layout flags, and
// the pointwise ops after it fuse into the kernels that follow.
#pragma once

#include "tensor/tensor.h"

namespace fusebox {

// torch.matmul: a [..., m, k] @ b [..., k, n] -> [..., m, n], the batch dims
// broadcast (NumPy rules); a 1-D a is one row and a 1-D b one column, that
// dim dropped from the result (vector @ vector is 0-d). Both of one floating
// dtype (float32, bfloat16, float16) and device; 16-bit operands accumulate
// in float32. One GEMM: the batch dims fold into one where the operands'
// strides allow it as a view (contiguous, x.transpose(-2, -1), an expanded
// batch), and an operand is copied only where they do not.
Tensor matmul(const Tensor& a, const Tensor& b);

// x [..., in] @ weight[out, in]^T + bias[out] (bias may be an undefined
// Tensor: none), as torch.nn.functional.linear; x has any rank >= 1, its
// rows one 2-D GEMM where they fold into [rows, in] as a view.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// Whether matmuls captured from now on may take the bias add and relu /
// gelu(approximate = "tanh") after them into the GEMM's epilogue (cuBLASLt's
// BIAS / RELU_BIAS / GELU_BIAS; OpenBLAS's pass over C) instead of a kernel
// after the GEMM. On by default: on the H200, gelu(x @ w + b) in bf16 at
// 8192x4096x4096 takes 0.358 ms this way against 0.421 ms as GEMM + kernel
// (bench/NOTES.md). The choice is recorded in the captured graph, so plans
// of both coexist.
void set_matmul_epilogue_fusion(bool on);
bool matmul_epilogue_fusion();

// set_matmul_epilogue_fusion(on) for the scope's lifetime; the setting
// before it comes back at its end.
class MatmulEpilogueFusionScope {
 public:
  explicit MatmulEpilogueFusionScope(bool on) : before_(matmul_epilogue_fusion()) { set_matmul_epilogue_fusion(on); }
  ~MatmulEpilogueFusionScope() { set_matmul_epilogue_fusion(before_); }
  MatmulEpilogueFusionScope(const MatmulEpilogueFusionScope&) = delete;
  MatmulEpilogueFusionScope& operator=(const MatmulEpilogueFusionScope&) = delete;

 private:
  bool before_;
};

// Whether float32 matmuls on CUDA may use TF32 tensor cores (as
// torch.backends.cuda.matmul.allow_tf32; off by default). Read at each GEMM.
void set_matmul_allow_tf32(bool allow);
bool matmul_allow_tf32();

}  // namespace fusebox
