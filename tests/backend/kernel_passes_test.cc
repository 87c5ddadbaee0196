// The kernel-IR pass lists (backend/kernel_passes.h): their order, that each
// pass runs only where it applies, and the trace after each pass, which
// says "(unchanged)" where a pass changed nothing.
#include <string>
#include <vector>

#include "backend/cuda/cuda_schedule.h"
#include "backend/cpu/cpp_printer.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/cuda/nvrtc.h"
#include "backend/ptx_summary.h"
#include "backend/kernel_passes.h"
#include "backend/online_exp_sums.h"
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
  EXPECT_EQ(Names(backend::CudaKernelPasses()), (std::vector<std::string>{"online_exp_sums", "held_row_values"}));
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

// online_exp_sums (backend/online_exp_sums.h): a split column's softmax
// folds its sum of exp(x - max) in the max's pass, one pass and one partial
// launch fewer; the schedule says so, and the pass runs only under it.
TEST(KernelPassesTest, SplitColumnSoftmaxFoldsItsExpSumOnline) {
  auto column_softmax = [](auto& in) { return softmax(in[0], 0); };
  const backend::Kernel k = LowerOnly(column_softmax, {randn({4096, 1023})});
  ASSERT_EQ(k.passes.size(), 2u);
  const backend::CudaSchedule s = backend::ChooseCudaSchedule(k, backend::CurrentTuning());
  ASSERT_GT(s.spread.split, 1);
  EXPECT_TRUE(s.online_exp_sums);
  EXPECT_EQ(s.partial_launches, 1);
  std::string trace;
  const backend::Kernel online = backend::RunKernelPasses(k, backend::CudaKernelPasses(), &s, backend::CurrentTuning(), &trace);
  EXPECT_THAT(trace, HasSubstr("after online_exp_sums:\n"));
  ASSERT_EQ(online.passes.size(), 1u);
  ASSERT_EQ(online.passes[0].accumulators.size(), 2u);
  const backend::Accumulator& running_max = online.passes[0].accumulators[0];
  const backend::Accumulator& exp_sum = online.passes[0].accumulators[1];
  EXPECT_EQ(running_max.op, graph::Op::kMax);
  EXPECT_EQ(exp_sum.op, graph::Op::kSum);
  EXPECT_EQ(exp_sum.online_max, running_max.temp);
  EXPECT_EQ(exp_sum.value, running_max.value) << "the sum folds the max's own value";
  EXPECT_EQ(online.elementwise.size(), k.elementwise.size()) << "the stores are untouched";
  EXPECT_EQ(backend::PassesAfterOnlineExpSums(k), 1u);
  EXPECT_FALSE(backend::RoundsEachFold(exp_sum)) << "its runs pair with the max's (split_printer.cc)";
  // The C++ printer never folds online: the pass is the split printer's.
  EXPECT_ANY_THROW(backend::cpu::PrintCpp(online));
  // Its CUDA source compiles for sm_90, one partial kernel and the final one.
  const std::string source = backend::PrintCuda(k, backend::CurrentTuning());
  EXPECT_THAT(source, HasSubstr("fb_online_exp_sum("));
  EXPECT_THAT(source, Not(HasSubstr("_partial1(")));
  auto out = cuda::CompileWithNvrtc(source, k.name, 90);
  ASSERT_TRUE(out.ok()) << out.status() << "\n" << source;
  EXPECT_EQ(backend::SummarizePtx(out->ptx, out->log).spill_store_bytes, 0);

  // Knob::kOnlineExpSums 0: the schedule keeps a launch per pass.
  {
    backend::ScopedTuning off({{backend::Knob::kOnlineExpSums, 0}});
    const backend::CudaSchedule two = backend::ChooseCudaSchedule(k, backend::CurrentTuning());
    EXPECT_FALSE(two.online_exp_sums);
    EXPECT_EQ(two.partial_launches, 2);
    EXPECT_EQ(backend::RunKernelPasses(k, backend::CudaKernelPasses(), &two, backend::CurrentTuning()).passes.size(), 2u);
  }

  // Sums that are not of exp(x - max) keep their pass: layer_norm's variance,
  // and a softmax of x whose sum reads exp(2x - max).
  const backend::Kernel norm = LowerOnly(
      [](auto& in) {
        Tensor c = in[0] - mean(in[0], 0, true);
        return c * rsqrt(mean(c * c, 0, true) + 1e-5);
      },
      {randn({4096, 1023})});
  EXPECT_EQ(backend::PassesAfterOnlineExpSums(norm), norm.passes.size());
  const backend::Kernel other = LowerOnly(
      [](auto& in) {
        Tensor e = exp(in[0] * 2.0 - max(in[0], 0, true));
        return e / sum(e, 0, true);
      },
      {randn({4096, 1023})});
  ASSERT_EQ(other.passes.size(), 2u);
  EXPECT_EQ(backend::PassesAfterOnlineExpSums(other), 2u);
  EXPECT_FALSE(backend::ChooseCudaSchedule(other, backend::CurrentTuning()).online_exp_sums);
}

}  // namespace
}  // namespace fusebox
