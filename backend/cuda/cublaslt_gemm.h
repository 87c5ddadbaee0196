// GemmProblem (backend/gemm.h) on CUDA through cuBLASLt: the extern matmul
// kernel of the plan. cuBLASLt is column-major, so a row-major C = A @ B runs
// as C^T = B^T @ A^T; CublasLtShapeFor is that mapping as a pure function
// (no GPU needed, tested on its own). The algorithm is the heuristic's
// first, or (SetCublasLtCandidates) the fastest of its first few, timed by
// the problem's first call; kept per problem, device and pointer alignments,
// with the problem's cuBLASLt descriptors, so a later call only sets its bias
// pointer and enqueues the GEMM. A residual (GemmProblem::residual) is C
// with beta = 1, in D's layout.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backend/gemm.h"

namespace fusebox::backend::cuda {

// One column-major cuBLASLt operand: the stored matrix (rows x cols, leading
// dimension ld) and whether the product reads it transposed.
struct CublasLtOperand {
  bool transpose = false;
  int64_t rows = 0, cols = 0, ld = 0;
  int64_t batch_stride = 0;  // elements; 0 broadcasts it over the batch
  friend bool operator==(const CublasLtOperand&, const CublasLtOperand&) = default;
};

// The cuBLASLt call for a row-major problem: D (n x m, ld = c_row) =
// op(a) (n x k) @ op(b) (k x m), where cuBLASLt's `a` is our B and its `b` is
// our A. The bias (n elements, one per column of the row-major C) is then one
// per row of D, which is what cuBLASLt's bias epilogue adds.
struct CublasLtShape {
  CublasLtOperand a, b, d;
  int32_t batch = 1;
};

// InvalidArgument when the problem cannot be handed to cuBLASLt as is: a
// dtype other than f32, bf16, f16; negative sizes; strides no column-major
// layout expresses; a batch over int32; a C not row-major or shared across
// the batch.
absl::StatusOr<CublasLtShape> CublasLtShapeFor(const GemmProblem& p);

// Runs `p` with cuBLASLt on `device`: the caller has made its primary context
// current (fusebox::cuda::Driver::SetDevice) and the pointers are device
// pointers (`bias` only for bias epilogues, n elements of p.dtype;
// `residual` only with p.residual, laid out as `c`, which it must not
// overlap: read as cuBLASLt's C with beta = 1, `c` written as its D). Enqueued
// on the legacy default stream, so it is ordered with fusebox's launches and
// copies. m, n or batch of 0 is a no-op; k of 0 is refused (cuBLASLt leaves
// it undefined). dtypes f32 (TF32 when p.allow_tf32), bf16, f16; f32 accumulation.
absl::Status CublasLtGemm(int device, const GemmProblem& p, const void* a, const void* b, void* c,
                          const void* bias, const void* residual = nullptr);

inline constexpr int kMaxGemmCandidates = 32;

// How many of cuBLASLt's heuristic algorithms the first call of a problem
// times on its own buffers, keeping the fastest (1 to kMaxGemmCandidates;
// 1, the default, takes the heuristic's first untimed; the environment's
// FUSEBOX_TUNE_GEMM_CANDIDATES sets the default). Problems already run keep
// their choice.
void SetCublasLtCandidates(int n);

// The algorithm `p` runs with on `device` with 256-byte aligned operands (as
// the allocator returns them), for kernel names and tests: the one timed
// fastest once a call has run the problem, else the heuristic's first:
// "algo 21 tile 18 stages 21 splitk 1 swizzle 0 ws 0". Needs the device's
// primary context current, like CublasLtGemm.
absl::StatusOr<std::string> CublasLtAlgorithm(int device, const GemmProblem& p);

}  // namespace fusebox::backend::cuda
