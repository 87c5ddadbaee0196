#include "bench/workloads.h"

#include <algorithm>
#include <cmath>
#include <span>

namespace fusebox::bench {
namespace {

constexpr double kLayerNormEps = 1e-5;  // torch.nn.functional.layer_norm's default
constexpr double kRmsNormEps = 1e-6;    // given to F.rms_norm explicitly by compare_torch.py

// --- the workloads, op by op

Tensor ManualGelu(const Tensor& x) {
  return 0.5 * x * (1.0 + tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * pow(x, 3.0))));
}

Tensor AddMulTanh(const Tensor& a, const Tensor& b, const Tensor& c) { return tanh((a + b) * c); }

Tensor ManualSoftmax(const Tensor& x) {
  Tensor shifted = x - max(x, -1, /*keepdim=*/true);
  Tensor numerator = exp(shifted);
  return numerator / sum(numerator, -1, /*keepdim=*/true);
}

Tensor ManualLayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  Tensor centered = x - mean(x, -1, /*keepdim=*/true);
  Tensor var = mean(centered * centered, -1, /*keepdim=*/true);
  return centered * rsqrt(var + kLayerNormEps) * weight + bias;
}

Tensor ManualRmsNorm(const Tensor& x, const Tensor& weight) {
  return x * rsqrt(mean(x * x, -1, /*keepdim=*/true) + kRmsNormEps) * weight;
}

Tensor RowSum(const Tensor& x) { return sum(x, -1); }
Tensor ColSum(const Tensor& x) { return sum(x, 0); }

Tensor GemmBiasGelu(const Tensor& x, const Tensor& w, const Tensor& b) { return gelu(matmul(x, w) + b, "tanh"); }
Tensor GemmAlone(const Tensor& x, const Tensor& w, const Tensor&) { return matmul(x, w); }

// [T, B, H, E] -> [B, H, T, E], a view; and back.
Tensor HeadsFirst(const Tensor& x) { return x.permute({1, 2, 0, 3}); }
Tensor SeqFirst(const Tensor& y) { return y.permute({2, 0, 1, 3}); }
Tensor Attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  return SeqFirst(scaled_dot_product_attention(HeadsFirst(q), HeadsFirst(k), HeadsFirst(v)));
}
Tensor AttentionCausal(const Tensor& q, const Tensor& k, const Tensor& v) {
  return SeqFirst(scaled_dot_product_attention(HeadsFirst(q), HeadsFirst(k), HeadsFirst(v), Tensor(), 0.0, true));
}

Tensor Layer(const Tensor& stacked, int64_t l) { return stacked.narrow(0, l, 1).squeeze(0); }

// nn::MLP's forward with its parameters stacked, so that they are inputs.
Tensor Mlp(const Tensor& x, const Tensor& weights, const Tensor& biases) {
  Tensor y = x;
  for (int64_t l = 0; l < weights.size(0); ++l) y = gelu(linear(y, Layer(weights, l), Layer(biases, l)));
  return y;
}
Tensor MlpGemms(const Tensor& x, const Tensor& weights, const Tensor&) {
  Tensor y = x;
  for (int64_t l = 0; l < weights.size(0); ++l) y = linear(y, Layer(weights, l));
  return y;
}

// --- float64 references

