#include "backend/tune.h"

#include <cstdlib>

#include "absl/strings/numbers.h"

namespace fusebox::backend {

int64_t TuneInt(const char* name, int64_t fallback) {
  const char* s = std::getenv(name);
  int64_t value = 0;
  return s != nullptr && absl::SimpleAtoi(s, &value) ? value : fallback;
}

int64_t TuneIntInRange(const char* name, int64_t fallback, int64_t lo, int64_t hi, bool power_of_two) {
  const int64_t n = TuneInt(name, fallback);
  return n >= lo && n <= hi && (!power_of_two || (n & (n - 1)) == 0) ? n : fallback;
}

}  // namespace fusebox::backend
