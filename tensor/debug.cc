#include "tensor/debug.h"

#include <cstdlib>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_split.h"
#include "spdlog/spdlog.h"

namespace fusebox {

bool DebugDump(std::string_view what) {
  static const absl::flat_hash_set<std::string> kDumps = [] {
    absl::flat_hash_set<std::string> dumps;
    if (const char* env = std::getenv("FUSEBOX_DEBUG")) {
      for (absl::string_view item : absl::StrSplit(env, ',', absl::SkipWhitespace())) {
        dumps.insert(std::string(item));
      }
    }
    return dumps;
  }();
  return kDumps.contains(std::string(what)) || kDumps.contains("all");
}

void InitLogging() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("FUSEBOX_LOG");
    spdlog::set_level(env ? spdlog::level::from_str(env) : spdlog::level::warn);
    spdlog::set_pattern("[fusebox %l] %v");
  });
}

}  // namespace fusebox
