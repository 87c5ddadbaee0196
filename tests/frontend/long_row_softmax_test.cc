// logsumexp, softmax, log_softmax and cross_entropy over rows too long to
// hold in registers (GPT-2's 50304-wide logits, an odd 40001), the rows
// that a CUDA schedule holds in registers and shared memory or re-reads
// (cuda/row_layout.h): against float64, in f32 and bf16, with large
// magnitudes, -inf entries and a row of only -inf (logsumexp -inf, softmax
// and log_softmax NaN, as PyTorch). On the CPU and, skipping without one,
// the GPU (where backend/online_exp_sums.h may fold the exp sums).
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/fusebox.h"
#include "gtest/gtest.h"
#include "tests/frontend/reduction_test_util.h"
#include "tests/test_util.h"
#include "tests/workloads.h"

namespace fusebox::reduction_test {
namespace {

class LongRowSoftmaxTest : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    if (GetParam().is_cuda()) {
      SKIP_WITHOUT_CUDA();
    }
  }

  // Fresh rows of `length`: row 0 normal, row 1 magnitudes up to 1e4 (so
  // exp(x) overflows without the max shift) with some -inf entries, row 2
  // all -inf.
  Tensor Rows(int64_t length, DType dtype) const {
    std::mt19937_64& rng = test_util::Rng();
    std::normal_distribution<double> normal(0, 3);
    std::uniform_real_distribution<double> wide(-1e4, 1e4);
    std::vector<double> v;
    for (int64_t j = 0; j < length; ++j) v.push_back(normal(rng));
    for (int64_t j = 0; j < length; ++j) v.push_back(j % 997 == 5 ? -INFINITY : wide(rng));
    for (int64_t j = 0; j < length; ++j) v.push_back(-INFINITY);
    return Tensor::from_vector(v, {3, length}, dtype).to(GetParam());
  }
};

TEST_P(LongRowSoftmaxTest, MatchFloat64) {
  for (int64_t length : {50304, 40001}) {
    for (DType dtype : {kF32, kBF16}) {
      const Tensor x = Rows(length, dtype);
      const std::string label = absl::StrCat(length, " ", DTypeName(dtype));
      Want lse = RefReduce(x.to(Device::cpu()), {1}, /*keepdim=*/false, dtype, LogSumExpOf);
      Check(label + " logsumexp", [](const Tensor& a) { return logsumexp(a, {1}); }, x, lse, -1, false);
      Want soft = RefSoftmax(x.to(Device::cpu()), 1);
      Check(label + " softmax", [](const Tensor& a) { return softmax(a, 1); }, x, soft, -1, false);
      Want logsoft = RefRowwise(x.to(Device::cpu()), {1}, LogSoftmaxOf);
      Check(label + " log_softmax", [](const Tensor& a) { return log_softmax(a, 1); }, x, logsoft, -1, false);
    }
  }
}

// cross_entropy with reduction "none": -log_softmax(x)[target] per row, in
// float32 over bf16 logits too; the -inf row's loss is NaN.
TEST_P(LongRowSoftmaxTest, CrossEntropyMatchesFloat64) {
  for (int64_t length : {50304, 40001}) {
    for (DType dtype : {kF32, kBF16}) {
      const Tensor x = Rows(length, dtype);
      const std::vector<int64_t> targets = {7, length - 2, length / 3};
      const Tensor t = Tensor::from_vector(targets, {3}).to(GetParam());
      const Tensor host = x.to(Device::cpu());
      Want want = RefReduce(host, {1}, false, dtype, [](const Row&) { return 0.0; });
      const std::vector<double> v = host.to_double_vector();
      for (int64_t r = 0; r < 3; ++r) {
        const Row row(v.begin() + r * length, v.begin() + (r + 1) * length);
        want.values[r] = test_util::RoundTo(dtype, -LogSoftmaxOf(row)[targets[r]]);
      }
      auto loss = [&](const Tensor& a) { return cross_entropy(a, t, -100, "none"); };
      Check(absl::StrCat(length, " ", DTypeName(dtype), " cross_entropy"), loss, x, want, -1, false);
    }
  }
}

