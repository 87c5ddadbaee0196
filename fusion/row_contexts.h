// The contexts a value is read in inside a kernel, and the rules for reading
// a view of a value of a reduction's rows there. Fusion (fuse_kernels.cc)
// builds a reduction group only where these rules can read its values, and
// the lowering (backend/lower_reduction.cc) lowers each view by the same
// rules, so the two cannot drift apart.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "graph/graph.h"
#include "tensor/shape.h"

namespace fusebox::fusion {

// Where a value is evaluated inside a kernel:
//  kFull: at one element of the kernel's iteration shape (a reduction's
//    reduced input shape; a pointwise kernel's root index);
//  kRow: once per row, at the row's position in the row shape (the reduced
//    dims of size 1, keepdim=true);
//  kSqueezedRow: once per row, in the row shape without its reduced dims
//    (keepdim=false);
//  kLinear: at an arbitrary position of the value's own shape, reached
//    through a view or data movement. Only the current row is at hand, so a
//    value that depends on the group's reductions cannot be read there.
enum class Ctx { kFull, kRow, kSqueezedRow, kLinear };

// The rows of a reduction kernel: its reduced input shape and its reduced
// dims, ascending.
struct Rows {
  const Shape& shape;
  const std::vector<int64_t>& axes;
};

bool IsReducedDim(const Rows& rows, int64_t d);
// The row shape: the reduced dims set to 1 (keepdim=true).
Shape RowShape(const Rows& rows);
// The row shape with the reduced dims dropped: what keepdim=false gives.
Shape SqueezedRowShape(const Rows& rows);
// Whether the reduced dims include the innermost one of size > 1: rows a warp
// or block reads along (ReductionAxis::kInner).
bool RowsInnermost(const Rows& rows);

// A view that reads, at every element of the reduced shape, the value of its
// own row: reduced dims have stride 0, the others walk the row shape densely.
bool IsRowBroadcast(const graph::Node& view, const Rows& rows);
// A view that reads its base as it is.
bool IsIdentityView(const graph::Node& view, const graph::Node& base);
// keepdim=false: a row-shaped base viewed densely without its size-1 reduced dims.
bool IsSqueezedRowView(const graph::Node& view, const graph::Node& base, const Rows& rows);

// The context in which a view read in `ctx` reads its base: kLinear (at the
// position its strides give) where the base does not depend on the group's
// reductions; kRow where it does and the view reads it at the row's own
// position (a row broadcast in kFull, an identity view in kRow, the
// keepdim=false view in kSqueezedRow); nullopt where such a base cannot be
// read (any other view, or any view in kLinear): fusion refuses the group.
std::optional<Ctx> ViewBaseContext(const graph::Node& view, const graph::Node& base, bool base_is_row_value,
                                   Ctx ctx, const Rows& rows);

}  // namespace fusebox::fusion
