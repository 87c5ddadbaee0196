#include "fusion/order_kernels.h"

#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tensor/error.h"

namespace fusebox::fusion {

Plan OrderKernels(Plan plan) {
  const size_t n = plan.kernels.size();
  absl::flat_hash_map<graph::NodeId, size_t> producer;  // stored value -> its kernel
  for (size_t k = 0; k < n; ++k) {
    for (graph::NodeId out : plan.kernels[k].outputs) producer.emplace(out, k);
  }
  // Kahn's algorithm, always taking the first kernel in fusion's order whose
  // loads are all stored: a plan already in order stays as it is.
  std::vector<bool> placed(n, false);
  std::vector<size_t> order;
  order.reserve(n);
  while (order.size() < n) {
    bool progress = false;
    for (size_t k = 0; k < n && !progress; ++k) {
      if (placed[k]) continue;
      bool ready = true;
      for (graph::NodeId in : plan.kernels[k].buffer_inputs) {
        auto it = producer.find(in);
        if (it != producer.end() && it->second != k && !placed[it->second]) ready = false;
      }
      if (!ready) continue;
      placed[k] = true;
      order.push_back(k);
      progress = true;
    }
    FUSEBOX_CHECK(progress, "the plan's kernels load each other's values in a cycle:\n", plan.ToString());
  }
  std::vector<KernelGroup> ordered;
  ordered.reserve(n);
  for (size_t k : order) ordered.push_back(std::move(plan.kernels[k]));
  plan.kernels = std::move(ordered);
  return plan;
}

}  // namespace fusebox::fusion
