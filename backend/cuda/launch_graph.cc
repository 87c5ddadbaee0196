#include "backend/cuda/launch_graph.h"

#include <atomic>
#include <limits>

#include "absl/cleanup/cleanup.h"

namespace fusebox::cuda {
namespace {

std::atomic<int64_t> graphs_built{0};
std::atomic<int64_t> graph_launches{0};

}  // namespace

GraphLaunchCounts GraphLaunchStats() {
  return {.built = graphs_built.load(std::memory_order_relaxed), .launched = graph_launches.load(std::memory_order_relaxed)};
}

bool GraphLaunchesEnabled(const backend::TuningSnapshot& tuning) {
  return tuning.Get(backend::Knob::kCudaGraphs) != 0 && Driver::Get().graphs_available();
}

int64_t GraphLaunchMaxElements(const backend::TuningSnapshot& tuning) {
  return tuning.Get(backend::Knob::kCudaGraphs) == 2 ? std::numeric_limits<int64_t>::max() : kGraphLaunchMaxElements;
}

LaunchGraph::~LaunchGraph() {
  fusebox::MutexLock lock(&mu_);
  Destroy();
}

void LaunchGraph::Destroy() {
  Driver::Get().DestroyGraph(graph_, exec_);
  graph_ = nullptr;
  exec_ = nullptr;
  nodes_.clear();
  functions_.clear();
}

absl::Status LaunchGraph::Rebuild(absl::Span<const KernelLaunch> launches) {
  Destroy();
  std::vector<CUgraphNode> nodes(launches.size());
  CUgraph graph = nullptr;
  absl::StatusOr<CUgraphExec> exec =
      Driver::Get().InstantiateKernelChain(device_, launches.data(), launches.size(), &graph, nodes.data());
  if (!exec.ok()) return exec.status();
  graph_ = graph;
  exec_ = *exec;
  nodes_ = std::move(nodes);
  for (const KernelLaunch& l : launches) functions_.push_back(l.function);
  graphs_built.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::StatusOr<bool> LaunchGraph::Launch(absl::Span<const KernelLaunch> launches) {
  // The owner made this graph only where GraphLaunchesEnabled (its compile's tuning).
  if (launches.empty()) return false;
  // Never wait: a thread that finds the graph busy launches directly.
  if (!mu_.TryLock()) return false;
  absl::Cleanup unlock = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu_.Unlock(); };
  Driver& driver = Driver::Get();
  bool same = exec_ != nullptr && functions_.size() == launches.size();
  for (size_t k = 0; same && k < launches.size(); ++k) same = functions_[k] == launches[k].function;
  if (same) {
    for (size_t k = 0; k < launches.size(); ++k) {
      if (absl::Status s = driver.SetKernelNode(exec_, nodes_[k], launches[k]); !s.ok()) {
        same = false;  // an update the driver refuses: build the graph anew
        break;
      }
    }
  }
  if (!same) {
    if (absl::Status s = Rebuild(launches); !s.ok()) return s;
  }
  if (absl::Status s = driver.LaunchGraph(device_, exec_); !s.ok()) return s;
  graph_launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace fusebox::cuda
