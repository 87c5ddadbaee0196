#include "backend/cpu/host_compiler.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "backend/compile_cache.h"
#include "spdlog/spdlog.h"
#include "tensor/debug.h"

namespace fusebox::backend::cpu {
namespace {

std::string Compiler() {
  const char* cxx = std::getenv("CXX");
  return (cxx && *cxx) ? cxx : "c++";
}

// `$CXX --version`'s first line: a compiler upgrade must miss the cache.
std::string CompilerVersion() {
  static const std::string version = [] {
    std::string out;
    if (FILE* p = ::popen((Compiler() + " --version 2>/dev/null").c_str(), "r")) {
      char buf[256];
      if (std::fgets(buf, sizeof buf, p)) out = buf;
      ::pclose(p);
    }
    return out;
  }();
  return version;
}

}  // namespace

// A sanitized fusebox (-DFUSEBOX_SANITIZE) compiles its kernels with the same
// sanitizers: the process has their runtime, and a kernel that reads out of
// bounds is reported like any other code. The flags are part of the command,
// so of the cache key: sanitized and plain kernels never mix.
#ifndef FUSEBOX_KERNEL_SANITIZE_FLAGS
#define FUSEBOX_KERNEL_SANITIZE_FLAGS ""
#endif

std::string HostCompilerCommand() {
  // -fno-math-errno lets sqrt vectorize; IEEE results are unchanged.
  constexpr char kSanitize[] = FUSEBOX_KERNEL_SANITIZE_FLAGS;
  return absl::StrCat(Compiler(), " -O3 -march=native -fno-math-errno -std=c++17 -shared -fPIC -w",
                      kSanitize[0] == '\0' ? "" : " ", kSanitize);
}

absl::StatusOr<LoadedCpuKernel> CompileCpuKernel(const std::string& source, const std::string& name) {
  const std::string key = absl::StrCat("cpu\n", HostCompilerCommand(), "\n", CompilerVersion(), "\n", source);
  bool compiled = false;
  auto binary = CompileCache::Get().GetOrCompile(
      "cpu", key, [&](const std::string& dir, const std::string& stem) -> absl::StatusOr<CompiledBinary> {
        // Processes sharing the cache dir (ctest -j) may compile the same kernel
        // at once: each works on its own files and renames the .so into place.
        static std::atomic<int64_t> counter{0};
        const std::string tmp = absl::StrCat(dir, "/", stem, ".tmp", ::getpid(), "_", counter++);
        const std::string src = absl::StrCat(tmp, ".cc");
        const std::string so = absl::StrCat(dir, "/", stem, ".so");
        const std::string log_path = absl::StrCat(tmp, ".log");
        std::ofstream(src) << source;
        const std::string tmp_so = absl::StrCat(tmp, ".so");
        const std::string cmd =
            absl::StrCat(HostCompilerCommand(), " -o '", tmp_so, "' '", src, "' > '", log_path, "' 2>&1");
        spdlog::debug("compiling {}: {}", name, cmd);
        const int rc = std::system(cmd.c_str());
        std::stringstream log;
        log << std::ifstream(log_path).rdbuf();
        const bool ok = rc == 0 && std::rename(tmp_so.c_str(), so.c_str()) == 0;
        // The source and log stay under the kernel's stable name for the user.
        const std::string kept_src = absl::StrCat(dir, "/", stem, ".cc");
        std::rename(src.c_str(), kept_src.c_str());
        std::rename(log_path.c_str(), absl::StrCat(dir, "/", stem, ".log").c_str());
        if (!ok) {
          return absl::InternalError(absl::StrCat("the host C++ compiler failed on kernel ", name, " (exit ", rc,
                                                  "); source: ", kept_src, "\ncommand: ", cmd, "\n", log.str()));
        }
        compiled = true;
        return CompiledBinary{.log = log.str(), .so_path = so};
      });
  if (!binary.ok()) return binary.status();
  void* handle = ::dlopen((*binary)->so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::InternalError(absl::StrCat("dlopen(", (*binary)->so_path, ") failed: ", ::dlerror()));
  }
  auto fn = reinterpret_cast<CpuKernelFn>(::dlsym(handle, name.c_str()));
  if (fn == nullptr) return absl::InternalError(absl::StrCat("kernel ", name, " not found in ", (*binary)->so_path));
  return LoadedCpuKernel{fn, (*binary)->so_path, compiled};
}

}  // namespace fusebox::backend::cpu
