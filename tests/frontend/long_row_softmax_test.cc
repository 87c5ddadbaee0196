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

INSTANTIATE_TEST_SUITE_P(Devices, LongRowSoftmaxTest, ::testing::Values(Device::cpu(), Device::cuda()),
                         [](const auto& info) { return info.param.is_cuda() ? "Cuda" : "Cpu"; });

}  // namespace
}  // namespace fusebox::reduction_test
