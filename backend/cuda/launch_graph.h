// A compiled plan's kernel launches issued as one CUDA graph. On the H200's
// hosts one cuGraphLaunch, after updating its kernel node's arguments, costs
// the host 2.2-2.3 us against 3.1-4.1 us for the same kernel's cuLaunchKernel
// (bench/experiments/launch_floor.cu; bench/NOTES.md, session 12), and a
// plan of several kernels pays one graph launch instead of one each. The
// graph is built on the first launch; later ones set each node's function,
// dims and argument values (cuGraphExecKernelNodeSetParams) and launch it.
// Only plans of small kernels use it (each at most kGraphLaunchMaxElements):
// there the host's launch is the call's cost. Behind a kernel of tens of
// microseconds the host's launch is hidden, so a graph gains nothing (large
// kernels measured within run-to-run spread either way, session 12).
// Knob::kCudaGraphs (FUSEBOX_TUNE_CUDA_GRAPHS): 0 off (kernel by kernel), 1
// (default) plans of small kernels, 2 every plan a graph can chain; for A/B
// runs. Executable::Compile decides it with its snapshot.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "tensor/mutex.h"
#include "absl/types/span.h"
#include "backend/cuda/driver.h"
#include "backend/tuning.h"

namespace fusebox::cuda {

// False with Knob::kCudaGraphs 0 or a driver without the graph API.
bool GraphLaunchesEnabled(const backend::TuningSnapshot& tuning);
// 2^21 elements: 8 MB of f32 each way, a few microseconds of HBM time.
inline constexpr int64_t kGraphLaunchMaxElements = int64_t{1} << 21;
// The largest kernel (in elements) of a plan launched as a graph.
int64_t GraphLaunchMaxElements(const backend::TuningSnapshot& tuning);

// Process-wide counts, for tests and tools: graphs instantiated (a first
// launch, or a rebuild) and graph launches.
struct GraphLaunchCounts {
  int64_t built = 0;
  int64_t launched = 0;
};
GraphLaunchCounts GraphLaunchStats();

class LaunchGraph {
 public:
  explicit LaunchGraph(int device) : device_(device) {}
  ~LaunchGraph();
  LaunchGraph(const LaunchGraph&) = delete;
  LaunchGraph& operator=(const LaunchGraph&) = delete;

  // Launches `launches` in order as one graph on the device's default
  // stream. Returns false, having launched nothing, when graphs are off or
  // another thread is launching this graph at the moment: the caller then
  // launches them one by one. A different sequence of functions than the
  // graph holds (a plan that skipped an empty kernel) rebuilds it.
  absl::StatusOr<bool> Launch(absl::Span<const KernelLaunch> launches);

 private:
  absl::Status Rebuild(absl::Span<const KernelLaunch> launches) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Destroy() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int device_;
  fusebox::Mutex mu_;
  CUgraph graph_ ABSL_GUARDED_BY(mu_) = nullptr;
  CUgraphExec exec_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<CUgraphNode> nodes_ ABSL_GUARDED_BY(mu_);
  std::vector<CUfunction> functions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fusebox::cuda
