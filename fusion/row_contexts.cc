#include "fusion/row_contexts.h"

#include <algorithm>

namespace fusebox::fusion {

bool IsReducedDim(const Rows& rows, int64_t d) { return std::binary_search(rows.axes.begin(), rows.axes.end(), d); }

Shape RowShape(const Rows& rows) {
  Shape row = rows.shape;
  for (int64_t d : rows.axes) row[d] = 1;
  return row;
}

Shape SqueezedRowShape(const Rows& rows) {
  Shape out;
  for (int64_t d = 0; d < static_cast<int64_t>(rows.shape.size()); ++d) {
    if (!IsReducedDim(rows, d)) out.push_back(rows.shape[d]);
  }
  return out;
}

bool RowsInnermost(const Rows& rows) {
  int64_t inner = static_cast<int64_t>(rows.shape.size()) - 1;
  while (inner > 0 && rows.shape[inner] == 1) --inner;
  return inner < 0 || IsReducedDim(rows, inner);
}

bool IsRowBroadcast(const graph::Node& view, const Rows& rows) {
  if (view.shape != rows.shape || view.offset != 0) return false;
  const Shape row = RowShape(rows);
  const Strides dense = ContiguousStrides(row);
  for (size_t d = 0; d < row.size(); ++d) {
    const bool reduced = IsReducedDim(rows, static_cast<int64_t>(d));
    if (reduced ? view.strides[d] != 0 : (row[d] != 1 && view.strides[d] != dense[d])) return false;
  }
  return true;
}

bool IsIdentityView(const graph::Node& view, const graph::Node& base) {
  return view.shape == base.shape && view.offset == 0 && IsContiguous(view.shape, view.strides);
}

bool IsSqueezedRowView(const graph::Node& view, const graph::Node& base, const Rows& rows) {
  return base.shape == RowShape(rows) && view.offset == 0 && IsContiguous(view.shape, view.strides);
}

std::optional<Ctx> ViewBaseContext(const graph::Node& view, const graph::Node& base, bool base_is_row_value,
                                   Ctx ctx, const Rows& rows) {
  if (!base_is_row_value) return Ctx::kLinear;
  switch (ctx) {
    case Ctx::kFull: return IsRowBroadcast(view, rows) ? std::optional(Ctx::kRow) : std::nullopt;
    case Ctx::kRow: return IsIdentityView(view, base) ? std::optional(Ctx::kRow) : std::nullopt;
    case Ctx::kSqueezedRow: return IsSqueezedRowView(view, base, rows) ? std::optional(Ctx::kRow) : std::nullopt;
    case Ctx::kLinear: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace fusebox::fusion