double GeluAt(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

std::vector<double> GeluRef(const std::vector<std::vector<double>>& in, const Shape&) {
  std::vector<double> out;
  out.reserve(in[0].size());
  for (double v : in[0]) out.push_back(GeluAt(v));
  return out;
}

std::vector<double> AddMulTanhRef(const std::vector<std::vector<double>>& in, const Shape&) {
  std::vector<double> out(in[0].size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = std::tanh((in[0][i] + in[1][i]) * in[2][i]);
  return out;
}

// Calls row_fn(row, out_row) for each row of the last dim of `x`; the output
// has x's shape.
template <typename RowFn>
std::vector<double> MapRows(const std::vector<double>& x, const Shape& shape, RowFn row_fn) {
  const size_t cols = static_cast<size_t>(shape.back());
  std::vector<double> out(x.size());
  for (size_t start = 0; start < x.size(); start += cols) {
    row_fn(std::span<const double>(&x[start], cols), std::span<double>(&out[start], cols));
  }
  return out;
}

double Mean(std::span<const double> row) {
  double s = 0;
  for (double v : row) s += v;
  return s / static_cast<double>(row.size());
}

std::vector<double> SoftmaxRef(const std::vector<std::vector<double>>& in, const Shape& shape) {
  return MapRows(in[0], shape, [](std::span<const double> row, std::span<double> out) {
    double m = -INFINITY, s = 0;
    for (double v : row) m = std::max(m, v);
    for (double v : row) s += std::exp(v - m);
    for (size_t c = 0; c < row.size(); ++c) out[c] = std::exp(row[c] - m) / s;
  });
}

std::vector<double> LayerNormRef(const std::vector<std::vector<double>>& in, const Shape& shape) {
  const std::vector<double>&weight = in[1], &bias = in[2];
  return MapRows(in[0], shape, [&](std::span<const double> row, std::span<double> out) {
    const double mean = Mean(row);
    double var = 0;
    for (double v : row) var += (v - mean) * (v - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(row.size()) + kLayerNormEps);
    for (size_t c = 0; c < row.size(); ++c) out[c] = (row[c] - mean) * inv * weight[c] + bias[c];
  });
}

std::vector<double> RmsNormRef(const std::vector<std::vector<double>>& in, const Shape& shape) {
  const std::vector<double>& weight = in[1];
  return MapRows(in[0], shape, [&](std::span<const double> row, std::span<double> out) {
    double sq = 0;
    for (double v : row) sq += v * v;
    const double inv = 1.0 / std::sqrt(sq / static_cast<double>(row.size()) + kRmsNormEps);
    for (size_t c = 0; c < row.size(); ++c) out[c] = row[c] * inv * weight[c];
  });
}

std::vector<double> RowSumRef(const std::vector<std::vector<double>>& in, const Shape& shape) {
  const size_t cols = static_cast<size_t>(shape.back());
  std::vector<double> out(in[0].size() / cols, 0.0);
  for (size_t i = 0; i < in[0].size(); ++i) out[i / cols] += in[0][i];
  return out;
}

std::vector<double> ColSumRef(const std::vector<std::vector<double>>& in, const Shape& shape) {
  const size_t cols = static_cast<size_t>(shape.back());
  std::vector<double> out(cols, 0.0);
  for (size_t i = 0; i < in[0].size(); ++i) out[i % cols] += in[0][i];
  return out;
}

// y[r, :] = x[r, :] @ w (+ b): x [rows, k] row-major, w [k, n] read as
// w[i * k_stride + j * n_stride].
std::vector<double> MatMulRows(const std::vector<double>& x, size_t k, const double* w, size_t n, size_t k_stride,
                               size_t n_stride, const double* b) {
  const size_t rows = x.size() / k;
  std::vector<double> y(rows * n, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double* out = &y[r * n];
    for (size_t i = 0; i < k; ++i) {
      const double xv = x[r * k + i];
      for (size_t j = 0; j < n; ++j) out[j] += xv * w[i * k_stride + j * n_stride];
    }
    if (b != nullptr) {
      for (size_t j = 0; j < n; ++j) out[j] += b[j];
    }
  }
  return y;
}

std::vector<double> GemmBiasGeluRef(const std::vector<std::vector<double>>& in, const Shape& shape) {
  const size_t k = static_cast<size_t>(shape.back()), n = in[2].size();
  std::vector<double> y = MatMulRows(in[0], k, in[1].data(), n, n, 1, in[2].data());
  for (double& v : y) v = GeluAt(v);
  return y;
}

std::vector<double> MlpRef(const std::vector<std::vector<double>>& in, const Shape& shape) {
  const size_t dim = static_cast<size_t>(shape.back()), layers = in[2].size() / dim;
  std::vector<double> y = in[0];
  for (size_t l = 0; l < layers; ++l) {
    // weight [out, in]: y @ weight^T reads weight[j, i] = w[j * dim + i].
    y = MatMulRows(y, dim, &in[1][l * dim * dim], dim, 1, dim, &in[2][l * dim]);
    for (double& v : y) v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  }
  return y;
}

// Queries [start, start + len) of a slice: q [len, B, H, E], k and v [T, B, H, E].
std::vector<double> AttentionRows(const std::vector<std::vector<double>>& in, const Shape& shape, int64_t start,
                                  bool causal) {
  const int64_t len = shape[0], heads = shape[1] * shape[2], e = shape[3], t = static_cast<int64_t>(in[1].size()) / (heads * e);
  const double scale = 1.0 / std::sqrt(static_cast<double>(e));
  std::vector<double> out(in[0].size()), p(t);
  for (int64_t r = 0; r < len; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      const double* q = &in[0][(r * heads + h) * e];
      const int64_t keys = causal ? std::min(t, start + r + 1) : t;
      double top = -INFINITY, total = 0;
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < e; ++c) dot += q[c] * in[1][(j * heads + h) * e + c];
        top = std::max(top, p[j] = dot * scale);
      }
      for (int64_t j = 0; j < keys; ++j) total += p[j] = std::exp(p[j] - top);
      double* o = &out[(r * heads + h) * e];
      for (int64_t j = 0; j < keys; ++j) {
        for (int64_t c = 0; c < e; ++c) o[c] += p[j] / total * in[2][(j * heads + h) * e + c];
      }
    }
  }
  return out;
}
std::vector<double> AttentionRef(const std::vector<std::vector<double>>& in, const Shape& shape, int64_t start) {
  return AttentionRows(in, shape, start, false);
}
std::vector<double> AttentionCausalRef(const std::vector<std::vector<double>>& in, const Shape& shape, int64_t start) {
  return AttentionRows(in, shape, start, true);
}

