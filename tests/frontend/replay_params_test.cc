// CompileOptions::replay over model code: a compiled function that reads a
// module's parameters through views (linear's w.t(), a broadcast bias, an
// embedding's rows) replays, sees in-place updates of its parameters, and
// never replays stale memory after a parameter is rebound.
#include <cmath>
#include <string>
#include <vector>

#include "frontend/fusebox.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using testing_workloads::ExpectClose;
using testing_workloads::FreshSeed;

// float64 references of the modules' forwards, from their current parameters.
std::vector<double> LinearRef(const Tensor& x, const nn::Linear& lin) {
  const std::vector<double> xs = x.to_double_vector(), w = lin.weight.to_double_vector(),
                            b = lin.bias.to_double_vector();
  const int64_t rows = x.shape()[0], in = x.shape()[1], out = lin.weight.shape()[0];
  std::vector<double> y(rows * out);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double s = b[o];
      for (int64_t i = 0; i < in; ++i) s += xs[r * in + i] * w[o * in + i];
      y[r * out + o] = s;
    }
  }
  return y;
}

std::vector<double> LayerNormRef(const std::vector<double>& x, int64_t cols, const nn::LayerNorm& ln) {
  const std::vector<double> w = ln.weight.to_double_vector(), b = ln.bias.to_double_vector();
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / cols; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mean += x[r * cols + c] / cols;
    for (int64_t c = 0; c < cols; ++c) var += (x[r * cols + c] - mean) * (x[r * cols + c] - mean) / cols;
    for (int64_t c = 0; c < cols; ++c) {
      y[r * cols + c] = (x[r * cols + c] - mean) / std::sqrt(var + ln.eps) * w[c] + b[c];
    }
  }
  return y;
}

// Every parameter of `lin` and `ln` replaced in place by fresh values.
void UpdateInPlace(nn::Linear& lin, nn::LayerNorm& ln) {
  lin.weight.copy_(randn(lin.weight.shape(), Device::cpu(), FreshSeed()));
  lin.bias.copy_(randn(lin.bias.shape(), Device::cpu(), FreshSeed()));
  ln.weight.copy_(randn(ln.weight.shape(), Device::cpu(), FreshSeed()));
  ln.bias.copy_(randn(ln.bias.shape(), Device::cpu(), FreshSeed()));
}

struct Block {
  nn::Linear lin{24, 16, true, Device::cpu(), DType::kFloat32, FreshSeed()};
  nn::LayerNorm ln{16};
  Tensor operator()(const Tensor& x) const { return ln(lin(x)); }
  std::vector<double> Ref(const Tensor& x) const { return LayerNormRef(LinearRef(x, lin), 16, ln); }
};

TEST(ReplayParamsTest, LinearAndLayerNormParametersReplay) {
  Block block;
  // Non-trivial LayerNorm parameters: ones and zeros would hide a wrong read.
  block.ln.weight.copy_(randn({16}, Device::cpu(), FreshSeed()));
  block.ln.bias.copy_(randn({16}, Device::cpu(), FreshSeed()));
  auto f = compile([&block](const Tensor& x) { return block(x); }, {.replay = true});
  for (int i = 0; i < 3; ++i) {
    const Tensor x = randn({10, 24}, Device::cpu(), FreshSeed());
    ExpectClose(f(x).to_vector(), block.Ref(x), 1e-4);
  }
  EXPECT_EQ(f.stats().replays, 1) << f.explain();
  EXPECT_EQ(f.stats().graphs, 2);
  EXPECT_NE(f.explain().find("replay: 1 call(s) replayed"), std::string::npos) << f.explain();
}

// A block's calls until one replays: two traced calls confirm, the third replays.
template <typename F>
void CallUntilReplayed(F& f, const Block& block, int64_t replays_before) {
  for (int i = 0; i < 3; ++i) {
    const Tensor x = randn({10, 24}, Device::cpu(), FreshSeed());
    ExpectClose(f(x).to_vector(), block.Ref(x), 1e-4);
  }
  EXPECT_EQ(f.stats().replays, replays_before + 1) << f.explain();
}

