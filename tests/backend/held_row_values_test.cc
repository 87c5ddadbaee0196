// ReuseHeldRowValues (backend/cuda/held_row_values.h): which values on-chip
// rows hold after their last pass, on the IR and in the printed CUDA (which
// NVRTC compiles). The numerics are checked on the GPU against float64
// (tests/frontend/row_reductions_gpu_test.cc: softmax, layer_norm and the
// kernels below over row lengths held in registers and in shared memory).
#include <string>

#include "backend/cuda/cuda_printer.h"
#include "backend/cuda/held_row_values.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/row_printer.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/lower_for_test.h"
#include "tests/test_util.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using backend::Kernel;
using backend::Stmt;
using backend::StmtKind;
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

using test_util::CountSubstr;
using testing_backend::SpreadOf;

int CountOps(const std::vector<Stmt>& body, graph::Op op) {
  int n = 0;
  for (const Stmt& s : body) n += s.kind == StmtKind::kCompute && s.op == op;
  return n;
}

bool StoresIntoSlot(const std::vector<Stmt>& body, int slot) {
  for (const Stmt& s : body) {
    if (s.kind == StmtKind::kStore && s.cache_slot == slot) return true;
  }
  return false;
}

// The row kernel of fn(inputs), lowered: one the CUDA layout holds on chip.
Kernel LowerRows(Tensor (*fn)(const std::vector<Tensor>&), const std::vector<Tensor>& inputs) {
  Kernel k = testing_backend::LowerAll(fn, inputs).back();
  EXPECT_TRUE(backend::ChooseCudaRowLayout(k, SpreadOf(k), backend::CurrentTuning()).on_chip);
  return k;
}

Tensor Softmax(const std::vector<Tensor>& in) { return ManualSoftmax(in[0]); }
Tensor LogSoftmax(const std::vector<Tensor>& in) {
  Tensor shifted = in[0] - max(in[0], -1, /*keepdim=*/true);
  return shifted - log(sum(exp(shifted), -1, /*keepdim=*/true));
}
Tensor SoftmaxPlusInput(const std::vector<Tensor>& in) { return ManualSoftmax(in[0]) + in[0] * 2.0; }
Tensor LayerNorm(const std::vector<Tensor>& in) {
  Tensor centered = in[0] - mean(in[0], -1, /*keepdim=*/true);
  Tensor var = mean(centered * centered, -1, /*keepdim=*/true);
  return centered * rsqrt(var + 1e-5) * in[1] + in[2];
}

void ExpectCompiles(const Kernel& k) {
  auto out = cuda::CompileWithNvrtc(backend::PrintCuda(k, backend::CurrentTuning()), k.name, 90);
  EXPECT_TRUE(out.ok()) << out.status();
}

// Softmax: the sum pass leaves exp(x - max) in the row's slot, and the
// output multiplies it by the reciprocal: one exp per element, not two.
TEST(HeldRowValuesTest, SoftmaxHoldsExpAfterTheSumPass) {
  for (int64_t cols : {1024, 4096, 40000}) {  // a warp, a block, registers and shared memory
    SCOPED_TRACE(cols);
    const Kernel k = LowerRows(Softmax, {randn({16, cols})});
    ASSERT_EQ(k.passes.size(), 2u);
    EXPECT_EQ(CountOps(k.elementwise, graph::Op::kExp), 1);
    const Kernel held = backend::ReuseHeldRowValues(k);
    EXPECT_TRUE(StoresIntoSlot(held.passes[1].body, 0));
    EXPECT_EQ(CountOps(held.elementwise, graph::Op::kExp), 0);
    EXPECT_EQ(CountOps(held.elementwise, graph::Op::kSub), 0);
    EXPECT_EQ(CountOps(held.passes[1].body, graph::Op::kExp), 1);  // the sum pass still computes it
    const std::string source = backend::PrintCuda(k, backend::CurrentTuning());
    EXPECT_EQ(CountSubstr(source, "expf("), 1) << source;
    EXPECT_EQ(CountSubstr(source, "c0[k] = t"), 1) << source;
    ExpectCompiles(k);
    // Applying it again changes nothing.
    EXPECT_EQ(backend::ReuseHeldRowValues(held).ToString(), held.ToString());
  }
}

// log_softmax reads x - max after the sum pass, not exp(x - max): that is held.
TEST(HeldRowValuesTest, LogSoftmaxHoldsTheShiftedRow) {
  const Kernel k = LowerRows(LogSoftmax, {randn({16, 2048})});
  const Kernel held = backend::ReuseHeldRowValues(k);
  EXPECT_TRUE(StoresIntoSlot(held.passes.back().body, 0));
  EXPECT_EQ(CountOps(k.elementwise, graph::Op::kSub), 2);
  EXPECT_EQ(CountOps(held.elementwise, graph::Op::kSub), 1);  // minus log(sum) only
  ExpectCompiles(k);
}

// layer_norm: x - mean, computed for the variance, is what the output scales.
TEST(HeldRowValuesTest, LayerNormHoldsTheCenteredRow) {
  // 2048: on chip (at 4096 a layer_norm with weights loops, LoopsNormRows).
  const Kernel k = LowerRows(LayerNorm, {randn({16, 2048}), randn({2048}), randn({2048})});
  const Kernel held = backend::ReuseHeldRowValues(k);
  EXPECT_TRUE(StoresIntoSlot(held.passes.back().body, 0));
  EXPECT_EQ(CountOps(held.elementwise, graph::Op::kSub), CountOps(k.elementwise, graph::Op::kSub) - 1);
  ExpectCompiles(k);
}

// Where a later loop needs the element itself too, the slot keeps it.
TEST(HeldRowValuesTest, ARowStillReadAsItselfIsKept) {
  const Kernel k = LowerRows(SoftmaxPlusInput, {randn({16, 1024})});
  EXPECT_EQ(backend::ReuseHeldRowValues(k).ToString(), k.ToString());
  EXPECT_EQ(CountSubstr(backend::PrintCuda(k, backend::CurrentTuning()), "expf("), 2);
}

// A row read by one pass only (a sum, rms_norm's input read by its output
// as itself) has nothing to hold.
TEST(HeldRowValuesTest, NothingToHoldLeavesTheKernelAsItIs) {
  const Kernel sum_rows =
      testing_backend::LowerAll([](const std::vector<Tensor>& in) { return sum(in[0], -1); }, {randn({16, 4096})}).back();
  EXPECT_EQ(backend::ReuseHeldRowValues(sum_rows).ToString(), sum_rows.ToString());
  const Kernel rms = testing_backend::LowerAll(
      [](const std::vector<Tensor>& in) { return in[0] * rsqrt(mean(in[0] * in[0], -1, true) + 1e-6) * in[1]; },
      {randn({16, 4096}), randn({4096})}).back();
  EXPECT_EQ(backend::ReuseHeldRowValues(rms).ToString(), rms.ToString());
}

}  // namespace
}  // namespace fusebox
