// Runs a small compiled function on the CPU through an installed fusebox and
// checks it against std::tanh, under the profiler; prints the fused kernel's
// name. Exit 0 on success.
#include <fusebox/fusebox.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  auto f = fusebox::compile([](const fusebox::Tensor& x) { return fusebox::tanh(x) * x + 1.0; });
  const std::vector<float> xs = {-2.0f, -0.5f, 0.0f, 0.25f, 1.0f, 3.0f};
  fusebox::Tensor x = fusebox::Tensor::from_vector(xs, {2, 3}, fusebox::Device::cpu());
  fusebox::Profiler prof;  // links without the JSON library the Chrome trace is written with
  const std::vector<float> ys = f(x).to_vector();
  prof.stop();
  int bad = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = std::tanh(static_cast<double>(xs[i])) * xs[i] + 1.0;
    if (ys.size() != xs.size() || !(std::abs(ys[i] - want) <= 1e-6)) ++bad;
  }
  if (f.kernels().size() != 1) ++bad;
  if (prof.summary("cpu_time_total").size() != 2) ++bad;  // the graph run and its kernel
  for (const fusebox::KernelInfo& k : f.kernels()) std::printf("kernel: %s (%s)\n", k.name.c_str(), k.device.c_str());
  std::printf("install consumer: %s\n", bad == 0 ? "OK" : "FAILED");
  return bad == 0 ? 0 : 1;
}
