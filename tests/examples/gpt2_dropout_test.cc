// examples/gpt2 with nanoGPT's dropout (config.dropout > 0): in eval mode the
// forward is exactly that of the same model without dropout; in training
// the compiled forward draws the masks the eager one draws after the same
// manual_seed, and differs from eval. Both attentions (SDPA's dropout_p and
// the written-out attn_dropout); CPU, and CUDA skipping without one.
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "examples/gpt2/gpt2.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace fusebox {
namespace {

using gpt2::Attention;
using gpt2::GPT;
using gpt2::GPTConfig;

class Gpt2DropoutTest : public ::testing::TestWithParam<std::tuple<bool, Attention>> {
 protected:
  void SetUp() override {
    if (std::get<0>(GetParam()) && !cuda_available()) GTEST_SKIP() << "no usable CUDA device";
  }
  Device device() const { return std::get<0>(GetParam()) ? Device::cuda() : Device::cpu(); }
  Attention attention() const { return std::get<1>(GetParam()); }
};

double MaxDifference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_double_vector(), y = b.to_double_vector();
  double m = x.size() == y.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

TEST_P(Gpt2DropoutTest, EvalIsTheModelWithoutDropoutAndTrainingIsReproducible) {
  GPTConfig config{.block_size = 16, .vocab_size = 67, .n_layer = 2, .n_head = 2, .n_embd = 32,
                   .dropout = 0.2, .attention = attention()};
  GPT model(config, device(), DType::kFloat32, /*seed=*/11);
  config.dropout = 0.0;
  const GPT plain(config, device(), DType::kFloat32, /*seed=*/11);  // the same parameters
  std::vector<int64_t> ids, targets;
  for (int k = 0; k < 2 * 12; ++k) {
    ids.push_back(std::uniform_int_distribution<int64_t>(0, 66)(test_util::Rng()));
    targets.push_back(std::uniform_int_distribution<int64_t>(0, 66)(test_util::Rng()));
  }
  const Tensor idx = Tensor::from_vector(ids, {2, 12}, device()), tgt = Tensor::from_vector(targets, {2, 12}, device());

  model.eval();
  const Tensor eval_logits = model(idx, tgt).logits;
  EXPECT_EQ(MaxDifference(eval_logits, plain(idx, tgt).logits), 0.0);

  model.train();
  auto forward = compile([&](const Tensor& x, const Tensor& y) {
    const gpt2::GPTOutput out = model(x, y);
    return std::pair{out.logits, out.loss};
  });
  manual_seed(5);
  const gpt2::GPTOutput eager = model(idx, tgt);
  EXPECT_TRUE(std::isfinite(eager.loss.item()));
  EXPECT_GT(MaxDifference(eager.logits, eval_logits), 1e-4);  // masks were drawn
  for (int call = 0; call < 2; ++call) {
    manual_seed(5);
    const auto [logits, loss] = forward(idx, tgt);
    EXPECT_LE(MaxDifference(logits, eager.logits), 1e-4) << "call " << call;
    EXPECT_NEAR(loss.item(), eager.loss.item(), 1e-4) << "call " << call;
  }
  const auto [fresh, fresh_loss] = forward(idx, tgt);  // no manual_seed: other masks
  EXPECT_GT(MaxDifference(fresh, eager.logits), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Gpt2, Gpt2DropoutTest, ::testing::Combine(::testing::Bool(), ::testing::Values(Attention::kSdpa, Attention::kManual)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "Cuda" : "Cpu") +
                                  (std::get<1>(info.param) == Attention::kSdpa ? "Sdpa" : "Manual");
                         });

}  // namespace
}  // namespace fusebox
