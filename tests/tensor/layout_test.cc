// tensor/layout.h against PyTorch's answers, worked through its
// TensorIterator / infer_dense_strides code by hand for each case (noted).
#include "tensor/layout.h"

#include "gtest/gtest.h"

namespace fusebox {
namespace {

Strides Elementwise(const Shape& shape, const std::vector<std::pair<Shape, Strides>>& ops) {
  std::vector<StridedOperand> operands;
  for (const auto& [s, st] : ops) operands.push_back({&s, &st});
  return ElementwiseStrides(shape, operands);
}

TEST(LayoutTest, SameShapeOperandsTakeTheFastSetup) {
  // Contiguous -> contiguous; one dense permuted operand -> its strides.
  EXPECT_EQ(Elementwise({5, 7}, {{{5, 7}, {7, 1}}}), Strides({7, 1}));
  EXPECT_EQ(Elementwise({7, 5}, {{{7, 5}, {1, 7}}}), Strides({1, 7}));             // x.t()
  EXPECT_EQ(Elementwise({4, 2, 3}, {{{4, 2, 3}, {1, 12, 4}}}), Strides({1, 12, 4}));  // permute(2, 0, 1)
  EXPECT_EQ(Elementwise({7, 5}, {{{7, 5}, {1, 7}}, {{7, 5}, {1, 7}}}), Strides({1, 7}));  // both transposed
  // An empty tensor is contiguous to PyTorch, whatever its strides.
  EXPECT_EQ(Elementwise({0, 3}, {{{0, 3}, {1, 1}}}), Strides({3, 1}));
  // A dense operand's size-1 strides are copied as they are.
  EXPECT_EQ(Elementwise({3, 1, 4}, {{{3, 1, 4}, {1, 3, 3}}}), Strides({1, 3, 3}));
  // Channels-last (N, C, H, W) = (2, 3, 4, 5) stays channels-last.
  EXPECT_EQ(Elementwise({2, 3, 4, 5}, {{{2, 3, 4, 5}, {60, 1, 15, 3}}}), Strides({60, 1, 15, 3}));
}

TEST(LayoutTest, TheFirstOperandThatOrdersTwoDimsDecides) {
  // Transposed + contiguous: the first operand's layout, either way round.
  EXPECT_EQ(Elementwise({7, 5}, {{{7, 5}, {1, 7}}, {{7, 5}, {5, 1}}}), Strides({1, 7}));
  EXPECT_EQ(Elementwise({7, 5}, {{{7, 5}, {5, 1}}, {{7, 5}, {1, 7}}}), Strides({5, 1}));
  // A broadcast operand's stride 0 orders nothing: the transposed one decides.
  EXPECT_EQ(Elementwise({7, 5}, {{{5}, {1}}, {{7, 5}, {1, 7}}}), Strides({1, 7}));
  EXPECT_EQ(Elementwise({7, 5}, {{{7, 1}, {1, 1}}, {{7, 5}, {1, 7}}}), Strides({1, 7}));
  EXPECT_EQ(Elementwise({7, 5}, {{{7, 1}, {1, 1}}, {{7, 5}, {5, 1}}}), Strides({5, 1}));
  // A scalar is a 0-d operand: no fast setup, the same order.
  EXPECT_EQ(Elementwise({7, 5}, {{{7, 5}, {1, 7}}, {{}, {}}}), Strides({1, 7}));
  // Size-1 dims sort too (dim 1, stride 3 ties dim 2 and is smaller: it
  // moves faster): strides 1, 3, 3 as the fast setup would give.
  EXPECT_EQ(Elementwise({3, 1, 4}, {{{3, 1, 4}, {1, 3, 3}}, {{}, {}}}), Strides({1, 3, 3}));
}

TEST(LayoutTest, NonDenseOperandsKeepTheirOrderDensely) {
  // x[:, :3] of a contiguous [5, 7]: row-major, so contiguous.
  EXPECT_EQ(Elementwise({5, 3}, {{{5, 3}, {7, 1}}}), Strides({3, 1}));
  // x.t()[:3] of a contiguous [5, 7]: column-major, densely.
  EXPECT_EQ(Elementwise({3, 5}, {{{3, 5}, {1, 7}}}), Strides({1, 3}));
  EXPECT_EQ(PreserveStrides({3, 5}, {1, 7}), Strides({1, 3}));
  EXPECT_EQ(PreserveStrides({5, 3}, {7, 1}), Strides({3, 1}));
  // Dense: the same strides; an expanded dim keeps its row-major place.
  EXPECT_EQ(PreserveStrides({4, 2, 3}, {1, 12, 4}), Strides({1, 12, 4}));
  EXPECT_EQ(PreserveStrides({2, 6}, {0, 1}), Strides({6, 1}));
}

TEST(LayoutTest, DenseAndMemoryOrder) {
  EXPECT_TRUE(IsNonOverlappingAndDense({7, 5}, {1, 7}));
  EXPECT_TRUE(IsNonOverlappingAndDense({7, 3}, {1, 7}));   // x.t()[:, :3]: whole columns
  EXPECT_FALSE(IsNonOverlappingAndDense({3, 5}, {1, 7}));  // x.t()[:3]: gaps
  EXPECT_FALSE(IsNonOverlappingAndDense({2, 6}, {0, 1}));  // expanded: overlaps
  EXPECT_TRUE(IsNonOverlappingAndDense({}, {}));
  using Order = absl::InlinedVector<int64_t, 5>;
  EXPECT_EQ(MemoryOrder({7, 5}, {1, 7}), Order({1, 0}));
  EXPECT_EQ(MemoryOrder({4, 2, 3}, {1, 12, 4}), Order({1, 2, 0}));
  EXPECT_TRUE(MemoryOrder({5, 7}, {7, 1}).empty());   // row-major: nothing to permute
  EXPECT_TRUE(MemoryOrder({0, 3}, {1, 0}).empty());   // no elements
  EXPECT_TRUE(MemoryOrder({3, 1}, {1, 9}).empty());   // size-1 dims place nothing
}

}  // namespace
}  // namespace fusebox
