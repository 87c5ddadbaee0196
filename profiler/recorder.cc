#include "profiler/recorder.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backend/cuda/driver.h"
#include "spdlog/spdlog.h"

namespace fusebox::profiler {
namespace {

struct Active {
  fusebox::Mutex mu;
  std::shared_ptr<Session> session ABSL_GUARDED_BY(mu);
};

Active& GetActive() {
  static Active* active = new Active();  // leaked: records may run during static destruction
  return *active;
}

std::shared_ptr<Session> ActiveSession() {
  Active& active = GetActive();
  fusebox::MutexLock lock(&active.mu);
  return active.session;
}

// The graph run open on this thread, whose kernels are its children; the
// session tells ids of a profiler that stopped meanwhile from the current one's.
thread_local int64_t current_parent = -1;
thread_local const Session* current_parent_session = nullptr;

int ThreadIndex() {
  static std::atomic<int> next{1};
  thread_local const int index = next.fetch_add(1, std::memory_order_relaxed);
  return index;
}

}  // namespace

Device ParseDevice(const std::string& name) {
  if (name.rfind("cuda:", 0) == 0) return Device::cuda(std::atoi(name.c_str() + 5));
  return Device::cpu();
}

absl::Status Activate(std::shared_ptr<Session> session) {
  Active& active = GetActive();
  fusebox::MutexLock lock(&active.mu);
  if (active.session) {
    return absl::FailedPreconditionError(
        "a fusebox::Profiler is already recording and only one records at a time; stop() or destroy it "
        "before starting another");
  }
  active.session = std::move(session);
  internal::recording.store(true, std::memory_order_relaxed);
  return absl::OkStatus();
}

void Deactivate(const Session* session) {
  Active& active = GetActive();
  fusebox::MutexLock lock(&active.mu);
  if (active.session.get() != session) return;
  active.session.reset();
  internal::recording.store(false, std::memory_order_relaxed);
}

Session::Session() : start_(std::chrono::steady_clock::now()) {}

Session::~Session() {
  if (pending_.empty() && bases_.empty()) return;  // CPU only: leave the driver unloaded
  cuda::Driver& driver = cuda::Driver::Get();
  for (const Pending& p : pending_) {
    driver.DestroyEvent(p.start);
    driver.DestroyEvent(p.end);
  }
  for (const auto& [device, base] : bases_) driver.DestroyEvent(base.event);
}

double Session::NowUs() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_).count();
}

absl::StatusOr<CUevent> Session::DeviceBase(int device) {
  fusebox::MutexLock lock(&mu_);
  if (auto it = bases_.find(device); it != bases_.end()) return it->second.event;
  cuda::Driver& driver = cuda::Driver::Get();
  // An idle device runs the event as soon as it is recorded: host and device
  // clocks agree there, to within a launch latency.
  if (absl::Status s = driver.Synchronize(device); !s.ok()) return s;
  absl::StatusOr<CUevent> event = driver.CreateEvent(device);
  if (!event.ok()) return event.status();
  if (absl::Status s = driver.RecordEvent(device, *event); !s.ok()) {
    driver.DestroyEvent(*event);
    return s;
  }
  bases_.emplace(device, Base{.event = *event, .host_us = NowUs()});
  return *event;
}

void Session::Add(ProfilerEvent event, int device, CUevent start, CUevent end) {
  fusebox::MutexLock lock(&mu_);
  if (start != nullptr) pending_.push_back({.index = events_.size(), .device = device, .start = start, .end = end});
  events_.push_back(std::move(event));
}

absl::StatusOr<std::vector<ProfilerEvent>> Session::Events() {
  fusebox::MutexLock lock(&mu_);
  absl::Status status;
  for (const Pending& p : pending_) {
    cuda::Driver& driver = cuda::Driver::Get();
    if (status.ok()) {
      const Base& base = bases_.at(p.device);
      absl::StatusOr<float> offset = driver.ElapsedMs(base.event, p.start);
      absl::StatusOr<float> duration = offset.ok() ? driver.ElapsedMs(p.start, p.end) : offset;
      if (duration.ok()) {
        events_[p.index].cuda_start_us = base.host_us + 1000.0 * *offset;
        events_[p.index].cuda_time_us = 1000.0 * *duration;
      } else {
        status = absl::Status(duration.status().code(),
                              absl::StrCat("profiler: reading the CUDA time of kernel ", events_[p.index].name,
                                           ": ", duration.status().message()));
      }
    }
    driver.DestroyEvent(p.start);
    driver.DestroyEvent(p.end);
  }
  pending_.clear();
  if (!status.ok()) return status;

  std::vector<ProfilerEvent> out = events_;
  absl::flat_hash_map<int64_t, size_t> host_ops;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].kind == ProfilerEvent::Kind::kHostOp) host_ops.emplace(out[i].id, i);
  }
  for (const ProfilerEvent& e : out) {
    if (e.kind != ProfilerEvent::Kind::kKernel) continue;
    if (auto it = host_ops.find(e.parent); it != host_ops.end()) {
      out[it->second].cuda_time_us += e.cuda_time_us;
      out[it->second].launches += e.launches;
    }
  }
  return out;
}

