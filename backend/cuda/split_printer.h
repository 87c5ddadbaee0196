// CUDA split reductions (CudaRowSpread::split > 1): a partial kernel
// `<name>_partial` folds each (row, chunk) into one partial result per
// accumulator in scratch; the kernel `<name>` folds each row's partials and
// runs the per-row stores (launched as a programmatic dependent of the
// partial one). Column sums with CudaRowSpread::column_tiles take their
// partial kernel from column_tiles.h.
#pragma once

#include <string>

#include "backend/cuda/row_printer.h"
#include "backend/cuda/row_spread.h"
#include "backend/kernel_ir.h"
#include "backend/tuning.h"

namespace fusebox::backend {

// `spread`: the kernel's schedule's; `hooks`: the CUDA printer's prelude,
// per-pass combine and per-row stores' scope (as for PrintCudaRows).
std::string PrintCudaSplit(const Kernel& kernel, const CudaRowSpread& spread, const CudaRowHooks& hooks,
                           const TuningSnapshot& tuning);

}  // namespace fusebox::backend
