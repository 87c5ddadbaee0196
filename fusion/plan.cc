#include "fusion/plan.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fusion/row_contexts.h"

namespace fusebox::fusion {

const char* KindPrefix(KernelKind kind) {
  switch (kind) {
    case KernelKind::kPointwise: return "poi";
    case KernelKind::kReduction: return "red";
    case KernelKind::kPersistent: return "per";
    case KernelKind::kExtern: return "extern";
  }
  return "?";
}

bool DenseMatrixStrides(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if (rows <= 1 || cols <= 1) return true;
  return (col_stride == 1 && row_stride >= cols) || (row_stride == 1 && col_stride >= rows);
}

bool GemmReadsInPlace(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if ((rows > 1 && row_stride == 0) || (cols > 1 && col_stride == 0)) return false;
  return DenseMatrixStrides(rows, cols, row_stride, col_stride);
}

graph::NodeId MatmulOperandBase(const graph::Graph& g, graph::NodeId id) {
  const graph::Node& n = g.node(id);
  return n.op == graph::Op::kView ? n.inputs[0] : id;
}

bool MatmulOperandReady(const graph::Graph& g, graph::NodeId id) {
  const graph::Node& n = g.node(id);
  const graph::NodeId base_id = MatmulOperandBase(g, id);
  const graph::Node& base = g.node(base_id);
  if (base.op == graph::Op::kView || base.op == graph::Op::kConstant) return false;
  const size_t r = n.shape.size();
  // A bound input is read through its own strides; a view's strides are into
  // its base's contiguous value, so an input base must be contiguous.
  if (n.op == graph::Op::kInput) return GemmReadsInPlace(n.shape[r - 2], n.shape[r - 1], n.strides[r - 2], n.strides[r - 1]);
  if (base.op == graph::Op::kInput && !IsContiguous(base.shape, base.strides)) return false;
  if (n.op != graph::Op::kView) return true;
  return GemmReadsInPlace(n.shape[r - 2], n.shape[r - 1], n.strides[r - 2], n.strides[r - 1]);
}

bool AttentionOperandReady(const graph::Graph& g, graph::NodeId consumer, graph::NodeId id) {
  const graph::Node& n = g.node(id);
  const graph::Node& base = g.node(MatmulOperandBase(g, id));
  if (base.op == graph::Op::kView || base.op == graph::Op::kConstant) return false;
  StridedRead read{.shape = n.shape, .strides = n.strides, .offset = n.offset};
  if (n.op != graph::Op::kInput && base.op == graph::Op::kInput && !IsContiguous(base.shape, base.strides) &&
      !ComposeReads({.shape = base.shape, .strides = base.strides}, &read)) {
    return false;
  }
  const bool is_mask = g.node(consumer).inputs.size() == 4 && g.node(consumer).inputs[3] == id;
  if (is_mask || (n.op != graph::Op::kInput && n.op != graph::Op::kView)) return true;  // a stored value is contiguous
  return n.shape.back() <= 1 || read.strides.back() == 1;
}

bool ExternOperandReady(const graph::Graph& g, graph::NodeId consumer, graph::NodeId id) {
  return g.node(consumer).op == graph::Op::kAttention ? AttentionOperandReady(g, consumer, id)
                                                      : MatmulOperandReady(g, id);
}

Shape RowShape(const KernelGroup& group) {
  Shape shape = group.iteration_shape;
  for (int64_t d : group.axes) shape[d] = 1;
  return shape;
}

bool KeepsRowOnChip(const Shape& shape, const std::vector<int64_t>& axes) {
  // A 0-d shape has no row to hold (RowsInnermost holds for it: no dim is outer).
  if (shape.empty() || !RowsInnermost({shape, axes})) return false;
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
  for (const ValueGuard& v : value_guards) {
    absl::StrAppend(&out, "  assumes the values of input ", v.input, " (memory ", v.storage, " at version ", v.version,
                    ", offset ", v.offset, ")\n");
  }
  return out;
}

}  // namespace fusebox::fusion
