#include "backend/hash.h"

#include "absl/strings/str_format.h"

namespace fusebox::backend {

uint64_t StableHash(std::string_view bytes, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string StableHashHex(std::string_view bytes) { return absl::StrFormat("%016x", StableHash(bytes)); }

}  // namespace fusebox::backend
