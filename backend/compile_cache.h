// One cache in front of both compilers (NVRTC and the host C++ compiler): in
// memory, then on disk under FUSEBOX_CACHE_DIR (default ~/.cache/fusebox).
// Entries are keyed by the full key material (source + compiler + options),
// written atomically, and checksummed: a corrupt, truncated or mismatched
// entry is recompiled and overwritten, never trusted.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace fusebox::backend {

struct CompiledBinary {
  std::string ptx;      // CUDA
  std::string cubin;    // CUDA
  std::string log;      // compiler output (ptxas -v for CUDA)
  std::string so_path;  // CPU: shared object inside the cache dir
};

struct CompileCacheStats {
  int64_t memory_hits = 0;
  int64_t disk_hits = 0;
  int64_t compiles = 0;  // cache misses: a compiler ran
  double compile_ms = 0;  // time inside the compilers, summed over threads
  double busy_ms = 0;     // wall time with at least one compiler running (parallel compiles overlap)
};

class CompileCache {
 public:
  static CompileCache& Get();

  // `compile` runs on a miss; it gets the cache dir and the entry's file stem
  // ("cpu-0123abcd...") to put files (sources, shared objects) under.
  using CompileFn = std::function<absl::StatusOr<CompiledBinary>(const std::string& dir, const std::string& stem)>;
  absl::StatusOr<std::shared_ptr<const CompiledBinary>> GetOrCompile(const std::string& target,
                                                                     const std::string& key_material,
                                                                     const CompileFn& compile);

  const std::string& dir() const { return dir_; }
  CompileCacheStats stats() const;
  // Forgets the in-memory entries (the disk stays): tests use it to exercise
  // the disk path without a new process.
  void ClearMemory();

 private:
  CompileCache();
  struct Impl;
  std::string dir_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fusebox::backend
