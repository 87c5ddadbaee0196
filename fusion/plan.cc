#include "fusion/plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fusebox::fusion {

const char* KindPrefix(KernelKind kind) {
  switch (kind) {
    case KernelKind::kPointwise: return "poi";
    case KernelKind::kReduction: return "red";
    case KernelKind::kPersistent: return "per";
  }
  return "?";
}

Shape RowShape(const KernelGroup& group) {
  Shape shape = group.iteration_shape;
  for (int64_t d : group.axes) shape[d] = 1;
  return shape;
}

bool KeepsRowOnChip(const Shape& shape, const std::vector<int64_t>& axes) {
  int64_t inner = static_cast<int64_t>(shape.size()) - 1;
  while (inner > 0 && shape[inner] == 1) --inner;
  if (inner < 0 || std::find(axes.begin(), axes.end(), inner) == axes.end()) return false;
  int64_t row = 1;
  for (int64_t d : axes) row *= shape[d];
  return row > 0 && row <= kPersistentRowLimit;
}

std::string Plan::ToString() const {
  std::string out;
  for (const KernelGroup& k : kernels) {
    auto percent = [](std::string* s, graph::NodeId id) { absl::StrAppend(s, "%", id); };
    absl::StrAppend(&out, "  ", k.name, " over ", ShapeToString(k.iteration_shape), ": nodes [",
                    absl::StrJoin(k.nodes, ", ", percent), "] -> stores [",
                    absl::StrJoin(k.outputs, ", ", percent), "]",
                    k.buffer_inputs.empty() ? "" : absl::StrCat(" loads [", absl::StrJoin(k.buffer_inputs, ", ", percent), "]"),
                    k.axes.empty() ? "" : absl::StrCat(" reducing axes ", ShapeToString(k.axes)), "\n");
  }
  for (const std::string& note : notes) absl::StrAppend(&out, "  note: ", note, "\n");
  for (const std::string& s : DescribeSymbols(symbols)) absl::StrAppend(&out, "  run-time size: ", s, "\n");
  return out;
}

}  // namespace fusebox::fusion
