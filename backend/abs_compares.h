// `abs(x) >= c` with a constant c <= 0 (and `abs(x) > c` with c < 0) is false
// only where x is NaN: it becomes `x == x`, the same value. ptxas folded the
// compare of an fabs against a negative constant to true, NaN or not (the
// H200, CUDA 13.0: compiled `ge(abs(pow(x, 0.25)), -0.5)` gave 1 for x < 0,
// eager 0; the fuzzer's seed 1000594, CudaTest.ComparesOfFusedAbsKeepNaNFalse),
// so the kernel never hands it that pattern. Other compares of an abs keep
// their value under such a fold (lt/le/eq false, ne true) and stay as written.
#pragma once

#include "backend/kernel_ir.h"

namespace fusebox::backend {

// Pure: `kernel` with each such float compare (either operand order)
// reading `x == x`; the kernel itself when it has none. A neutral kernel pass
// (kernel_passes.h).
Kernel RewriteAbsCompares(Kernel kernel);

}  // namespace fusebox::backend
