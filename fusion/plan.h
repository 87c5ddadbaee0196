// fusion::Plan: what the backends compile and the runtime executes. Kernels
// run in order; each reads graph inputs (and, later, buffers of earlier
// kernels) and stores its outputs into fresh contiguous buffers.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace fusebox::fusion {

enum class KernelKind { kPointwise };

struct KernelGroup {
  std::string name;                   // "poi_fused_add_mul_pow_tanh_0" (name_kernels.h)
  KernelKind kind = KernelKind::kPointwise;
  Shape iteration_shape;              // one thread (CUDA) / iteration (CPU) per element
  std::vector<graph::NodeId> outputs; // stored, in order
  std::vector<graph::NodeId> nodes;   // every compute node the kernel evaluates, topological
};

struct Plan {
  graph::Graph graph;
  std::vector<KernelGroup> kernels;
  std::string ToString() const;
};

// The kernel-name prefix of a kind: "poi".
const char* KindPrefix(KernelKind kind);

}  // namespace fusebox::fusion
