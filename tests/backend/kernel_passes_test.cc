// The kernel-IR pass lists (backend/kernel_passes.h): their order, that each
// pass runs only where it applies, and the trace after each pass, which
// says "(unchanged)" where a pass changed nothing.
#include <string>
#include <vector>

#include "backend/cuda/cuda_schedule.h"
#include "backend/kernel_passes.h"
#include "backend/lower.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/lower_for_test.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_backend::LowerOnly;

std::vector<std::string> Names(std::span<const backend::KernelPass> passes) {
  std::vector<std::string> names;
  for (const backend::KernelPass& p : passes) names.emplace_back(p.name);
  return names;
}

TEST(KernelPassesTest, ListsInOrder) {
  EXPECT_EQ(Names(backend::NeutralKernelPasses()), (std::vector<std::string>{"row_reciprocals", "one_plus_tanh", "nonnegative_compares"}));
  EXPECT_EQ(Names(backend::CudaKernelPasses()), (std::vector<std::string>{"held_row_values"}));
}

TEST(KernelPassesTest, TraceShowsEachPassAndWhatItChanged) {
  // Softmax: the reciprocal pass rewrites the division; no tanh to rewrite.
  const backend::Kernel softmax = LowerOnly([](auto& in) { return testing_workloads::ManualSoftmax(in[0]); },
                                            {randn({64, 1000})});
  std::string trace;
  const backend::Kernel again =
      backend::RunKernelPasses(softmax, backend::NeutralKernelPasses(), nullptr, backend::CurrentTuning(), &trace);
  EXPECT_THAT(trace, HasSubstr("after row_reciprocals:\n  (unchanged)"))
      << "LowerKernel already ran it: a second run changes nothing";
  EXPECT_THAT(trace, HasSubstr("after one_plus_tanh:\n  (unchanged)"));
  EXPECT_EQ(again.ToString(), softmax.ToString());

  // Gelu: a pointwise kernel skips the reduction pass; the tanh pass is what
  // LowerKernel ran (no tanh is left to rewrite).
  const backend::Kernel gelu = LowerOnly([](auto& in) { return testing_workloads::ManualGelu(in[0]); }, {randn({4096})});
  EXPECT_THAT(gelu.ToString(), HasSubstr("sigmoid("));
  EXPECT_THAT(gelu.ToString(), Not(HasSubstr("= tanh(")));
  trace.clear();
  backend::RunKernelPasses(gelu, backend::NeutralKernelPasses(), nullptr, backend::CurrentTuning(), &trace);
  EXPECT_THAT(trace, Not(HasSubstr("row_reciprocals")));
  EXPECT_THAT(trace, HasSubstr("after one_plus_tanh"));

  // The CUDA stage: a softmax row held on chip keeps exp(x - max).
  const backend::CudaSchedule s = backend::ChooseCudaSchedule(softmax, backend::CurrentTuning());
  ASSERT_TRUE(s.rows.has_value() && s.rows->on_chip);
  trace.clear();
  const backend::Kernel held =
      backend::RunKernelPasses(softmax, backend::CudaKernelPasses(), &s, backend::CurrentTuning(), &trace);
  EXPECT_THAT(trace, HasSubstr("after held_row_values:\n"));
  EXPECT_THAT(trace, Not(HasSubstr("(unchanged)")));
  EXPECT_NE(held.ToString(), softmax.ToString());
  // No schedule (the neutral stage's call): the CUDA pass does not apply.
  trace.clear();
  backend::RunKernelPasses(softmax, backend::CudaKernelPasses(), nullptr, backend::CurrentTuning(), &trace);
  EXPECT_EQ(trace, "");
}

}  // namespace
}  // namespace fusebox
