// Long float sums on the CPU: one float accumulator folding a whole row
// stalls at 2^24 (sum(ones(2^25)) gave 2^24) and drifts long before. Passes
// that fold float sums or products over long rows are printed as a cascade
// (PyTorch's cascade_sum): 16 lanes per block, a pairwise tree over the
// lanes, then levels of at most kCascadeFanIn block results each.
#pragma once

#include <functional>
#include <string>

#include "backend/code_writer.h"
#include "backend/kernel_ir.h"

namespace fusebox::backend::cpu {

// A block: kCascadeLanes lanes, each a serial chain of kCascadeLaneChain
// elements; each level above folds at most kCascadeFanIn values.
inline constexpr int kCascadeLanes = 16;
inline constexpr int64_t kCascadeLaneChain = 128;
inline constexpr int64_t kCascadeFanIn = 64;

// Whether `pass` folds a float sum or product over rows longer than one
// lane's chain: those are printed by PrintCascadePass.
bool UsesCascade(const Kernel& kernel, const Pass& pass);

// The pass's declarations and loops, rows split into blocks of
// kCascadeLanes * kCascadeLaneChain elements. The body runs once per element
// in row order, so the other accumulators (max, argmax, integer sums) fold
// as in a plain loop.
// Written at `w`'s depth (a row's statements).
void PrintCascadePass(CodeWriter& w, const Kernel& kernel, const Pass& pass,
                      const std::function<const char*(graph::Op)>& op_template);

}  // namespace fusebox::backend::cpu
