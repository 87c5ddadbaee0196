#include "tensor/pending_error.h"

#include <algorithm>

#include "tensor/error.h"

namespace fusebox {

std::shared_ptr<PendingError> PendingError::Join(Probe own, absl::Span<const std::shared_ptr<PendingError>> read) {
  std::vector<std::shared_ptr<PendingError>> after;
  for (const std::shared_ptr<PendingError>& p : read) {
    if (p == nullptr || std::find(after.begin(), after.end(), p) != after.end()) continue;
    const std::optional<absl::Status> known = p->Poll();
    if (known.has_value() && known->ok()) continue;  // passed: nothing to carry
    after.push_back(p);
  }
  if (!own && after.empty()) return nullptr;
  if (!own && after.size() == 1) return after[0];  // nothing new to wait for
  return std::shared_ptr<PendingError>(new PendingError(std::move(own), std::move(after)));
}

std::optional<absl::Status> PendingError::Poll(bool wait) {
  fusebox::MutexLock lock(&mu_);
  if (status_.has_value()) return status_;
  // The runs this one read come first: theirs is the earlier failure.
  size_t passed = 0;
  for (; passed < after_.size(); ++passed) {
    const std::optional<absl::Status> s = after_[passed]->Poll(wait);
    if (!s.has_value()) {
      after_.erase(after_.begin(), after_.begin() + passed);  // drops the passed ones
      return std::nullopt;
    }
    if (!s->ok()) {
      status_ = *s;
      break;
    }
  }
  if (!status_.has_value() && own_) {
    std::optional<absl::Status> s = own_(wait);
    if (!s.has_value()) return std::nullopt;
    status_ = *std::move(s);
  }
  if (!status_.has_value()) status_ = absl::OkStatus();
  own_ = nullptr;  // releases the run's flag
  after_.clear();
  return status_;
}

void PendingError::Check() {
  const std::optional<absl::Status> s = Poll(/*wait=*/true);
  FUSEBOX_CHECK(s.has_value(), "a pending check did not resolve while waiting");
  ThrowIfError(*s);
}

}  // namespace fusebox
