// Invariants of the op table (graph/ops.def): every other layer trusts its
// rows, and the op tests iterate it, so a malformed row must fail here first.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <string_view>

#include "gmock/gmock.h"
#include "graph/op.h"
#include "gtest/gtest.h"

namespace fusebox::graph {
namespace {

using ::testing::MatchesRegex;

constexpr int kNumOps = 0
#define OP(Enum, name, arity, kind, rule, cuda, cpp, ref) +1
#define REDUCE_OP(Enum, name, rule, cuda, cpp, ref, identity) +1
#include "graph/ops.def"
#undef OP
#undef REDUCE_OP
    ;

// The highest $k placeholder an expression uses, or -1.
int MaxPlaceholder(std::string_view expr, int* uses_dtype_fn) {
  int max = -1;
  *uses_dtype_fn = 0;
  for (size_t i = 0; i + 1 < expr.size(); ++i) {
    if (expr[i] != '$') continue;
    const char c = expr[i + 1];
    EXPECT_TRUE(c >= '0' && c <= '3') << "bad placeholder $" << c << " in " << expr;
    if (c == '3') {
      ++*uses_dtype_fn;
    } else {
      max = std::max(max, c - '0');
    }
  }
  return max;
}

TEST(OpTableTest, RowsAreInEnumOrderAndCountMatches) {
  ASSERT_EQ(static_cast<int>(AllOps().size()), kNumOps);
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& row = AllOps()[i];
    EXPECT_EQ(static_cast<int>(row.op), i) << row.name;
    EXPECT_EQ(&Info(row.op), &row) << row.name;
    EXPECT_STREQ(OpName(row.op), row.name);
  }
}

TEST(OpTableTest, NamesAreUniqueExceptTheTwoGeluRows) {
  std::multiset<std::string> names;
  for (const OpInfo& row : AllOps()) names.insert(row.name);
  for (const std::string& name : std::set<std::string>(names.begin(), names.end())) {
    EXPECT_EQ(names.count(name), name == "gelu" ? 2u : 1u) << name;
  }
  EXPECT_STREQ(Info(Op::kGelu).name, "gelu");
  EXPECT_STREQ(Info(Op::kGeluTanh).name, "gelu");
}

// Extern ops are library calls: no expression to print, no scalar reference.
TEST(OpTableTest, ExternOpsHaveNoExpressions) {
  EXPECT_EQ(Info(Op::kMatmul).kind, OpKind::kExtern);
  EXPECT_EQ(Info(Op::kMatmul).arity, 2);
  for (const OpInfo& row : AllOps()) {
    if (row.kind != OpKind::kExtern) continue;
    EXPECT_STREQ(row.cuda_expr, "");
    EXPECT_STREQ(row.cpp_expr, "");
    EXPECT_EQ(row.reference, nullptr);
  }
}

TEST(OpTableTest, NamesAreKernelNameFragments) {
  for (const OpInfo& row : AllOps()) EXPECT_THAT(row.name, MatchesRegex("[a-z][a-z0-9_]*"));
}

TEST(OpTableTest, SourcesAndViewsHaveNoExpressionsOrReference) {
  EXPECT_EQ(Info(Op::kInput).kind, OpKind::kSource);
  EXPECT_EQ(Info(Op::kConstant).kind, OpKind::kSource);
  EXPECT_EQ(Info(Op::kView).kind, OpKind::kView);
  for (const OpInfo& row : AllOps()) {
    if (row.kind == OpKind::kPointwise || row.kind == OpKind::kReduction || row.kind == OpKind::kExtern) continue;
    SCOPED_TRACE(row.name);
    if (row.kind == OpKind::kMove) {  // (x, index), or cat's any number
      EXPECT_TRUE(row.arity == 2 || row.arity == -1);
    } else {
      EXPECT_EQ(row.arity, row.kind == OpKind::kView ? 1 : 0);
    }
    EXPECT_EQ(row.dtype_rule, DTypeRule::kNone);
    EXPECT_STREQ(row.cuda_expr, "");
    EXPECT_STREQ(row.cpp_expr, "");
    EXPECT_EQ(row.reference, nullptr);
  }
}

TEST(OpTableTest, ReductionRowsFoldTwoValuesAndHaveAnIdentity) {
  int reductions = 0;
  for (const OpInfo& row : AllOps()) {
    if (row.kind != OpKind::kReduction) continue;
    SCOPED_TRACE(row.name);
    ++reductions;
    if (row.dtype_rule == DTypeRule::kReduceIndex) {  // argmax/argmin compare (value, index) pairs
      int uses = 0;
      EXPECT_EQ(MaxPlaceholder(row.cuda_expr, &uses), 2);  // $0..$2, and $3 counted apart
      EXPECT_EQ(uses, 1);  // $3: the accumulator's index
      continue;
    }
    EXPECT_EQ(row.arity, 1);
    int uses_dtype_fn = 0;
    EXPECT_EQ(MaxPlaceholder(row.cuda_expr, &uses_dtype_fn), 1);
    EXPECT_EQ(MaxPlaceholder(row.cpp_expr, &uses_dtype_fn), 1);
    ASSERT_NE(row.reference, nullptr);
    // Folding the identity in changes nothing.
    for (double v : {-2.5, 0.0, 3.0}) EXPECT_EQ(row.reference(row.identity, v, 0), v);
  }
  EXPECT_EQ(reductions, 6);
}

TEST(OpTableTest, PointwiseRowsHaveBothExpressionsAndAReference) {
  int pointwise = 0;
  for (const OpInfo& row : AllOps()) {
    if (row.kind != OpKind::kPointwise) continue;
    SCOPED_TRACE(row.name);
    ++pointwise;
    EXPECT_NE(row.dtype_rule, DTypeRule::kNone);
    ASSERT_NE(row.cuda_expr, nullptr);
    ASSERT_NE(row.cpp_expr, nullptr);
    EXPECT_STRNE(row.cuda_expr, "");
    EXPECT_STRNE(row.cpp_expr, "");
    EXPECT_NE(row.reference, nullptr);
  }
  EXPECT_GE(pointwise, 20);
}

TEST(OpTableTest, ArityMatchesPlaceholdersInBothExpressions) {
  for (const OpInfo& row : AllOps()) {
    if (row.kind != OpKind::kPointwise) continue;
    SCOPED_TRACE(row.name);
    EXPECT_GE(row.arity, 1);
    EXPECT_LE(row.arity, 3);  // the reference takes three arguments
    for (const char* expr : {row.cuda_expr, row.cpp_expr}) {
      int dtype_fn = 0;
      EXPECT_EQ(MaxPlaceholder(expr, &dtype_fn), row.arity - 1) << expr;
      // $3 (the conversion to the result dtype) only makes sense for kCast.
      EXPECT_EQ(dtype_fn > 0, row.dtype_rule == DTypeRule::kCast) << expr;
    }
  }
}

// rand and randn take (position, seed, offset).
TEST(OpTableTest, WhereAndRandomOpsAreTheOnlyTernaryOpsAndCastTheOnlyCastRule) {
  for (const OpInfo& row : AllOps()) {
    EXPECT_EQ(row.arity == 3, row.op == Op::kWhere || row.dtype_rule == DTypeRule::kRandom) << row.name;
    EXPECT_EQ(row.dtype_rule == DTypeRule::kWhere, row.op == Op::kWhere) << row.name;
    EXPECT_EQ(row.dtype_rule == DTypeRule::kCast, row.op == Op::kCast) << row.name;
  }
}

TEST(OpTableTest, CompareReferencesReturnZeroOrOne) {
  const double xs[] = {-2.5, -1, 0, 0.5, 1, 3, NAN, INFINITY};
  for (const OpInfo& row : AllOps()) {
    if (row.kind != OpKind::kPointwise || row.dtype_rule != DTypeRule::kCompare) continue;
    for (double a : xs) {
      for (double b : xs) {
        const double r = row.reference(a, b, 0);
        EXPECT_TRUE(r == 0.0 || r == 1.0) << row.name << "(" << a << ", " << b << ") = " << r;
      }
    }
  }
  EXPECT_EQ(Info(Op::kLt).reference(1, 2, 0), 1.0);
  EXPECT_EQ(Info(Op::kGe).reference(1, 2, 0), 0.0);
  EXPECT_EQ(Info(Op::kNe).reference(NAN, NAN, 0), 1.0);
  EXPECT_EQ(Info(Op::kEq).reference(NAN, NAN, 0), 0.0);
}

TEST(OpTableTest, ReferencesSpotCheck) {
  EXPECT_EQ(Info(Op::kSub).reference(5, 3, 0), 2);
  EXPECT_EQ(Info(Op::kDiv).reference(1, 4, 0), 0.25);
  EXPECT_EQ(Info(Op::kPow).reference(2, 10, 0), 1024);
  EXPECT_EQ(Info(Op::kWhere).reference(0, 1, 2), 2);
  EXPECT_EQ(Info(Op::kWhere).reference(1, 1, 2), 1);
  EXPECT_EQ(Info(Op::kRelu).reference(-3, 0, 0), 0);
  EXPECT_DOUBLE_EQ(Info(Op::kSigmoid).reference(0, 0, 0), 0.5);
  EXPECT_DOUBLE_EQ(Info(Op::kRsqrt).reference(4, 0, 0), 0.5);
  EXPECT_TRUE(std::isnan(Info(Op::kMaximum).reference(NAN, 1, 0)));
  EXPECT_TRUE(std::isnan(Info(Op::kMinimum).reference(1, NAN, 0)));
  // gelu(1) = 0.5 * (1 + erf(1/sqrt 2)) = 0.8413447460685429.
  EXPECT_NEAR(Info(Op::kGelu).reference(1, 0, 0), 0.8413447460685429, 1e-15);
}

TEST(OpTableTest, TheTwoGeluRowsAgreeWithinTheTanhApproximationError) {
  for (double x = -6; x <= 6; x += 0.125) {
    EXPECT_NEAR(Info(Op::kGelu).reference(x, 0, 0), Info(Op::kGeluTanh).reference(x, 0, 0), 1e-3) << x;
  }
}

}  // namespace
}  // namespace fusebox::graph
