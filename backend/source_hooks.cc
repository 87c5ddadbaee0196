#include "backend/source_hooks.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "tensor/mutex.h"
#include "spdlog/spdlog.h"

namespace fusebox::backend {
namespace {

fusebox::Mutex mu;
SourceRewrite& Rewrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  static SourceRewrite* rewrite = new SourceRewrite();
  return *rewrite;
}

}  // namespace

void DumpKernelSource(const std::string& name, const std::string& extension, const std::string& source) {
  const char* dir = std::getenv("FUSEBOX_DUMP_DIR");
  if (dir == nullptr || *dir == '\0') return;
  fusebox::MutexLock lock(&mu);  // two threads compiling the same name must not pick one file
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  for (int k = 0; k < 1000; ++k) {
    const std::string path = absl::StrCat(dir, "/", name, k == 0 ? "" : absl::StrCat("-", k), extension);
    std::ifstream existing(path);
    if (existing) {
      std::stringstream text;
      text << existing.rdbuf();
      if (text.str() == source) return;
      continue;
    }
    std::ofstream out(path);
    out << source;
    if (!out) spdlog::warn("FUSEBOX_DUMP_DIR: could not write {}", path);
    return;
  }
}

void SetSourceRewriteForTesting(SourceRewrite rewrite) {
  fusebox::MutexLock lock(&mu);
  Rewrite() = std::move(rewrite);
}

std::string RewriteSource(const std::string& name, std::string source) {
  fusebox::MutexLock lock(&mu);
  return Rewrite() ? Rewrite()(name, source) : source;
}

}  // namespace fusebox::backend
