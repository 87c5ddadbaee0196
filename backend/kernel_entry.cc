#include "backend/kernel_entry.h"

#include "absl/strings/str_replace.h"

namespace fusebox::backend {

std::string UnderEntryName(const std::string& source, const std::string& name) {
  return absl::StrReplaceAll(source, {{name, kKernelEntry}});
}

std::string UnderKernelName(const std::string& text, const std::string& name) {
  return absl::StrReplaceAll(text, {{kKernelEntry, name}});
}

}  // namespace fusebox::backend
