// The benchmark harness's pure helpers: how many input sets rotation uses,
// what --filter matches, and that the suite's cases are the ones the README,
// compare_torch.py and --filter name.
#include <set>
#include <string>

#include "bench/harness.h"
#include "bench/suite.h"
#include "gtest/gtest.h"

namespace fusebox::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024;

TEST(RotationSets, OneSetOnceASetIsTwiceTheCache) {
  EXPECT_EQ(RotationSets(120 * kMiB, 60 * kMiB, kMaxInputSets), 1);
  EXPECT_EQ(RotationSets(512 * kMiB, 60 * kMiB, kMaxInputSets), 1);
}

TEST(RotationSets, EnoughSetsToSpanTwiceTheCache) {
  EXPECT_EQ(RotationSets(100 * kMiB, 60 * kMiB, kMaxInputSets), 2);
  EXPECT_EQ(RotationSets(40 * kMiB, 60 * kMiB, kMaxInputSets), 3);
  EXPECT_EQ(RotationSets(1 * kMiB, 60 * kMiB, kMaxInputSets), 120);
}

TEST(RotationSets, CappedAtMax) {
  EXPECT_EQ(RotationSets(8 * 1024, 60 * kMiB, kMaxInputSets), kMaxInputSets);
  EXPECT_EQ(RotationSets(8 * 1024, 60 * kMiB, 4), 4);
  EXPECT_EQ(RotationSets(0, 60 * kMiB, 4), 4);
  EXPECT_EQ(RotationSets(8 * 1024, 60 * kMiB, 0), 1);
}

TEST(GBps, BytesOverMilliseconds) { EXPECT_DOUBLE_EQ(GBps(2e9, 1000.0), 2.0); }

TEST(Matches, CommaListOfSubstrings) {
  EXPECT_TRUE(Matches("", "manual_gelu"));
  EXPECT_TRUE(Matches("gelu", "tiny_gelu"));
  EXPECT_TRUE(Matches("softmax,sum", "col_sum"));
  EXPECT_FALSE(Matches("softmax,sum", "manual_gelu"));
  EXPECT_FALSE(Matches(",", "manual_gelu"));
}

TEST(SuiteCases, QuickAndFullRunTheSameCases) {
  const std::set<std::string> want = {"manual_gelu", "add_mul_tanh", "manual_softmax", "manual_layer_norm",
                                      "manual_rms_norm", "row_sum", "col_sum", "tiny_gelu", "gelu_sweep"};
  for (bool quick : {true, false}) {
    std::set<std::string> names;
    for (const Case& c : SuiteCases(quick)) names.insert(c.name);
    EXPECT_EQ(names, want) << (quick ? "quick" : "full");
  }
}

TEST(SuiteCases, FullSweepIsEveryPowerOfTwoUpTo2To28) {
  int sweep = 0;
  for (const Case& c : SuiteCases(/*quick=*/false)) {
    if (c.name != "gelu_sweep") continue;
    EXPECT_EQ(c.shape, Shape{int64_t{1} << (10 + sweep)});
    ++sweep;
  }
  EXPECT_EQ(sweep, 19);
}

}  // namespace
}  // namespace fusebox::bench
