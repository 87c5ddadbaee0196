// Errors. The user-facing API throws fusebox::Error with a message the user can
// act on; compiler layers return absl::Status and are converted at the edge.
// FUSEBOX_CHECK is for internal invariants (a fusebox bug), FUSEBOX_ENSURE for
// user mistakes; both throw, with different wording.
#pragma once

#include <stdexcept>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace fusebox {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Throws fusebox::Error with the status message when `status` is not OK.
void ThrowIfError(const absl::Status& status);

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  ThrowIfError(value.status());
  return *std::move(value);
}

[[noreturn]] void ThrowInternal(const char* file, int line, const char* cond, const std::string& msg);

}  // namespace fusebox

// User mistake: message says what to do.
#define FUSEBOX_ENSURE(cond, ...)                                     \
  do {                                                                \
    if (!(cond)) throw ::fusebox::Error(::absl::StrCat(__VA_ARGS__)); \
  } while (0)

// Internal invariant: a failure is a bug in fusebox.
#define FUSEBOX_CHECK(cond, ...)                                                         \
  do {                                                                                   \
    if (!(cond)) ::fusebox::ThrowInternal(__FILE__, __LINE__, #cond, ::absl::StrCat(__VA_ARGS__)); \
  } while (0)
