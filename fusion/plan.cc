#include "fusion/plan.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fusebox::fusion {

const char* KindPrefix(KernelKind kind) {
  switch (kind) {
    case KernelKind::kPointwise: return "poi";
  }
  return "?";
}

std::string Plan::ToString() const {
  std::string out;
  for (const KernelGroup& k : kernels) {
    auto percent = [](std::string* s, graph::NodeId id) { absl::StrAppend(s, "%", id); };
    absl::StrAppend(&out, "  ", k.name, " over ", ShapeToString(k.iteration_shape), ": nodes [",
                    absl::StrJoin(k.nodes, ", ", percent), "] -> stores [",
                    absl::StrJoin(k.outputs, ", ", percent), "]\n");
  }
  return out;
}

}  // namespace fusebox::fusion
