// A failure that a run may have found but not reported yet: CUDA kernels
// record a bad index in a flag that is read back without synchronizing the
// run (backend/cuda/index_flag.h). The run's results carry the check on their
// storage (Storage::pending()); whatever exposes their values first
// (to(Device), data_ptr(), item(), to_vector(), printing) checks it, and a
// run that computes from them passes it on to its own results.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "tensor/mutex.h"

namespace fusebox {

class PendingError {
 public:
  // The run's status, or nullopt when it is not known yet and `wait` is false.
  using Probe = std::function<std::optional<absl::Status>(bool wait)>;

  // What the results of a run carry: its own check `own` (may be empty)
  // after those of the values it read (`read`, nulls skipped). Checks of
  // `read` already known to pass are dropped without waiting, so a chain of
  // runs never read keeps only the runs still in flight. Null when nothing
  // is left to check.
  static std::shared_ptr<PendingError> Join(Probe own, absl::Span<const std::shared_ptr<PendingError>> read);

  // Waits for the run (and those before it) and throws their first failure
  // as fusebox::Error; every later call throws it again.
  void Check();
  // Without waiting: OK, a failure, or nullopt while a run is in flight.
  std::optional<absl::Status> Poll(bool wait = false);

 private:
  PendingError(Probe own, std::vector<std::shared_ptr<PendingError>> after)
      : own_(std::move(own)), after_(std::move(after)) {}
  fusebox::Mutex mu_;
  Probe own_ ABSL_GUARDED_BY(mu_);  // released once resolved
  std::vector<std::shared_ptr<PendingError>> after_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fusebox
