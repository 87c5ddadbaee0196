// A softmax over a split column (cuda/split_printer.h) reads HBM once per
// pass: the max, then the sum of exp(x - max), then the stores. The sum can
// be folded in the max's own pass instead (Milakov and Gimelshein's online
// softmax): each element updates the running pair (m, s) as
//   m' = max(m, y),  s' = s * exp(m - m') + exp(y - m'),
// and two partial pairs combine the same way, so the column is read once
// fewer (softmax, log_softmax: 3 reads and a write become 2 and a write).
// The split column layout takes it, and the row layouts where it leaves
// one pass with no stores per element and the row is not held in registers
// alone (cuda/cuda_schedule.cc): rows held in registers lose nothing to
// the extra pass; longer ones were held in shared memory one row per SM,
// or re-read (GPT-2's cross-entropy logsumexp over 50304), and folded are
// read once, streaming several rows per SM.
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
