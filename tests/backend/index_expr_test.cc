// IndexExpr's structural identity (backend/index_expr.h): equal trees are
// equal and hash alike whatever object holds them; a different constant,
// operator or variable name is a different index; and it keys hash maps,
// as lowering's memo and cache slots do.
#include <functional>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash_testing.h"
#include "backend/index_expr.h"
#include "backend/lower_util.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace fusebox::backend {

void PrintTo(const IndexExpr& e, std::ostream* os) { *os << e.ToString(); }

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

// Sums split around multiples of the divisor: GPT-2's embedding of token
// ids [B, T] broadcast over the 768 columns of its layer norm's rows indexes
// the ids by the row alone, and the position table by r % T, so no
// column-dependent division is left.
TEST(IndexExprTest, SumsSplitAroundMultiplesOfTheDivisor) {
  const IndexExpr r = IndexExpr::Var("r", 8192), j = IndexExpr::Var("j", 768);
  const IndexExpr flat = r / 1024 * 786432 + r % 1024 * 768 + j;  // [8, 1024, 768], row r, column j
  EXPECT_EQ(flat / 786432 * 1024 + flat / 768 % 1024, r);           // ids [8, 1024] read at [b, t]
  EXPECT_EQ(flat % 768, j);
  EXPECT_EQ((r % 1024 * 768 + j) / 768, r % 1024);                  // the position of row r
  EXPECT_EQ((r * 64 + j) % 32, j % 32);
  EXPECT_EQ((r * 64) % 32, IndexExpr::Const(0));
  EXPECT_EQ((r * 64) / 32, r * 2);
  EXPECT_EQ(r % 1024 % 256, r % 256);
  EXPECT_EQ(r / 7 * 7 + r % 7, r);
  EXPECT_EQ(r % 7 + r / 7 * 7, r);
  EXPECT_NE(r / 7 * 7 + r % 5, r);
  EXPECT_NE((r * 6 + j) / 4, r + j / 4) << "6 r is no multiple of 4";
}

// Every fold is exact: random compositions of sums, products, quotients and
// remainders agree with their unfolded arithmetic at every point of a grid.
TEST(IndexExprTest, FoldsKeepTheValueEverywhere) {
  const int64_t kR = 37, kJ = 29;
  const IndexExpr r = IndexExpr::Var("r", kR), j = IndexExpr::Var("j", kJ);
  std::mt19937_64 rng(test_util::Seed());
  const int64_t constants[] = {1, 2, 3, 4, 6, 8, 12, 16, 29, 32, 37, 64};
  auto pick = [&] { return constants[rng() % std::size(constants)]; };
  for (int trial = 0; trial < 400; ++trial) {
    // e and its value as a function of (r, j), built side by side.
    const bool starts_at_r = rng() % 2;
    IndexExpr e = starts_at_r ? r : j;
    std::function<int64_t(int64_t, int64_t)> value = [starts_at_r](int64_t a, int64_t b) {
      return starts_at_r ? a : b;
    };
    for (int step = 0; step < 4; ++step) {
      const int64_t c = pick();
      const int op = static_cast<int>(rng() % 4);
      const bool add_r = rng() % 2;
      auto prev = value;
      switch (op) {
        case 0:
          e = e + (add_r ? r : j) * c;
          value = [=](int64_t a, int64_t b) { return prev(a, b) + (add_r ? a : b) * c; };
          break;
        case 1:
          e = e * c;
          value = [=](int64_t a, int64_t b) { return prev(a, b) * c; };
          break;
        case 2:
          e = e / c;
          value = [=](int64_t a, int64_t b) { return prev(a, b) / c; };
          break;
        default:
          e = e % c;
          value = [=](int64_t a, int64_t b) { return prev(a, b) % c; };
          break;
      }
    }
    for (int64_t rv = 0; rv < kR; ++rv) {
      for (int64_t jv = 0; jv < kJ; ++jv) {
        const int64_t got = e.Eval([&](const char* v) { return v[0] == 'r' ? rv : jv; });
        ASSERT_EQ(got, value(rv, jv)) << e.ToString() << " at r " << rv << ", j " << jv;
      }
    }
  }
}


// Run-time sizes (dynamic shapes): Unravel divides by the kernel argument of
// an inner dim whose size is a symbol, and the index it builds has the value
// of the compile-time one at every point, for every size; nothing folds
// through a run-time divisor, so the pointwise printer never takes such an
// operand for a vector run.
TEST(IndexExprTest, RunTimeSizesDivideAtRunTime) {
  const IndexExpr i = IndexExpr::Var(IndexExpr::kUnbounded);
  for (int64_t t : {1, 2, 5, 16}) {
    const Shape shape = {3, t, t, 4};
    const Strides strides = {1000, 37, 1, 200};  // a slice of a larger buffer, permuted
    const std::vector<IndexExpr> sizes = DimSizes(shape, {-1, 0, 0, -1});
    const std::vector<IndexExpr> dynamic = Unravel(i, shape, sizes);
    const std::vector<IndexExpr> fixed = Unravel(IndexExpr::Var(Numel(shape)), shape);
    const IndexExpr a = Dot(dynamic, strides), b = Dot(fixed, strides);
    EXPECT_TRUE(a.DependsOn(SizeArgName(0)) || t == 1) << a.ToString();
    // Contiguous strides fold back to the linear index (Horner, i / s * s + i % s).
    EXPECT_EQ(DotSized(dynamic, shape, sizes, ContiguousStrides(shape)), i) << "t " << t;
    EXPECT_EQ(a.ToString().find(std::to_string(t) + " "), std::string::npos) << a.ToString();
    for (int64_t at = 0; at < Numel(shape); ++at) {
      auto var = [&](const char* v) { return std::string(v) == SizeArgName(0) ? t : at; };
      ASSERT_EQ(a.Eval(var), b.Eval(var)) << a.ToString() << " at " << at << ", t " << t;
    }
  }
  const IndexExpr s = IndexExpr::Size(1);
  EXPECT_EQ((i / 4 % s).ToString(), "i / 4 % fb_s1");
  EXPECT_EQ((i % (s * 3)).ToString(), "i % (fb_s1 * 3)");
  EXPECT_EQ(i / IndexExpr::Const(4), i / 4) << "a constant divisor folds as before";
  EXPECT_TRUE((i / s).DependsOn("i"));
  EXPECT_FALSE((i % s).IsAlignedRunOf("i", 4));
  EXPECT_FALSE((i / s).IsUniformOverAlignedRunOf("i", 4));
  EXPECT_TRUE((IndexExpr::Var("r", 8) / s).IsUniformOverAlignedRunOf("i", 4));
  EXPECT_NE(i % s, i % IndexExpr::Size(2));
}

}  // namespace
}  // namespace fusebox::backend
