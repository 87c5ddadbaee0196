// Lowering of the data-movement ops (graph OpKind::kMove: index_select,
// gather, cat) into indirect and masked loads. Kept apart from the lowering
// core (lower_core.h) that calls it, which evaluates their operands at the
// positions computed here.
#pragma once

#include <functional>

#include "backend/kernel_ir.h"
#include "graph/graph.h"

namespace fusebox::backend {

struct MoveLowering {
  // Evaluates node `id` at contiguous position `linear` of its own shape,
  // under the current mask; returns the temporary.
  std::function<int(graph::NodeId id, const IndexExpr& linear)> eval;
  // Node `id`'s dims' sizes as index math (run-time ones: DimSizes).
  std::function<std::vector<IndexExpr>(graph::NodeId id)> sizes;
  // Appends a statement to the body; returns its temporary.
  std::function<int(Stmt s)> emit;
  // The mask (a bool temporary, -1: none) the loads are emitted under; cat
  // sets it while its operands are evaluated.
  int* mask = nullptr;
  Kernel* kernel = nullptr;
};

// Node `id` (a kMove node) at contiguous position `pos` of its shape.
//  index_select / gather: the index is evaluated, checked against the size
//  of `dim` (StmtKind::kIndexCheck) and addresses x as an IndexExpr::Temp.
//  cat: each operand with elements is evaluated under the mask of its range
//  along `dim` (StmtKind::kInRange), and `where` picks the one in range.
int LowerMove(const graph::Graph& g, graph::NodeId id, const IndexExpr& pos, const MoveLowering& m);

}  // namespace fusebox::backend
