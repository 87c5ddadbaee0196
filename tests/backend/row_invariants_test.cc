// HoistRowInvariant (backend/row_invariants.h): which statements of a row
// loop are printed once before it. Invariant: loads at the row's own index,
// their index checks, constants and computes over them or over an earlier
// pass's result. Per element: anything indexed by j (or e, k, i), a gather
// whose index is per element, a held (cache_slot) load, a store, and what
// reads them or the pass's own accumulators.
#include "backend/row_invariants.h"

#include "gtest/gtest.h"

namespace fusebox::backend {
namespace {

const IndexExpr kR = IndexExpr::Var("r", 64), kJ = IndexExpr::Var("j", 768);

Stmt Load(int result, IndexExpr index) {
  return {.kind = StmtKind::kLoad, .result = result, .dtype = DType::kInt64, .buffer = 0, .index = std::move(index)};
}
Stmt Compute(int result, std::vector<int> args) {
  return {.kind = StmtKind::kCompute, .result = result, .dtype = DType::kFloat32, .op = graph::Op::kAdd,
          .args = std::move(args)};
}

std::vector<int> Results(const std::vector<Stmt>& block) {
  std::vector<int> out;
  for (const Stmt& s : block) out.push_back(s.result);
  return out;
}

TEST(RowInvariantsTest, TheGatheredRowsIndexMovesTheRowStays) {
  std::vector<Stmt> body = {
      Load(0, kR),  // the token id of row r
      {.kind = StmtKind::kIndexCheck, .result = 1, .dtype = DType::kInt64, .args = {0}, .hi = 50304},
      Load(2, IndexExpr::Temp(1, 50304) * 768 + kJ),  // the gathered row: per element
      {.kind = StmtKind::kConstant, .result = 3, .dtype = DType::kFloat32, .constant = 768},
      Compute(4, {9, 3}),  // an earlier pass's sum (t9) over n: once
      Compute(5, {2, 4}),  // reads the gathered element: per element
      {.kind = StmtKind::kStore, .dtype = DType::kFloat32, .args = {5}, .buffer = 1, .index = kR * 768 + kJ},
  };
  std::vector<Stmt> once;
  HoistRowInvariant(&body, &once, {});
  EXPECT_EQ(Results(once), (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(Results(body), (std::vector<int>{2, 5, -1}));  // in order, the store last
}

TEST(RowInvariantsTest, ThePassesOwnAccumulatorsAndHeldLoadsVaryAlongTheRow) {
  Stmt held = Load(1, kR);
  held.cache_slot = 0;  // a value held per element in registers
  std::vector<Stmt> body = {
      Compute(0, {7, 7}),  // t7: this pass's accumulator
      held,
      Compute(2, {1, 1}),
      Load(3, kR + IndexExpr::Var("e", 4)),  // a staged group's element
      Compute(4, {8, 8}),                    // t8: another pass's result
  };
  Stmt masked = Load(5, kR);
  masked.mask = 0;  // masked by a per-element value
  body.push_back(masked);
  std::vector<Stmt> once;
  Accumulator acc{.temp = 7, .op = graph::Op::kSum, .dtype = DType::kFloat32, .value = 2};
  HoistRowInvariant(&body, &once, AccumulatorTemps({acc}));
  EXPECT_EQ(Results(once), (std::vector<int>{4}));
  EXPECT_EQ(Results(body), (std::vector<int>{0, 1, 2, 3, 5}));
}

}  // namespace
}  // namespace fusebox::backend
