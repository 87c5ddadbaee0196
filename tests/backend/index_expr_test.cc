// IndexExpr's structural identity (backend/index_expr.h): equal trees are
// equal and hash alike whatever object holds them; a different constant,
// operator or variable name is a different index; and it keys hash maps,
// as lowering's memo and cache slots do.
#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash_testing.h"
#include "backend/index_expr.h"
#include "gtest/gtest.h"

namespace fusebox::backend {
namespace {

IndexExpr RowMajor(int64_t rows, int64_t cols) {
  const IndexExpr r = IndexExpr::Var("r", rows), j = IndexExpr::Var("j", cols);
  return r * cols + j;
}

TEST(IndexExprTest, EqualTreesAreEqualAndHashAlike) {
  EXPECT_EQ(RowMajor(8, 1023), RowMajor(8, 1023));  // built twice: two objects
  EXPECT_NE(RowMajor(8, 1023), RowMajor(8, 1024));  // another stride
  EXPECT_NE(IndexExpr::Var("r", 8) + IndexExpr::Var("j", 8), IndexExpr::Var("j", 8) + IndexExpr::Var("r", 8))
      << "operand order is part of the tree (lowering builds one order)";
  EXPECT_NE(IndexExpr::Var("r", 100) / 4, IndexExpr::Var("r", 100) % 4);
  EXPECT_NE(IndexExpr::Var("i", 100), IndexExpr::Var("j", 100));
  EXPECT_EQ(IndexExpr::Const(7), IndexExpr::Const(3) + IndexExpr::Const(4));  // folded
  EXPECT_NE(IndexExpr::Temp(3, 10), IndexExpr::Temp(4, 10));
  EXPECT_TRUE(absl::VerifyTypeImplementsAbslHashCorrectly({
      RowMajor(8, 1023), RowMajor(8, 1024), IndexExpr::Var("i", 100), IndexExpr::Var("i", 100) % 4,
      IndexExpr::Var("i", 100) / 4, IndexExpr::Const(0), IndexExpr::Temp(3, 10)}));
}

TEST(IndexExprTest, KeysAHashMap) {
  absl::flat_hash_map<std::pair<int, IndexExpr>, int> slots;
  slots.emplace(std::make_pair(0, RowMajor(4, 33)), 0);
  slots.emplace(std::make_pair(1, RowMajor(4, 33)), 1);
  EXPECT_FALSE(slots.emplace(std::make_pair(0, RowMajor(4, 33)), 2).second) << "the same load finds its slot";
  EXPECT_EQ(slots.size(), 2u);
}

}  // namespace
}  // namespace fusebox::backend
