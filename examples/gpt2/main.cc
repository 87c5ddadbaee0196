// gpt2: nanoGPT's GPT-2 small in fusebox, end to end. Builds the model on
// the default device (a GPU when there is one), compiles its forward with
// the loss, prints how many kernels a forward takes and the first-call and
// warm times, then generates a few tokens with a tiny model.
//   gpt2 [--manual] [--bf16] [--batch B] [--seq T] [--device cpu|cuda]
// --manual: attention written out (masked_fill, softmax) instead of SDPA.
// Default sizes: B 8, T 1024 on a GPU; B 1, T 64 on the CPU (GPT-2 small's
// forward at B 8, T 1024 is ~0.9 TFLOP: minutes on a small CPU).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "examples/gpt2/gpt2.h"

namespace {

using fusebox::Device;
using fusebox::DType;
using fusebox::Tensor;
namespace gpt2 = fusebox::gpt2;

struct Options {
  bool manual = false, bf16 = false;
  int64_t batch = 0, seq = 0;  // 0: the device's default
  Device device = Device::default_device();
};

int Usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--manual] [--bf16] [--batch B] [--seq T] [--device cpu|cuda]\n", argv0);
  return 2;
}

// Host time of fn(), the device synchronized before and after.
template <typename Fn>
double TimeMs(Device device, Fn fn) {
  fusebox::synchronize(device);
  const auto start = std::chrono::steady_clock::now();
  fn();
  fusebox::synchronize(device);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Random token ids in [0, vocab), [batch, seq], from `seed`.
Tensor RandomTokens(int64_t batch, int64_t seq, int64_t vocab, Device device, uint64_t seed) {
  const std::vector<float> u = fusebox::rand({batch * seq}, Device::cpu(), seed).to_vector();
  std::vector<int64_t> ids;
  for (float v : u) ids.push_back(std::min<int64_t>(vocab - 1, static_cast<int64_t>(v * static_cast<float>(vocab))));
  return Tensor::from_vector(ids, {batch, seq}, device);
}

int Run(const Options& o) {
  gpt2::GPTConfig config;  // GPT-2 small: 12 layers, 12 heads, 768 wide, vocab 50304
  config.attention = o.manual ? gpt2::Attention::kManual : gpt2::Attention::kSdpa;
  const DType dtype = o.bf16 ? DType::kBFloat16 : DType::kFloat32;
  const int64_t batch = o.batch > 0 ? o.batch : (o.device.is_cuda() ? 8 : 1);
  const int64_t seq = o.seq > 0 ? o.seq : (o.device.is_cuda() ? 1024 : 64);

  std::printf("GPT-2 small on %s, %s, %s attention, B %lld, T %lld\n", o.device.str().c_str(),
              fusebox::DTypeName(dtype), o.manual ? "manual" : "SDPA", static_cast<long long>(batch),
              static_cast<long long>(seq));
  const auto built = std::chrono::steady_clock::now();
  const gpt2::GPT model(config, o.device, dtype, /*seed=*/1337);
  std::printf("  %.2fM parameters, built in %.1f s\n", static_cast<double>(model.num_parameters()) / 1e6,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - built).count());

  const Tensor idx = RandomTokens(batch, seq, config.vocab_size, o.device, 1);
  const Tensor targets = RandomTokens(batch, seq, config.vocab_size, o.device, 2);
  auto forward = fusebox::compile([&](const Tensor& x, const Tensor& y) { return model(x, y).loss; });
  Tensor loss;
  const double first_ms = TimeMs(o.device, [&] { loss = forward(idx, targets); });
  const fusebox::CompileTimes& t = forward.stats().times;
  std::printf("  compiled forward + loss: %zu kernels; first call %.1f ms (%lld kernel compiles; plan %.0f,"
              " codegen %.0f, compilers %.0f, load %.0f ms), loss %.4f (ln(vocab) = %.4f at init)\n",
              forward.kernels().size(), first_ms, static_cast<long long>(forward.stats().kernel_compiles), t.plan_ms,
              t.codegen_ms, t.compile_ms, t.load_ms, loss.item(), std::log(static_cast<double>(config.vocab_size)));
  auto again = fusebox::compile([&](const Tensor& x, const Tensor& y) { return model(x, y).loss; });
  const double warm_start_ms = TimeMs(o.device, [&] { (void)again(idx, targets); });
  std::vector<double> warm;
  for (int i = 0; i < (o.device.is_cuda() ? 10 : 3); ++i) {
    warm.push_back(TimeMs(o.device, [&] { (void)forward(idx, targets); }));
  }
  std::sort(warm.begin(), warm.end());
  const double eager_ms = TimeMs(o.device, [&] { (void)model(idx, targets).loss.item(); });
  std::printf("  warm start (a new compile(), plan from the cache) %.1f ms; warm call median %.2f ms; eager %.1f ms\n",
              warm_start_ms, warm[warm.size() / 2], eager_ms);

  // Generation with a tiny model: a few tokens, top-k sampling on the host.
  gpt2::GPTConfig tiny{.block_size = 16, .vocab_size = 67, .n_layer = 2, .n_head = 2, .n_embd = 32};
  const gpt2::GPT small(tiny, o.device, DType::kFloat32, /*seed=*/7);
  const Tensor prompt = RandomTokens(1, 4, tiny.vocab_size, o.device, 3);
  auto logits = fusebox::compile([&](const Tensor& x) { return small(x).logits; });
  const Tensor out = small.generate(prompt, 8, /*temperature=*/0.8, /*top_k=*/10, /*seed=*/0,
                                    [&](const Tensor& x) { return logits(x); });
  std::printf("  generate (tiny model: 2 layers, 32 wide, vocab 67): 4 prompt + 8 new tokens:");
  for (float t : out.to_vector()) std::printf(" %d", static_cast<int>(t));
  std::printf("\n  its compiled logits: %lld plan compiles over 8 steps (T grows by one per step)\n",
              static_cast<long long>(logits.stats().plan_compiles));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--manual") {
      o.manual = true;
    } else if (arg == "--bf16") {
      o.bf16 = true;
    } else if ((arg == "--batch" || arg == "--seq") && i + 1 < argc) {
      (arg == "--batch" ? o.batch : o.seq) = std::atoll(argv[++i]);
    } else if (arg == "--device" && i + 1 < argc) {
      const std::string d = argv[++i];
      if (d != "cpu" && d != "cuda") return Usage(argv[0]);
      o.device = d == "cpu" ? Device::cpu() : Device::cuda(0);
    } else {
      return Usage(argv[0]);
    }
  }
  try {
    return Run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt2: %s\n", e.what());
    return 1;
  }
}
