// fusion::StridedOffsets, how a mask's evaluation reads views and inputs
// (fusion/input_values.h): the odometer it steps over consecutive positions
// against the division per position, over random shapes, strides (0
// broadcasts too), offsets and position lists mixing runs and jumps.
#include <cstdint>
#include <random>
#include <vector>

#include "fusion/input_values.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace fusebox::fusion {
namespace {

TEST(StridedOffsetsTest, MatchesTheDivisionPerPosition) {
  std::mt19937_64& rng = test_util::Rng();
  for (int trial = 0; trial < 200; ++trial) {
    const int rank = std::uniform_int_distribution<int>(0, 4)(rng);
    std::vector<int64_t> shape, strides;
    int64_t numel = 1;
    for (int d = 0; d < rank; ++d) {
      shape.push_back(std::uniform_int_distribution<int64_t>(1, 6)(rng));
      strides.push_back(std::uniform_int_distribution<int64_t>(0, 40)(rng));
      numel *= shape.back();
    }
    const int64_t offset = std::uniform_int_distribution<int64_t>(0, 9)(rng);
    std::vector<int64_t> at;
    while (static_cast<int64_t>(at.size()) < 3 * numel) {
      int64_t p = std::uniform_int_distribution<int64_t>(0, numel - 1)(rng);
      const int64_t run = std::uniform_int_distribution<int64_t>(1, numel)(rng);
      for (int64_t k = 0; k < run && p < numel; ++k) at.push_back(p++);  // a run of consecutive positions
    }
    std::vector<int64_t> got;
    StridedOffsets(shape, strides, offset, at, &got);
    ASSERT_EQ(got.size(), at.size());
    for (size_t k = 0; k < at.size(); ++k) {
      int64_t rest = at[k], want = offset;
      for (int d = rank - 1; d >= 0; --d) {
        want += (rest % shape[d]) * strides[d];
        rest /= shape[d];
      }
      ASSERT_EQ(got[k], want) << "trial " << trial << ", position " << at[k] << " (seed " << test_util::Seed() << ")";
    }
  }
}

}  // namespace
}  // namespace fusebox::fusion
