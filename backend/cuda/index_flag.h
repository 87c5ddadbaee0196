// A CUDA run's index-check flag (backend/index_check.h), read back without
// synchronizing the run. Before the run's launches the flag is zeroed on the
// stream; after them its four words are copied into pinned host memory and
// an event is recorded, all queued. The run's results carry a PendingError
// (tensor/pending_error.h) whose probe asks the event: only reading the
// results, or polling a flag whose copy has landed, looks at the words.
// Flags come from a per-device pool (pinned memory is slow to allocate);
// reuse is safe because every copy is ordered on the one stream.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "backend/cuda/driver.h"
#include "tensor/pending_error.h"

namespace fusebox::cuda {

struct IndexFlagSlot;

class IndexFlag {
 public:
  // A flag of `device`'s pool, zeroed on the stream ahead of the run's launches.
  static absl::StatusOr<IndexFlag> Begin(int device);
  // What the kernels take as `fb_err`.
  void* device_words() const;
  // Queues the copy to the host and the event (after the run's last launch)
  // and hands the flag to the probe the results carry.
  absl::StatusOr<PendingError::Probe> End() &&;

 private:
  std::shared_ptr<IndexFlagSlot> slot_;
};

// Process-wide counts, for tests: probes that waited for a run's flag (a
// read of its results) and flags read back (waited for, or found landed).
struct IndexFlagCounts {
  int64_t waits = 0;
  int64_t reads = 0;
};
IndexFlagCounts GetIndexFlagCounts();

}  // namespace fusebox::cuda
