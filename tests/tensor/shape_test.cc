// ComposeReads: a view of a view as one view, checked against reading the
// two one after the other, and refused where a step would carry across a
// dim of the inner view.
#include <vector>

#include "gtest/gtest.h"
#include "tensor/shape.h"

namespace fusebox {
namespace {

// Where `read` puts position `flat` (row-major over read.shape).
int64_t At(const StridedRead& read, int64_t flat) {
  int64_t at = read.offset;
  for (size_t d = read.shape.size(); d-- > 0;) {
    at += (flat % read.shape[d]) * read.strides[d];
    flat /= read.shape[d];
  }
  return at;
}

// Composes and, where it composes, checks every position against the two reads in turn.
bool ComposesExactly(const StridedRead& inner, const StridedRead& outer) {
  StridedRead composed = outer;
  if (!ComposeReads(inner, &composed)) return false;
  for (int64_t p = 0; p < Numel(outer.shape); ++p) {
    EXPECT_EQ(At(composed, p), At(inner, At(outer, p))) << "position " << p;
  }
  return true;
}

TEST(ComposeReadsTest, ReshapesTransposesAndSlicesCompose) {
  // nanoGPT's k: the transposed head view [B, H, T, D] of [B, T, 3C], read as it is; and matmul's
  // [B*H, T, D] batch split back into [B, H].
  const StridedRead heads{.shape = {2, 3, 17, 64}, .strides = {17 * 576, 64, 576, 1}, .offset = 192};
  EXPECT_TRUE(ComposesExactly(heads, {.shape = {2, 3, 17, 64}, .strides = {3264, 1088, 64, 1}}));
  EXPECT_TRUE(ComposesExactly({.shape = {6, 17, 64}, .strides = {1088, 64, 1}},
                              {.shape = {2, 3, 17, 64}, .strides = {3264, 1088, 64, 1}}));
  // k^T [6, 64, 17] of a strided input, read back as k [2, 3, 17, 64].
  const StridedRead k_t{.shape = {6, 64, 17}, .strides = {1088, 1, 64}};
  EXPECT_TRUE(ComposesExactly(k_t, {.shape = {2, 3, 17, 64}, .strides = {3 * 1088, 1088, 1, 17}}));
  // A slice with an offset, and a broadcast dim.
  EXPECT_TRUE(ComposesExactly({.shape = {8, 8}, .strides = {1, 8}}, {.shape = {4, 3, 5}, .strides = {0, 8, 1}, .offset = 9}));
}

TEST(ComposeReadsTest, AStepThatCarriesAcrossADimIsRefused) {
  // Rows of 5 read as one run of 10 from a [4, 5] view with padded rows (stride 8).
  const StridedRead padded{.shape = {4, 5}, .strides = {8, 1}};
  StridedRead run{.shape = {2, 10}, .strides = {10, 1}};
  EXPECT_FALSE(ComposeReads(padded, &run));
  EXPECT_EQ(run.strides, (Strides{10, 1})) << "left untouched";
  // Merging dims is not composed: the head view's batch dims do not fold into one (matmul copies it).
  StridedRead folded{.shape = {6, 17, 64}, .strides = {1088, 64, 1}};
  EXPECT_FALSE(ComposeReads({.shape = {2, 3, 17, 64}, .strides = {17 * 576, 64, 576, 1}}, &folded));
  // A slice running past the end of the inner dim.
  StridedRead past{.shape = {3}, .strides = {1}, .offset = 3};
  EXPECT_FALSE(ComposeReads(padded, &past));
}

}  // namespace
}  // namespace fusebox
