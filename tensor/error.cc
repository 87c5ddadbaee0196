#include "tensor/error.h"

namespace fusebox {

void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) throw Error(std::string(status.message()));
}

void ThrowInternal(const char* file, int line, const char* cond, const std::string& msg) {
  throw Error(absl::StrCat("fusebox internal error at ", file, ":", line, ": check `", cond,
                           "` failed", msg.empty() ? "" : ": ", msg,
                           " (this is a bug in fusebox; please report it)"));
}

}  // namespace fusebox
