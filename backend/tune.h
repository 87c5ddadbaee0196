// The FUSEBOX_TUNE_* knobs (docs/debugging.md): tuning switches for A/B runs
// on a GPU. Each caller reads its knob once (a function-local static).
#pragma once

#include <cstdint>

namespace fusebox::backend {

// The integer value of environment variable `name`, or `fallback` when it is
// unset or not an integer.
int64_t TuneInt(const char* name, int64_t fallback);

}  // namespace fusebox::backend
