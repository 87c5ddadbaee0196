// The recording side of fusebox::Profiler, used by frontend/runtime.cc (graph
// runs) and backend/executable.cc (kernels). A record object checks one
// relaxed atomic flag when constructed and does nothing more unless a profiler
// is recording; then it holds the profiler's Session, so a profiler destroyed
// on another thread meanwhile cannot leave it dangling.
#pragma once

#include <cuda.h>  // CUevent (types only)

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tensor/mutex.h"
#include "profiler/profiler.h"
#include "tensor/device.h"

namespace fusebox::profiler {

namespace internal {
inline std::atomic<bool> recording{false};
}  // namespace internal

// The whole cost of the profiler when none is alive.
inline bool Recording() { return internal::recording.load(std::memory_order_relaxed); }

// What one profiler recorded. Shared by the Profiler and by records in flight.
class Session {
 public:
  Session();
  ~Session();  // destroys CUDA events never resolved

  double NowUs() const;
  int64_t NextId() { return next_id_.fetch_add(1, std::memory_order_relaxed); }
  // The event device times are measured from on `device`: recorded the first
  // time, after a synchronize, so it runs at the host time noted with it.
  absl::StatusOr<CUevent> DeviceBase(int device);
  // `start`/`end` (CUDA kernels): events around the launches, owned from here on.
  void Add(ProfilerEvent event, int device = -1, CUevent start = nullptr, CUevent end = nullptr);
  // Every event so far with CUDA times resolved (waits for recorded kernels)
  // and host ops' device time and launches summed from their kernels.
  absl::StatusOr<std::vector<ProfilerEvent>> Events();

 private:
  struct Pending {
    size_t index;  // into events_
    int device;
    CUevent start, end;
  };
  struct Base {
    CUevent event;
    double host_us;
  };
  const std::chrono::steady_clock::time_point start_;
  std::atomic<int64_t> next_id_{0};
  fusebox::Mutex mu_;
  std::vector<ProfilerEvent> events_ ABSL_GUARDED_BY(mu_);
  std::vector<Pending> pending_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int, Base> bases_ ABSL_GUARDED_BY(mu_);
};

// "cpu", "cuda:1" (ProfilerEvent::device) back to the device.
Device ParseDevice(const std::string& name);

// Makes `session` the one recording; fails when another is.
absl::Status Activate(std::shared_ptr<Session> session);
// Stops `session` recording, if it still is.
void Deactivate(const Session* session);

// One graph run on the host track. Finish() records it; a run that throws
// before Finish() is not recorded. Kernels recorded on this thread meanwhile
// are its children.
class HostOpRecord {
 public:
  HostOpRecord();
  ~HostOpRecord();
  HostOpRecord(const HostOpRecord&) = delete;
  HostOpRecord& operator=(const HostOpRecord&) = delete;

  bool active() const { return session_ != nullptr; }
  void Finish(std::string name, std::string device, std::vector<Shape> input_shapes, int compiles);

 private:
  std::shared_ptr<Session> session_;
  double start_us_ = 0;
  int64_t id_ = 0;
  int64_t saved_parent_ = -1;
  const Session* saved_parent_session_ = nullptr;
};

// One kernel (with its partial kernel, for split reductions): construct it
// right before the launches, Finish() right after. On CUDA it records events
// around them; a CUDA error while profiling is logged and drops the record,
// never the user's computation.
class KernelRecord {
 public:
  explicit KernelRecord(Device device);
  ~KernelRecord();
  KernelRecord(const KernelRecord&) = delete;
  KernelRecord& operator=(const KernelRecord&) = delete;

  bool active() const { return session_ != nullptr; }
  // `cost`: the launch's minimal bytes and FLOPs (KernelCost).
  void Finish(const std::string& name, std::vector<Shape> input_shapes, int launches, const KernelCost& cost);

 private:
  void Drop();
  std::shared_ptr<Session> session_;
  Device device_;
  double start_us_ = 0;
  int64_t id_ = 0;
  CUevent start_ = nullptr;
  CUevent end_ = nullptr;
};

}  // namespace fusebox::profiler