// Cross-entropy's logsumexp as cross_entropy and nanoGPT spell it (a float32
// cast, the max, log(sum(exp(x - max))) + max) over rows past the
// registers: CUDA folds the exp sums online (backend/online_exp_sums.h) and
// reads each row once. Block rows of 50304 (groups of 8 folded whole) and
// of an odd 40001 (groups aligned to memory, elements folded one at a
// time), and warp rows summing five inputs. Rows: normal; wide magnitudes
// with -inf entries; -inf then normal halves (whole groups of -inf before
// the first finite max) and the reverse; all -inf (NaN, as eager's
// exp(-inf - -inf)).
TEST_P(LongRowSoftmaxTest, OnlineFoldedLogSumExpMatchesFloat64) {
  struct Case {
    int64_t length;
    int inputs;
    DType dtype;
  };
  for (const Case& c : {Case{50304, 1, kF32}, Case{50304, 1, kBF16}, Case{40001, 1, kBF16}, Case{1024, 5, kF32},
                        Case{3000, 5, kF32}}) {
    constexpr int64_t kRows = 5;
    std::mt19937_64& rng = test_util::Rng();
    std::normal_distribution<double> normal(0, 3);
    std::uniform_real_distribution<double> wide(-1e4, 1e4);
    std::vector<double> v;
    for (int i = 0; i < c.inputs; ++i) {
      for (int64_t j = 0; j < c.length; ++j) v.push_back(normal(rng));
      for (int64_t j = 0; j < c.length; ++j) v.push_back(j % 997 == 5 ? -INFINITY : wide(rng));
      for (int64_t j = 0; j < c.length; ++j) v.push_back(j < c.length / 2 ? -INFINITY : normal(rng));
      for (int64_t j = 0; j < c.length; ++j) v.push_back(j >= c.length / 2 ? -INFINITY : normal(rng));
      for (int64_t j = 0; j < c.length; ++j) v.push_back(-INFINITY);
    }
    const Tensor x = Tensor::from_vector(v, {c.inputs, kRows, c.length}, c.dtype);
    // The reference sums the inputs as eager does: in the dtype, each add
    // rounded (the sum then cast to float32 exactly).
    const std::vector<double> stored = x.to_double_vector();
    Want want{.shape = {kRows}, .dtype = kF32};
    for (int64_t r = 0; r < kRows; ++r) {
      Row row(c.length, 0.0);
      for (int i = 0; i < c.inputs; ++i) {
        for (int64_t j = 0; j < c.length; ++j) {
          row[j] = test_util::RoundTo(c.dtype, row[j] + stored[(i * kRows + r) * c.length + j]);
        }
      }
      const bool all_inf = r == kRows - 1;
      want.values.push_back(all_inf ? NAN : test_util::RoundTo(kF32, LogSumExpOf(row)));
      want.slack.push_back(0);
    }
    const int inputs = c.inputs;
    auto fn = [inputs](const Tensor& a) {
      Tensor s = a.narrow(0, 0, 1).squeeze(0);
      for (int i = 1; i < inputs; ++i) s = s + a.narrow(0, i, 1).squeeze(0);
      const Tensor f = s.to(kF32);
      const Tensor m = amax(f, {1}, /*keepdim=*/true);
      return log(sum(exp(f - m), 1)) + m.squeeze(1);
    };
    const std::string label = absl::StrCat(c.length, " x ", c.inputs, " inputs ", DTypeName(c.dtype), " logsumexp");
    Check(label, fn, x.to(GetParam()), want, 1, /*eager=*/true);
    if (GetParam().is_cuda()) {
      auto compiled = compile(fn);
      compiled(x.to(GetParam()));
      bool folded = false;
      for (const auto& k : compiled.kernels()) folded = folded || k.schedule.find("online exp sums") != std::string::npos;
      EXPECT_TRUE(folded) << label << "\n" << compiled.explain();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, LongRowSoftmaxTest, ::testing::Values(Device::cpu(), Device::cuda()),
                         [](const auto& info) { return info.param.is_cuda() ? "Cuda" : "Cpu"; });

}  // namespace
}  // namespace fusebox::reduction_test
