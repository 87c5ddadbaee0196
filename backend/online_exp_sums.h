// A softmax over a split column (cuda/split_printer.h) reads HBM once per
// pass: the max, then the sum of exp(x - max), then the stores. The sum can
// be folded in the max's own pass instead (Milakov and Gimelshein's online
// softmax): each element updates the running pair (m, s) as
//   m' = max(m, y),  s' = s * exp(m - m') + exp(y - m'),
// and two partial pairs combine the same way, so the column is read once
// fewer (softmax, log_softmax: 3 reads and a write become 2 and a write).
// Only the split column layout takes it so far. Rows held in registers
// (persistent rows) lose nothing to the extra pass; rows too long for
// registers do (cuda/row_layout.h): held in registers and shared memory,
// one 1024-thread block and so one row per SM in flight (GPT-2's
// cross-entropy logsumexp over 50304, 44% of copy on the H200,
// bench/NOTES.md), walked grid-stride with the re-read from the L2, or
// looped past kCudaL2RowBytes, re-reading HBM. Folding those online (a
// row read once streams with several rows per SM) is not done yet.
#pragma once

#include <cstddef>

#include "backend/kernel_ir.h"
#include "backend/tuning.h"

namespace fusebox::backend {

// Pure: `kernel` with each pass whose accumulators are all sums of
// exp(y - M), M a max accumulator of the pass before and y the same value
// that max folds, merged into that pass: the sums become online
// accumulators (Accumulator::online_max), the pass's body is dropped. The
// kernel itself where no pass has that form. Results differ from the
// two-pass fold by rounding (the rescalings), ~1 ulp per fold.
Kernel FoldExpSumsOnline(Kernel kernel);

// The passes FoldExpSumsOnline leaves (the schedule's partial launches).
size_t PassesAfterOnlineExpSums(const Kernel& kernel);

// Whether a split of `kernel`'s columns folds its exp sums online: it has
// such a pass and Knob::kOnlineExpSums is on (the spread's column lanes and
// the schedule read it).
bool FoldsExpSumsOnline(const Kernel& kernel, const TuningSnapshot& tuning);

}  // namespace fusebox::backend