HostOpRecord::HostOpRecord() {
  if (!Recording()) return;
  session_ = ActiveSession();
  if (!session_) return;
  id_ = session_->NextId();
  saved_parent_ = std::exchange(current_parent, id_);
  saved_parent_session_ = std::exchange(current_parent_session, session_.get());
  start_us_ = session_->NowUs();
}

HostOpRecord::~HostOpRecord() {
  if (!session_) return;
  current_parent = saved_parent_;
  current_parent_session = saved_parent_session_;
}

void HostOpRecord::Finish(std::string name, std::string device, std::vector<Shape> input_shapes, int compiles) {
  if (!session_) return;
  ProfilerEvent event;
  event.kind = ProfilerEvent::Kind::kHostOp;
  event.name = std::move(name);
  event.device = std::move(device);
  event.input_shapes = std::move(input_shapes);
  event.id = id_;
  event.thread = ThreadIndex();
  event.cpu_start_us = start_us_;
  event.cpu_time_us = session_->NowUs() - start_us_;
  event.compiles = compiles;
  session_->Add(std::move(event));
}

KernelRecord::KernelRecord(Device device) : device_(device) {
  if (!Recording()) return;
  session_ = ActiveSession();
  if (!session_) return;
  if (device.is_cuda()) {
    cuda::Driver& driver = cuda::Driver::Get();
    absl::StatusOr<CUevent> base = session_->DeviceBase(device.index);
    absl::StatusOr<CUevent> start = base.ok() ? driver.CreateEvent(device.index) : base;
    if (start.ok()) start_ = *start;
    absl::StatusOr<CUevent> end = start.ok() ? driver.CreateEvent(device.index) : start;
    if (end.ok()) end_ = *end;
    absl::Status s = end.ok() ? driver.RecordEvent(device.index, start_) : end.status();
    if (!s.ok()) {
      spdlog::warn("profiler: a kernel on {} is not recorded: {}", device.str(), s.ToString());
      Drop();
      return;
    }
  }
  id_ = session_->NextId();
  start_us_ = session_->NowUs();
}

KernelRecord::~KernelRecord() {
  if (session_) Drop();
}

void KernelRecord::Drop() {
  if (start_ != nullptr || end_ != nullptr) {
    cuda::Driver::Get().DestroyEvent(start_);
    cuda::Driver::Get().DestroyEvent(end_);
    start_ = end_ = nullptr;
  }
  session_.reset();
}

void KernelRecord::Finish(const std::string& name, std::vector<Shape> input_shapes, int launches,
                          const KernelCost& cost) {
  if (!session_) return;
  const double end_us = session_->NowUs();
  if (device_.is_cuda()) {
    if (absl::Status s = cuda::Driver::Get().RecordEvent(device_.index, end_); !s.ok()) {
      spdlog::warn("profiler: kernel {} is not recorded: {}", name, s.ToString());
      Drop();
      return;
    }
  }
  ProfilerEvent event;
  event.kind = ProfilerEvent::Kind::kKernel;
  event.name = name;
  event.device = device_.str();
  event.input_shapes = std::move(input_shapes);
  event.id = id_;
  event.parent = current_parent_session == session_.get() ? current_parent : -1;
  event.thread = ThreadIndex();
  event.cpu_start_us = start_us_;
  event.cpu_time_us = end_us - start_us_;
  event.launches = launches;
  event.bytes = cost.bytes;
  event.flops = cost.flops;
  event.math = cost.math;
  session_->Add(std::move(event), device_.index, start_, end_);
  start_ = end_ = nullptr;  // the session owns them now
  session_.reset();
}

}  // namespace fusebox::profiler
