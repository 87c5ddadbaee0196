// fusebox::Mutex: std::mutex with Abseil's thread-safety annotations and
// absl::Mutex's spelling (Lock, Unlock, TryLock, MutexLock(&mu)). Debian's
// Abseil is not built with ThreadSanitizer, so TSan cannot see absl::Mutex
// synchronize and reports false races; std::mutex goes through pthread, which
// TSan intercepts. One lock type everywhere, so TSan checks the shipped code.
#pragma once

#include <mutex>

#include "absl/base/thread_annotations.h"

namespace fusebox {

class ABSL_LOCKABLE Mutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }

 private:
  std::mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* mu_;
};

}  // namespace fusebox
