// The FUSEBOX_TUNE_* knobs (docs/debugging.md): tuning switches for A/B runs
// on a GPU. Each caller reads its knob once (a function-local static).
#pragma once

#include <cstdint>

namespace fusebox::backend {

// The integer value of environment variable `name`, or `fallback` when it is
// unset or not an integer.
int64_t TuneInt(const char* name, int64_t fallback);
// The same, also `fallback` when the value is outside [lo, hi] (or, with
// `power_of_two`, not a power of two).
int64_t TuneIntInRange(const char* name, int64_t fallback, int64_t lo, int64_t hi, bool power_of_two = false);

}  // namespace fusebox::backend