double GemmFlops(const Shape& s) { return 2.0 * static_cast<double>(s[0]) * static_cast<double>(s[1]) * static_cast<double>(s[2]); }
double MlpFlops(const Shape& s) { return GemmFlops({s[0], s[1], s[1]}) * static_cast<double>(s[2]); }

double AttentionFlops(const Shape& s) {
  return 4.0 * static_cast<double>(s[1] * s[2]) * static_cast<double>(s[0]) * static_cast<double>(s[0]) *
         static_cast<double>(s[3]);
}
// Causal: the queries see half the keys on average (the convention FlashAttention and PyTorch's benchmarks use).
double AttentionCausalFlops(const Shape& s) { return AttentionFlops(s) / 2; }

using enum InputRole;

const Workload kGemmAlone{"gemm", "x @ w", GemmAlone, {kRows, kWeight, kBias}, nullptr, 0, 1, GemmFlops};
const Workload kMlpGemms{"mlp_gemms", "x = linear(x, w[l]) per layer", MlpGemms, {kRows, kLayerWeights, kLayerBiases},
                         nullptr, 0, 0, MlpFlops};

}  // namespace

const Workload kManualGelu{"manual_gelu", "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))",
                           ManualGelu, {kFull}, GeluRef};
const Workload kAddMulTanh{"add_mul_tanh", "tanh((a + b) * c)", AddMulTanh, {kFull, kFull, kFull}, AddMulTanhRef};
const Workload kManualSoftmax{"manual_softmax", "e = exp(x - max(x, -1)); e / sum(e, -1)", ManualSoftmax, {kFull},
                              SoftmaxRef};
const Workload kManualLayerNorm{"manual_layer_norm", "(x - mean) rsqrt(var + 1e-5) w + b over the last dim",
                                ManualLayerNorm, {kFull, kLastDim, kLastDim}, LayerNormRef};
const Workload kManualRmsNorm{"manual_rms_norm", "x rsqrt(mean(x^2, -1) + 1e-6) w", ManualRmsNorm,
                              {kFull, kLastDim}, RmsNormRef};
const Workload kRowSum{"row_sum", "sum(x, -1)", RowSum, {kFull}, RowSumRef};
const Workload kColSum{"col_sum", "sum(x, 0)", ColSum, {kFull}, ColSumRef, /*sample_dim=*/1};
// Without epilogue fusion: the GEMM, then one kernel for the bias and gelu.
const Workload kGemmBiasGelu{"gemm_bias_gelu", "gelu(x @ w + b, tanh)", GemmBiasGelu, {kRows, kWeight, kBias},
                             GemmBiasGeluRef, 0, /*fused_kernels=*/2, GemmFlops, &kGemmAlone};
// A GEMM per layer, then one kernel for its bias and (exact) gelu.
const Workload kMlp{"mlp", "x = gelu(x @ w[l]^T + b[l]) per layer", Mlp, {kRows, kLayerWeights, kLayerBiases}, MlpRef,
                    0, /*fused_kernels=*/0, MlpFlops, &kMlpGemms, /*check_rows=*/8};

// One kernel (compiled and eager alike); 4 query rows a slice keep the float64 check short.
const Workload kAttention{"attention", "sdpa(q, k, v) over [T, B, H, E] viewed as [B, H, T, E]", Attention,
                          {kFull, kKeys, kKeys}, nullptr, 0, 1, AttentionFlops, nullptr, /*check_rows=*/4,
                          AttentionRef};
const Workload kAttentionCausal{"attention_causal", "sdpa(q, k, v, is_causal) over [T, B, H, E]", AttentionCausal,
                                {kFull, kKeys, kKeys}, nullptr, 0, 1, AttentionCausalFlops, nullptr,
                                /*check_rows=*/4, AttentionCausalRef};

std::vector<Shape> InputShapes(const Workload& w, const Shape& s) {
  std::vector<Shape> shapes;
  for (InputRole role : w.inputs) {
    switch (role) {
      case kFull: shapes.push_back(s); break;
      case kLastDim: shapes.push_back({s.back()}); break;
      case kRows: shapes.push_back({s[0], s[1]}); break;
      case kWeight: shapes.push_back({s[1], s[2]}); break;
      case kBias: shapes.push_back({s[2]}); break;
      case kLayerWeights: shapes.push_back({s[2], s[1], s[1]}); break;
      case kLayerBiases: shapes.push_back({s[2], s[1]}); break;
      case kKeys: shapes.push_back(s); break;
    }
  }
  return shapes;
}

std::vector<double> InputScales(const Workload& w, const Shape& s) {
  std::vector<double> scales;
  for (InputRole role : w.inputs) {
    // Layer weights by sqrt(2 / dim), as He initialization: gelu halves the
    // variance, so 16 layers neither vanish nor blow up.
    const double scale = role == kWeight         ? 1.0 / std::sqrt(static_cast<double>(s[1]))
                         : role == kLayerWeights ? std::sqrt(2.0 / static_cast<double>(s[1]))
                         : role == kLayerBiases  ? 0.1
                                                 : 1.0;
    scales.push_back(scale);
  }
  return scales;
}

}  // namespace fusebox::bench
