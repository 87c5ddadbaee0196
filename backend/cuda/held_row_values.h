// Rows held on chip (backend/cuda/row_printer.h) keep each element of a
// cached input in a register or shared-memory slot through every pass. When
// the last pass that reads a slot computes a value from it that every later
// loop computes again, and the later loops need nothing else from the slot,
// the slot can hold that value instead: softmax's exp(x - max) is computed
// once per element, in the sum pass, instead of again for the output, and
// layer_norm's x - mean once instead of twice. The CUDA row printer applies
// it; the CPU printer reads rows from memory in each pass, so it never sees
// such a kernel.
#pragma once

#include "backend/kernel_ir.h"

namespace fusebox::backend {

// Pure: `kernel` with, per cached slot where it applies, a store of the
// value into the slot (a kStore whose cache_slot is set; buffer and index
// stay the cached input's) at the end of the last pass reading it, and each
// later loop's copy of the value's expression replaced by a load of the slot.
// Results are bit-identical: the same expression, computed once.
Kernel ReuseHeldRowValues(Kernel kernel);

// A CUDA kernel pass (kernel_passes.h) for kernels the row printer holds on
// chip, unless Knob::kHeldValues is off (FUSEBOX_TUNE_HELD_VALUES=0, A/B runs).

}  // namespace fusebox::backend