TEST(ReplayParamsTest, EmbeddingParametersReplay) {
  nn::Embedding emb(50, 16, Device::cpu(), DType::kFloat32, FreshSeed());
  nn::Linear head(16, 8, true, Device::cpu(), DType::kFloat32, FreshSeed());
  auto f = compile([&](const Tensor& idx) { return head(emb(idx)); }, {.replay = true});
  const std::vector<int64_t> rows = {3, 49, 0, 3, 17};
  const Tensor idx = Tensor::from_vector(rows, {5});
  for (int i = 0; i < 3; ++i) {
    const Tensor looked_up = index_select(emb.weight, 0, idx);
    ExpectClose(f(idx).to_vector(), LinearRef(looked_up, head), 1e-4);
  }
  EXPECT_EQ(f.stats().replays, 1) << f.explain();
}

TEST(ReplayParamsTest, InPlaceParameterUpdatesAreSeen) {
  Block block;
  auto f = compile([&block](const Tensor& x) { return block(x); }, {.replay = true});
  CallUntilReplayed(f, block, 0);
  UpdateInPlace(block.lin, block.ln);  // an optimizer step: the same memory, new values
  const Tensor x = randn({10, 24}, Device::cpu(), FreshSeed());
  ExpectClose(f(x).to_vector(), block.Ref(x), 1e-4);
  EXPECT_EQ(f.stats().replays, 2) << "still replayed: the parameters are read at run time";
}

TEST(ReplayParamsTest, ReboundParameterTracesAgainAndIsSeen) {
  Block block;
  auto f = compile([&block](const Tensor& x) { return block(x); }, {.replay = true});
  CallUntilReplayed(f, block, 0);
  // Rebound to other memory, the old tensor kept alive: a replay would read it.
  const Tensor old_weight = block.lin.weight;
  block.lin.weight = randn({16, 24}, Device::cpu(), FreshSeed());
  block.ln.bias = randn({16}, Device::cpu(), FreshSeed());
  const Tensor x = randn({10, 24}, Device::cpu(), FreshSeed());
  ExpectClose(f(x).to_vector(), block.Ref(x), 1e-4);
  EXPECT_EQ(f.stats().replays, 1) << "traced: the recorded plan read the old weight";
  EXPECT_NE(f.explain().find("1 dropped (a tensor read from outside the arguments was rebound)"), std::string::npos)
      << f.explain();
  EXPECT_EQ(old_weight.shape(), (Shape{16, 24}));
  // That call read the new parameters; the next one confirms it, then they replay.
  for (int64_t replays : {1, 2, 3}) {
    const Tensor y = randn({10, 24}, Device::cpu(), FreshSeed());
    ExpectClose(f(y).to_vector(), block.Ref(y), 1e-4);
    EXPECT_EQ(f.stats().replays, replays) << f.explain();
  }
}

TEST(ReplayParamsTest, ATensorMadeAnewEachCallIsNamedInExplain) {
  const std::vector<float> values = {0.5f, -1.0f, 2.0f, 3.5f};
  auto f = compile([&values](const Tensor& x) { return x * Tensor::from_vector(values, {4}); }, {.replay = true});
  const Tensor x = randn({4}, Device::cpu(), FreshSeed());
  const std::vector<double> xs = x.to_double_vector();
  std::vector<double> want;
  for (size_t i = 0; i < xs.size(); ++i) want.push_back(xs[i] * values[i]);
  for (int i = 0; i < 3; ++i) ExpectClose(f(x).to_vector(), want, 1e-6);
  EXPECT_EQ(f.stats().replays, 0) << "each call reads other memory: nothing to replay";
  EXPECT_NE(f.explain().find("did not confirm the one before: graph input 1 (Tensor[4] float32 cpu), a tensor read "
                             "from outside the arguments, is other memory"),
            std::string::npos)
      << f.explain();
}

TEST(ReplayParamsTest, ModuleParametersReplayOnTheGpu) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  nn::Linear lin(24, 16, true, gpu, DType::kFloat32, FreshSeed());
  auto f = compile([&lin](const Tensor& x) { return gelu(lin(x), "tanh"); }, {.replay = true});
  for (int i = 0; i < 4; ++i) {
    if (i == 3) lin.weight.copy_(randn({16, 24}, gpu, FreshSeed()));
    const Tensor x = randn({10, 24}, gpu, FreshSeed());
    const nn::Linear host_copy = [&] {
      nn::Linear h(24, 16);
      h.weight = lin.weight.to(Device::cpu());
      h.bias = lin.bias.to(Device::cpu());
      return h;
    }();
    std::vector<double> want = LinearRef(x.to(Device::cpu()), host_copy);
    for (double& v : want) v = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    ExpectClose(f(x).to_vector(), want, 1e-4);
  }
  EXPECT_EQ(f.stats().replays, 2) << f.explain();
}

}  // namespace
}  // namespace fusebox
