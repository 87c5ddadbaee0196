#include "backend/cpu/host_compiler.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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

extern "C" char** environ;

// Runs argv[0] (searched in PATH) with argv, stdout and stderr to `log_path`,
// without a shell: no path or flag is ever parsed as shell syntax, so a cache
// folder with a space or a quote in its name is just a name. The exit status,
// or -1 when the process could not be started.
int RunProcess(const std::vector<std::string>& args, const std::string& log_path) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  const int err = ::posix_spawnp(&pid, argv[0], &files, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  if (err != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

// A sanitized fusebox (-DFUSEBOX_SANITIZE) compiles its kernels with the same
// sanitizers: the process has their runtime, and a kernel that reads out of
// bounds is reported like any other code. The flags are part of the command,
// so of the cache key: sanitized and plain kernels never mix.
#ifndef FUSEBOX_KERNEL_SANITIZE_FLAGS
#define FUSEBOX_KERNEL_SANITIZE_FLAGS ""
#endif

std::vector<std::string> HostCompilerArgs() {
  // $CXX may name a launcher and a compiler ("ccache g++"), as make allows.
  std::vector<std::string> args = absl::StrSplit(Compiler(), ' ', absl::SkipWhitespace());
  // -fno-math-errno lets sqrt vectorize; IEEE results are unchanged.
  for (const char* flag : {"-O3", "-march=native", "-fno-math-errno", "-std=c++17", "-shared", "-fPIC", "-w"}) {
    args.push_back(flag);
  }
  for (absl::string_view flag : absl::StrSplit(FUSEBOX_KERNEL_SANITIZE_FLAGS, ' ', absl::SkipWhitespace())) {
    args.emplace_back(flag);
  }
  return args;
}

std::string HostCompilerCommand() { return absl::StrJoin(HostCompilerArgs(), " "); }

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
        std::vector<std::string> args = HostCompilerArgs();
        args.insert(args.end(), {"-o", tmp_so, src});
        const std::string cmd = absl::StrJoin(args, " ");
        spdlog::debug("compiling {}: {}", name, cmd);
        const int rc = RunProcess(args, log_path);
        std::stringstream log;
        log << std::ifstream(log_path).rdbuf();
        const bool ok = rc == 0 && std::rename(tmp_so.c_str(), so.c_str()) == 0;
        // The source and log stay under the kernel's stable name for the user.
        const std::string kept_src = absl::StrCat(dir, "/", stem, ".cc");
        std::rename(src.c_str(), kept_src.c_str());
        std::rename(log_path.c_str(), absl::StrCat(dir, "/", stem, ".log").c_str());
        if (!ok) {
          return absl::InternalError(absl::StrCat(
              "the host C++ compiler failed on kernel ", name,
              rc < 0 ? absl::StrCat(" (could not start '", args[0], "'; set CXX to a C++ compiler)")
                     : absl::StrCat(" (exit ", rc, ")"),
              "; source: ", kept_src, "\ncommand: ", cmd, "\n", log.str()));
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
