#include "tensor/debug.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/ascii.h"
#include "spdlog/spdlog.h"

namespace fusebox {

namespace {
constexpr std::string_view kDumpNames[] = {"graph", "plan", "ir", "cpp", "cuda", "schedule", "passes", "ptx", "cache", "recompiles", "all"};


std::string DumpNameList() {
  std::string out;
  for (std::string_view name : kDumpNames) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

}  // namespace

std::span<const std::string_view> DebugDumpNames() { return kDumpNames; }

std::vector<std::string> ParseDebugDumps(std::string_view list, std::vector<std::string>* warnings) {
  std::vector<std::string> dumps;
  for (absl::string_view item : absl::StrSplit(absl::string_view(list.data(), list.size()), ',', absl::SkipWhitespace())) {
    const std::string name(absl::StripAsciiWhitespace(item));
    if (std::find(std::begin(kDumpNames), std::end(kDumpNames), name) != std::end(kDumpNames)) {
      dumps.push_back(name);
      continue;
    }
    std::string message = absl::StrCat("FUSEBOX_DEBUG: unknown name '", name, "' (ignored); the names are: ",
                                       DumpNameList());
    spdlog::warn("{}", message);
    if (warnings != nullptr) warnings->push_back(std::move(message));
  }
  return dumps;
}

bool DebugDump(std::string_view what) {
  static const absl::flat_hash_set<std::string> kDumps = [] {
    InitLogging();
    const char* env = std::getenv("FUSEBOX_DEBUG");
    const std::vector<std::string> dumps = ParseDebugDumps(env != nullptr ? env : "");
    return absl::flat_hash_set<std::string>(dumps.begin(), dumps.end());
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
