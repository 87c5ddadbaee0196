#include "backend/kernel_entry.h"

#include <atomic>
#include <cstdlib>
#include <string_view>

#include "absl/strings/str_replace.h"

namespace fusebox::backend {
namespace {

// -1: the environment decides; 0 or 1: a ScopedUniqueKernelNames.
std::atomic<int> unique_override{-1};

}  // namespace

bool UniqueKernelNames() {
  static const bool from_env = [] {
    const char* env = std::getenv("FUSEBOX_UNIQUE_KERNEL_NAMES");
    return env != nullptr && *env != '\0' && std::string_view(env) != "0";
  }();
  const int forced = unique_override.load();
  return forced < 0 ? from_env : forced == 1;
}

ScopedUniqueKernelNames::ScopedUniqueKernelNames(bool unique) : previous_(unique_override.exchange(unique ? 1 : 0)) {}

ScopedUniqueKernelNames::~ScopedUniqueKernelNames() { unique_override.store(previous_); }

std::string EntryName(const std::string& name, bool unique) { return unique ? name : kKernelEntry; }

std::string UnderEntryName(const std::string& source, const std::string& name, const std::string& entry) {
  return entry == name ? source : absl::StrReplaceAll(source, {{name, entry}});
}

std::string UnderKernelName(const std::string& text, const std::string& name) {
  return absl::StrReplaceAll(text, {{kKernelEntry, name}});
}

}  // namespace fusebox::backend
