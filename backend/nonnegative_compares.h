// A value that is >= 0 wherever it is not NaN (abs(x), x * x, exp(x),
// relu(x), sqrt(x)) compared with a constant c: `v >= c` for c <= 0 (and
// `v > c` for c < 0) is false only where v is NaN, so it becomes the NaN test
// `s == s` of the value's NaN source s (x for abs, x * x, exp, relu; v itself
// for sqrt, NaN also for x < 0). ptxas folded such compares to true, NaN or
// not, on the H200 (CUDA 13.0): compiled `ge(abs(pow(x, 0.25)), -0.5)` and
// `ge(x * x, -1)` gave 1 for NaN, eager 0 (the fuzzer's seed 1000594,
// CudaTest.ComparesOfFusedAbsKeepNaNFalse), so the kernel never hands it that
// pattern. Other compares of such a value keep their value under the fold
// (lt/le/eq false, ne true) and stay as written.
#pragma once

#include "backend/kernel_ir.h"

namespace fusebox::backend {

// Pure: `kernel` with each such float compare (either operand order) reading
// `s == s`; the kernel itself when it has none. A neutral kernel pass
// (kernel_passes.h).
Kernel RewriteNonNegativeCompares(Kernel kernel);

}  // namespace fusebox::backend
