// The FUSEBOX_TUNE_* readers (backend/tune.h): a knob that is unset, not an
// integer, out of its range or (where asked) not a power of two is unset.
#include <cstdlib>

#include "backend/tune.h"
#include "gtest/gtest.h"

namespace fusebox::backend {
namespace {

constexpr char kKnob[] = "FUSEBOX_TUNE_TEST_ONLY_KNOB";

int64_t Read(const char* value, bool power_of_two = false) {
  if (value == nullptr) {
    unsetenv(kKnob);
  } else {
    setenv(kKnob, value, /*overwrite=*/1);
  }
  const int64_t n = TuneIntInRange(kKnob, 8, 2, 64, power_of_two);
  unsetenv(kKnob);
  return n;
}

TEST(TuneTest, InRangeValuesAreReadAndTheRestFallBack) {
  EXPECT_EQ(Read(nullptr), 8);
  EXPECT_EQ(Read("33"), 33);
  EXPECT_EQ(Read("2"), 2);
  EXPECT_EQ(Read("64"), 64);
  EXPECT_EQ(Read("1"), 8);
  EXPECT_EQ(Read("65"), 8);
  EXPECT_EQ(Read("-4"), 8);
  EXPECT_EQ(Read("sixteen"), 8);
  EXPECT_EQ(Read("16x"), 8);
}

TEST(TuneTest, PowerOfTwoKnobsRejectOtherValues) {
  EXPECT_EQ(Read("32", /*power_of_two=*/true), 32);
  EXPECT_EQ(Read("48", /*power_of_two=*/true), 8);
  EXPECT_EQ(Read("128", /*power_of_two=*/true), 8);  // a power of two past the range
}

}  // namespace
}  // namespace fusebox::backend
