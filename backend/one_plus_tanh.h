// `1 + tanh(z)`, the heart of gelu's tanh approximation written out
// (0.5 * x * (1 + tanh(...))), is `2 * sigmoid(2 * z)`: the same value, as
// 1 + tanh z = 2 / (1 + e^(-2z)), without the cancellation of 1 + tanh z
// where tanh z is near -1, and on CUDA in 4 instructions (fb_sigmoid:
// ex2.approx, rcp.approx) against tanhf's ~17. The bf16 gelu over 8192 x 8192
// was bound by instruction issue on the H200 (bench/NOTES.md, session 11).
// Kernel names keep the graph's ops (tanh): only the kernel IR changes.
#pragma once

#include "backend/kernel_ir.h"

namespace fusebox::backend {

// Pure: `kernel` with each float `add` of a constant 1 and a tanh computed in
// the same block rewritten as `2 * sigmoid(2 * z)` (the tanh dropped where
// nothing else reads it); the kernel itself when it has none.
// A neutral kernel pass (kernel_passes.h), unless Knob::kOnePlusTanh is off
// (A/B runs).
Kernel RewriteOnePlusTanh(Kernel kernel);

}  // namespace fusebox::backend
