// A division by a row's result (softmax's `exp(x - max) / sum`) runs once per
// element of the row, but its divisor is fixed for the whole row: the pass
// turns it into a multiplication by the divisor's reciprocal, which the
// printed loop computes once (every copy of `1 / sum` is the same expression,
// hoisted by the compiler). An IEEE division is ~10 instructions on a GPU;
// on the H200 the division alone made the long-row softmax 6% slower.
#pragma once

#include "backend/kernel_ir.h"

namespace fusebox::backend {

// Pure: `kernel` with each floating division whose divisor is an
// accumulator (a row's reduction result) in a later pass or in the
// element loop rewritten as `a * (1 / divisor)`; the kernel itself when it
// has none. Results differ from the division by at most ~1 ulp.
Kernel MultiplyByRowReciprocals(Kernel kernel);

}  // namespace fusebox::backend
