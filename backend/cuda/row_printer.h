// The CUDA printer of reductions along contiguous rows, for the layout
// row_layout.h chooses: every access contiguous in j moves a group as one
// 16-byte access when the pointers are aligned (checked at run time), else
// as V scalar ones in the same layout. Persistent rows keep their groups in
// registers between passes.
#pragma once

#include <functional>
#include <string>

#include "backend/code_writer.h"
#include "backend/cuda/row_layout.h"
#include "backend/kernel_ir.h"

namespace fusebox::backend {

// What the row printer takes from the CUDA printer: its prelude, the
// combine after a pass (warp or block; `lanes`: the layout's threads per
// row), and the scope of the per-row stores of rows of a whole warp or block
// (one scope, which the row printer closes); both write at the writer's depth.
struct CudaRowHooks {
  std::string prelude;
  std::function<void(CodeWriter&, const Accumulator&, const std::string& combine_lambda, int lanes)> after_pass;
  std::function<void(CodeWriter&)> open_row_stores;
};
// `spread` and `layout`: the kernel's schedule's (ChooseCudaRowLayout, chosen once).
std::string PrintCudaRows(const Kernel& kernel, const CudaRowSpread& spread, const CudaRowLayout& layout,
                          const CudaRowHooks& hooks, const TuningSnapshot& tuning);

}  // namespace fusebox::backend
