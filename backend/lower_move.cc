#include "backend/lower_move.h"

#include <vector>

#include "backend/lower_util.h"
#include "tensor/error.h"

namespace fusebox::backend {
namespace {

using graph::Node;
using graph::Op;

int LowerIndexed(const graph::Graph& g, graph::NodeId id, const IndexExpr& pos, const MoveLowering& m) {
  const Node& n = g.node(id);
  const Node& x = g.node(n.inputs[0]);
  const int64_t size = x.shape[n.dim];
  FUSEBOX_CHECK(size > 0, graph::OpName(n.op), " indexes an empty dim (the frontend rejects it)");
  const Shape& index_shape = g.node(n.inputs[1]).shape;
  std::vector<IndexExpr> at = Unravel(pos, n.shape, m.sizes(id));
  // gather's index has the result's shape; index_select's (embedding's)
  // dims stand in the result in place of x's `dim`.
  const int64_t index_dims = n.op == Op::kGather ? 1 : static_cast<int64_t>(index_shape.size());
  const IndexExpr index_at =
      n.op == Op::kGather
          ? pos
          : DotSized(std::vector<IndexExpr>(at.begin() + n.dim, at.begin() + n.dim + index_dims), index_shape,
                     m.sizes(n.inputs[1]), ContiguousStrides(index_shape));
  const int raw = m.eval(n.inputs[1], index_at);
  const int checked = m.emit({.kind = StmtKind::kIndexCheck, .dtype = DType::kInt64, .op = n.op, .args = {raw},
                              .hi = size, .dim = n.dim});
  m.kernel->checks_indices = true;
  at.erase(at.begin() + n.dim, at.begin() + n.dim + index_dims);
  at.insert(at.begin() + n.dim, IndexExpr::Temp(checked, size));
  return m.eval(n.inputs[0], DotSized(at, x.shape, m.sizes(n.inputs[0]), ContiguousStrides(x.shape)));
}

int LowerCat(const graph::Graph& g, graph::NodeId id, const IndexExpr& pos, const MoveLowering& m) {
  const Node& n = g.node(id);
  const std::vector<IndexExpr> at = Unravel(pos, n.shape, m.sizes(id));
  const IndexExpr along = at[n.dim];
  int nonempty = 0;
  for (graph::NodeId in : n.inputs) nonempty += g.node(in).shape[n.dim] > 0 ? 1 : 0;
  const int outer = *m.mask;
  int result = -1;
  int64_t end = n.shape[n.dim];
  // From the last operand back: the chain of `where`s ends in the first.
  for (size_t k = n.inputs.size(); k-- > 0;) {
    const Node& x = g.node(n.inputs[k]);
    const int64_t size = x.shape[n.dim], begin = end - size;
    end = begin;
    if (size == 0) continue;
    int in_range = -1;
    if (nonempty > 1) {
      Stmt range{.kind = StmtKind::kInRange, .dtype = DType::kBool, .index = along, .lo = begin, .hi = begin + size};
      if (outer >= 0) range.args = {outer};
      in_range = m.emit(std::move(range));
      *m.mask = in_range;
    }
    // Out of range the position is negative or past the operand: masked.
    std::vector<IndexExpr> x_at = at;
    x_at[n.dim] = along + IndexExpr::Const(-begin);
    const int value = m.eval(n.inputs[k], DotSized(x_at, x.shape, m.sizes(n.inputs[k]), ContiguousStrides(x.shape)));
    *m.mask = outer;
    result = result < 0 ? value
                        : m.emit({.kind = StmtKind::kCompute, .dtype = n.dtype, .op = Op::kWhere,
                                  .args = {in_range, value, result}});
  }
  FUSEBOX_CHECK(result >= 0, "cat with no elements along its dim has no kernel");
  return result;
}

}  // namespace

int LowerMove(const graph::Graph& g, graph::NodeId id, const IndexExpr& pos, const MoveLowering& m) {
  return g.node(id).op == Op::kCat ? LowerCat(g, id, pos, m) : LowerIndexed(g, id, pos, m);
}

}  // namespace fusebox::backend
