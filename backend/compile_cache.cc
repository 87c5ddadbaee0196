#include "backend/compile_cache.h"

#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "tensor/mutex.h"
#include "backend/hash.h"
#include "spdlog/spdlog.h"
#include "tensor/debug.h"

namespace fusebox::backend {
namespace {

namespace fs = std::filesystem;
constexpr std::string_view kMagic = "fusebox-cache-v1\n";

std::string DefaultDir() {
  if (const char* env = std::getenv("FUSEBOX_CACHE_DIR"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return absl::StrCat(xdg, "/fusebox");
  if (const char* home = std::getenv("HOME"); home && *home) return absl::StrCat(home, "/.cache/fusebox");
  return "/tmp/fusebox-cache";
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = std::move(ss).str();
  return true;
}

// Writes via a temporary file and rename, so readers never see half a file.
bool WriteFileAtomically(const std::string& path, std::string_view bytes) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".", std::rand());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) return false;
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

void AppendField(std::string* out, std::string_view field) {
  absl::StrAppend(out, field.size(), "\n", absl::string_view(field.data(), field.size()));
}

bool ReadField(std::string_view* in, std::string* field) {
  size_t nl = in->find('\n');
  if (nl == std::string_view::npos) return false;
  size_t len = 0;
  for (char c : in->substr(0, nl)) {
    if (c < '0' || c > '9') return false;
    len = len * 10 + (c - '0');
  }
  in->remove_prefix(nl + 1);
  if (len > in->size()) return false;
  *field = std::string(in->substr(0, len));
  in->remove_prefix(len);
  return true;
}

std::string Serialize(const std::string& key, const CompiledBinary& b, const std::string& so_hash) {
  std::string body(kMagic);
  for (std::string_view f : {std::string_view(key), std::string_view(b.ptx), std::string_view(b.cubin),
                             std::string_view(b.log), std::string_view(b.so_path), std::string_view(so_hash)}) {
    AppendField(&body, f);
  }
  AppendField(&body, StableHashHex(body));
  return body;
}

// Fails (false) on any mismatch; the caller recompiles.
bool Deserialize(std::string_view in, const std::string& key, CompiledBinary* b, std::string* why) {
  const std::string_view whole = in;
  if (!in.starts_with(kMagic)) return *why = "bad magic", false;
  in.remove_prefix(kMagic.size());
  std::string stored_key, so_hash, checksum;
  if (!ReadField(&in, &stored_key) || !ReadField(&in, &b->ptx) || !ReadField(&in, &b->cubin) ||
      !ReadField(&in, &b->log) || !ReadField(&in, &b->so_path) || !ReadField(&in, &so_hash)) {
    return *why = "truncated", false;
  }
  const size_t body_size = whole.size() - in.size();
  if (!ReadField(&in, &checksum) || !in.empty()) return *why = "truncated", false;
  if (checksum != StableHashHex(whole.substr(0, body_size))) return *why = "checksum mismatch", false;
  if (stored_key != key) return *why = "key mismatch (hash collision)", false;
  if (!b->so_path.empty()) {
    std::string so;
    if (!ReadFile(b->so_path, &so)) return *why = "shared object missing", false;
    if (StableHashHex(so) != so_hash) return *why = "shared object checksum mismatch", false;
  }
  return true;
}

// Why `dir` cannot hold the cache (created if missing, then a file written
// and removed), or "" when it can.
std::string UnusableReason(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::StrCat("cannot create it: ", ec.message());
  if (!fs::is_directory(dir, ec)) return "it is not a folder";
  std::string probe = absl::StrCat(dir, "/.probe-XXXXXX");
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) return absl::StrCat("cannot write in it: ", std::strerror(errno));
  ::close(fd);
  fs::remove(probe, ec);
  return "";
}

// The folder the cache works in: FUSEBOX_CACHE_DIR (or the default) when it
// is usable, else a private temporary folder for this process, removed at
// exit. The compilers write their sources and objects there too, so without
// a usable folder no kernel could be built at all.
std::string WorkingDir() {
  const std::string dir = DefaultDir();
  const std::string why = UnusableReason(dir);
  if (why.empty()) return dir;
  std::string tmp = (fs::temp_directory_path() / "fusebox-XXXXXX").string();
  if (::mkdtemp(tmp.data()) == nullptr) {
    spdlog::warn("the compile cache folder {} is unusable ({}), and so is a temporary folder: {}", dir, why,
                 std::strerror(errno));
    return dir;
  }
  spdlog::warn("the compile cache folder {} is unusable ({}); compiling in {} without a disk cache "
               "(set FUSEBOX_CACHE_DIR to a writable folder)", dir, why, tmp);
  static std::string* private_dir = new std::string(tmp);
  std::atexit([] {
    std::error_code ec;
    fs::remove_all(*private_dir, ec);
  });
  return tmp;
}

}  // namespace

