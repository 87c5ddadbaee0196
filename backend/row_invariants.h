// Statements of a row loop that read nothing varying along the row: a
// gathered row's index and its bounds check, a row-broadcast load, an earlier
// pass's result over n. Printed per element they compute the same value each
// time, and an index check's atomics keep compilers from merging the copies
// (GPT-2's first layer norm, which gathers the token's row: 144 index checks
// a row, 1.4 s of NVRTC; printed once per loop, 0.19 s). The printers (the
// CUDA row printer, the C printers' passes) print them once before the loop.
#pragma once

#include <set>
#include <vector>

#include "backend/kernel_ir.h"

namespace fusebox::backend {

// Moves the statements of `body` that are row-invariant to `once`, in order:
// not a store, no held (cache_slot) or per-element index (j, e, k, i), and
// every temporary they read defined outside `body` or row-invariant itself.
// `varying`: temporaries defined outside the body that still change along
// the row (AccumulatorTemps).
void HoistRowInvariant(std::vector<Stmt>* body, std::vector<Stmt>* once, std::set<int> varying);

// Whether `kernel`'s row loops may have their row-invariant statements
// printed before them: not where a row is empty (row_length 0). Such a
// loop never runs, so nothing of it may run before it: a hoisted row-broadcast
// load of an empty input reads past its end (cross_entropy over no targets
// read a null bool pointer, which UBSan caught in the CPU kernel).
bool MayHoistRowInvariants(const Kernel& kernel);

// What changes along a pass's loop though defined outside it: its own
// accumulators (the `varying` of HoistRowInvariant).
std::set<int> AccumulatorTemps(const std::vector<Accumulator>& accumulators);

}  // namespace fusebox::backend
