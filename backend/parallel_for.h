// Splits a loop over [0, n) across host threads: the CPU kernels' runner
// (backend/executable.cc) and the CPU extern kernels (backend/cpu/attention.h).
#pragma once

#include <cstdint>
#include <functional>

namespace fusebox::backend {

// Runs body(begin, end) over [0, n) on up to one thread per core; `cost` is
// the work per index (threads pay off only for work well above their start).
void ParallelFor(int64_t n, int64_t cost, const std::function<void(int64_t, int64_t)>& body);

}  // namespace fusebox::backend