struct CompileCache::Impl {
  mutable fusebox::Mutex mu;
  // Failures are kept too: a kernel that does not compile is compiled once,
  // not again by every later lookup (compile-ahead, then the load).
  absl::flat_hash_map<std::string, absl::StatusOr<std::shared_ptr<const CompiledBinary>>> memory ABSL_GUARDED_BY(mu);
  CompileCacheStats stats ABSL_GUARDED_BY(mu);
  int running ABSL_GUARDED_BY(mu) = 0;  // compilers now; busy_ms grows while it is above 0
  std::chrono::steady_clock::time_point busy_since ABSL_GUARDED_BY(mu);
};

CompileCache& CompileCache::Get() {
  static CompileCache* cache = new CompileCache();
  return *cache;
}

CompileCache::CompileCache() : dir_(WorkingDir()), impl_(std::make_unique<Impl>()) {}

CompileCacheStats CompileCache::stats() const {
  fusebox::MutexLock lock(&impl_->mu);
  return impl_->stats;
}

void CompileCache::ClearMemory() {
  fusebox::MutexLock lock(&impl_->mu);
  impl_->memory.clear();
}

absl::StatusOr<std::shared_ptr<const CompiledBinary>> CompileCache::GetOrCompile(const std::string& target,
                                                                                 const std::string& key,
                                                                                 const CompileFn& compile) {
  {
    fusebox::MutexLock lock(&impl_->mu);
    if (auto it = impl_->memory.find(key); it != impl_->memory.end()) {
      ++impl_->stats.memory_hits;
      return it->second;
    }
  }
  const std::string stem = absl::StrCat(target, "-", StableHashHex(key));
  const std::string entry_path = absl::StrCat(dir_, "/", stem, ".entry");
  auto binary = std::make_shared<CompiledBinary>();
  std::string bytes, why;
  bool from_disk = false;
  if (ReadFile(entry_path, &bytes)) {
    from_disk = Deserialize(bytes, key, binary.get(), &why);
    if (!from_disk) spdlog::warn("compile cache entry {} is unusable ({}); recompiling", entry_path, why);
  }
  double compile_ms = 0;
  if (!from_disk) {
    const auto start = std::chrono::steady_clock::now();
    {
      fusebox::MutexLock lock(&impl_->mu);
      if (impl_->running++ == 0) impl_->busy_since = start;
    }
    absl::StatusOr<CompiledBinary> compiled = compile(dir_, stem);
    const auto end = std::chrono::steady_clock::now();
    compile_ms = std::chrono::duration<double, std::milli>(end - start).count();
    {
      fusebox::MutexLock lock(&impl_->mu);
      if (--impl_->running == 0) {
        impl_->stats.busy_ms += std::chrono::duration<double, std::milli>(end - impl_->busy_since).count();
      }
    }
    if (!compiled.ok()) {
      fusebox::MutexLock lock(&impl_->mu);
      ++impl_->stats.compiles;
      return impl_->memory.emplace(key, compiled.status()).first->second;
    }
    *binary = *std::move(compiled);
    std::string so_hash;
    if (!binary->so_path.empty()) {
      std::string so;
      if (ReadFile(binary->so_path, &so)) so_hash = StableHashHex(so);
    }
    if (!WriteFileAtomically(entry_path, Serialize(key, *binary, so_hash))) {
      spdlog::warn("could not write compile cache entry {}", entry_path);
    }
  }
  if (DebugDump("cache")) {
    std::fprintf(stderr, "[fusebox cache] %s %s%s\n", from_disk ? "disk hit" : "compiled", entry_path.c_str(),
                 from_disk ? "" : absl::StrCat(" in ", static_cast<int64_t>(compile_ms), " ms").c_str());
  }
  fusebox::MutexLock lock(&impl_->mu);
  ++(from_disk ? impl_->stats.disk_hits : impl_->stats.compiles);
  impl_->stats.compile_ms += compile_ms;
  auto [it, inserted] = impl_->memory.emplace(key, std::move(binary));
  return it->second;
}

}  // namespace fusebox::backend
