#include "backend/tune.h"

#include <cstdlib>

#include "absl/strings/numbers.h"

namespace fusebox::backend {

int64_t TuneInt(const char* name, int64_t fallback) {
  const char* s = std::getenv(name);
  int64_t value = 0;
  return s != nullptr && absl::SimpleAtoi(s, &value) ? value : fallback;
}

}  // namespace fusebox::backend
