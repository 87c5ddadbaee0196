#include "backend/kernel_passes.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "backend/cuda/cuda_schedule.h"
#include "backend/nonnegative_compares.h"
#include "backend/cuda/held_row_values.h"
#include "backend/one_plus_tanh.h"
#include "backend/online_exp_sums.h"
#include "backend/row_reciprocals.h"
#include "tensor/debug.h"

namespace fusebox::backend {
namespace {

constexpr KernelPass kNeutral[] = {
    {"row_reciprocals", "a division by a row's result becomes a multiplication by its reciprocal (row_reciprocals.h)",
     [](const Kernel& k, const CudaSchedule*, const TuningSnapshot&) { return k.is_reduction(); },
     MultiplyByRowReciprocals},
    {"one_plus_tanh", "1 + tanh(z) becomes 2 sigmoid(2z) (one_plus_tanh.h; Knob::kOnePlusTanh)",
     [](const Kernel&, const CudaSchedule*, const TuningSnapshot& t) { return t.On(Knob::kOnePlusTanh); },
     RewriteOnePlusTanh},
    {"nonnegative_compares",
     "v >= c (v: abs, x * x, exp, relu, sqrt; a constant c <= 0) becomes a NaN test, the same value, which ptxas "
     "cannot fold (nonnegative_compares.h)",
     [](const Kernel&, const CudaSchedule*, const TuningSnapshot&) { return true; }, RewriteNonNegativeCompares},
};

constexpr KernelPass kCuda[] = {
    {"online_exp_sums",
     "split columns, and rows past the registers that it leaves read once, fold each sum of exp(x - max) in its "
     "max's pass, a read of the column or row fewer (online_exp_sums.h; Knob::kOnlineExpSums)",
     [](const Kernel&, const CudaSchedule* s, const TuningSnapshot&) { return s != nullptr && s->online_exp_sums; },
     FoldExpSumsOnline},
    {"held_row_values",
     "rows held on chip keep a value the last pass computed (cuda/held_row_values.h; Knob::kHeldValues)",
     [](const Kernel&, const CudaSchedule* s, const TuningSnapshot& t) {
       return s != nullptr && s->row_printer() && s->rows->on_chip && t.On(Knob::kHeldValues);
     },
     ReuseHeldRowValues},
};

}  // namespace

std::span<const KernelPass> NeutralKernelPasses() { return kNeutral; }
std::span<const KernelPass> CudaKernelPasses() { return kCuda; }

Kernel RunKernelPasses(Kernel kernel, std::span<const KernelPass> passes, const CudaSchedule* schedule,
                       const TuningSnapshot& tuning, std::string* trace) {
  const bool dump = DebugDump("passes");
  for (const KernelPass& pass : passes) {
    if (!pass.applies(kernel, schedule, tuning)) continue;
    const std::string before = dump || trace ? kernel.ToString() : std::string();
    kernel = pass.run(std::move(kernel));
    if (!dump && trace == nullptr) continue;
    const std::string after = kernel.ToString();
    const std::string text = absl::StrCat("[fusebox passes] ", kernel.name, " after ", std::string(pass.name), ":\n",
                                          after == before ? std::string("  (unchanged)\n") : after);
    if (dump) std::fputs(text.c_str(), stderr);
    if (trace != nullptr) trace->append(text);
  }
  return kernel;
}

}  // namespace fusebox::backend
