// The benchmark's workloads: each a fusebox function written out op by op (as
// the seed writes manual_gelu and manual_softmax), the inputs it takes and a
// float64 reference. bench/compare_torch.py defines the same functions in
// PyTorch under the same names: change both together.
#pragma once

#include <cstdint>
#include <utility>
#include <variant>
#include <vector>

#include "frontend/fusebox.h"

namespace fusebox::bench {

// How an input's shape follows from the shape of a case. Memory-bound
// workloads: the whole shape, or its last dim (a layer_norm weight or bias).
// Matmul workloads name their sizes in the case's shape, [m, k, n] for a
// GEMM and [batch, dim, layers] for an MLP: kRows is the [m, k] ([batch,
// dim]) matrix of rows; kWeight [k, n] and kBias [n]; kLayerWeights
// [layers, dim, dim] (each layer's [out, in], as nn.Linear) and kLayerBiases
// [layers, dim]. kFull and kRows are sliced by the float64 check. kKeys is
// the whole shape, never sliced (attention's keys and values, which every
// query reads).
enum class InputRole { kFull, kLastDim, kRows, kWeight, kBias, kLayerWeights, kLayerBiases, kKeys };

using Fn1 = Tensor (*)(const Tensor&);
using Fn2 = Tensor (*)(const Tensor&, const Tensor&);
using Fn3 = Tensor (*)(const Tensor&, const Tensor&, const Tensor&);
using WorkloadFn = std::variant<Fn1, Fn2, Fn3>;

// The float64 reference of a slice of the output. `inputs` holds each input as
// stored (bf16 values as rounded), kFull ones narrowed to the slice (`shape`
// is the slice's shape); the result is the output narrowed the same way along
// its dim 0.
using Reference = std::vector<double> (*)(const std::vector<std::vector<double>>& inputs, const Shape& shape);
// The same for a slice that starts at position `start` (causal attention's query index).
using ReferenceAt = std::vector<double> (*)(const std::vector<std::vector<double>>& inputs, const Shape& shape,
                                            int64_t start);

struct Workload {
  const char* name;     // "manual_softmax": compare_torch.py looks the PyTorch version up by it
  const char* formula;  // what it computes, for the printed header
  WorkloadFn fn;
  std::vector<InputRole> inputs;
  Reference reference;
  // The input dim the reference check takes its slices along; the output's
  // dim 0 is the same positions (1 for a column sum, else 0).
  int sample_dim = 0;
  int fused_kernels = 1;  // what compile() should make of it; more fails the check
  // Matmul workloads: FLOPs of one call (the GEMMs'), and the same GEMMs
  // alone on the same inputs (the baseline the issue measures against).
  double (*flops)(const Shape& shape) = nullptr;
  const Workload* gemms = nullptr;
  // Rows per slice the float64 check reads (0: about 64K elements' worth).
  int64_t check_rows = 0;
  // Used instead of `reference` where set.
  ReferenceAt reference_at = nullptr;
};

extern const Workload kManualGelu;       // 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))
extern const Workload kAddMulTanh;       // tanh((a + b) * c)
extern const Workload kManualSoftmax;    // the seed's: max, sub, exp, sum, div over the last dim
extern const Workload kManualLayerNorm;  // over the last dim, eps 1e-5, times weight plus bias
extern const Workload kManualRmsNorm;    // x rsqrt(mean(x^2) + 1e-6) times weight
extern const Workload kRowSum;           // sum over the last dim
extern const Workload kColSum;           // sum over dim 0
extern const Workload kGemmBiasGelu;     // gelu(x @ w + b, tanh), inputs [m, k], [k, n], [n]
extern const Workload kMlp;              // the seed's MLP: per layer x = gelu(linear(x, w[l], b[l]))
// scaled_dot_product_attention over sequence-first [T, B, H, E] q, k, v (as
// nn.MultiheadAttention lays them out), read as [B, H, T, E] views, the result
// viewed back to [T, B, H, E]; case shape [T, B, H, E]; FLOPs 4 B H T^2 E.
extern const Workload kAttention;
extern const Workload kAttentionCausal;  // the same, causal (half the FLOPs)

namespace internal {
template <typename F>
struct Arity;
template <typename... Args>
struct Arity<Tensor (*)(Args...)> : std::integral_constant<size_t, sizeof...(Args)> {};
template <typename Fn>
struct Arity<CompiledFunction<Fn>> : Arity<Fn> {};

template <typename F, size_t... I>
Tensor Call(F& f, const std::vector<Tensor>& in, std::index_sequence<I...>) {
  FUSEBOX_CHECK(in.size() == sizeof...(I), "the workload takes ", sizeof...(I), " inputs, got ", in.size());
  return f(in[I]...);
}
// Calls `f` (a workload function or its compiled form) with `in`.
template <typename F>
Tensor Call(F& f, const std::vector<Tensor>& in) {
  return Call(f, in, std::make_index_sequence<Arity<F>::value>());
}
}  // namespace internal

// Calls `fn` eagerly with `inputs` (as many as it takes).
inline Tensor Invoke(const WorkloadFn& fn, const std::vector<Tensor>& inputs) {
  return std::visit([&](auto f) { return internal::Call(f, inputs); }, fn);
}

// compile() of a workload's function, called with a vector of inputs.
class CompiledWorkload {
 public:
  explicit CompiledWorkload(const WorkloadFn& fn, CompileOptions options = {})
      : fn_(std::visit([&options](auto f) -> Variant { return compile(f, options); }, fn)) {}
  Tensor operator()(const std::vector<Tensor>& inputs) {
    return std::visit([&](auto& f) { return internal::Call(f, inputs); }, fn_);
  }
  // The kernels the last call launched.
  std::vector<KernelInfo> kernels() const {
    return std::visit([](const auto& f) { return f.kernels(); }, fn_);
  }
  CompileStats stats() const {
    return std::visit([](const auto& f) { return f.stats(); }, fn_);
  }

 private:
  using Variant = std::variant<CompiledFunction<Fn1>, CompiledFunction<Fn2>, CompiledFunction<Fn3>>;
  Variant fn_;
};

// The shape of each input of `w` for a case of shape `shape`.
std::vector<Shape> InputShapes(const Workload& w, const Shape& shape);
// What each input's randn values are scaled by: weights by about
// 1/sqrt(fan in) so that values stay near 1 through the layers, else 1.
std::vector<double> InputScales(const Workload& w, const Shape& shape);
// Whether the float64 check slices this input along the workload's sample dim.
inline bool Sliced(InputRole role) { return role == InputRole::kFull || role == InputRole::kRows; }

}  // namespace fusebox::bench
