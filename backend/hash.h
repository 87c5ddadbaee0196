// A stable 64-bit content hash (FNV-1a) for compile-cache keys and on-disk
// checksums: absl::Hash is salted per process, so it cannot name files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fusebox::backend {

uint64_t StableHash(std::string_view bytes, uint64_t seed = 0xcbf29ce484222325ull);
std::string StableHashHex(std::string_view bytes);  // 16 hex digits

}  // namespace fusebox::backend
