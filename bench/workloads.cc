#include "bench/workloads.h"

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

using enum InputRole;

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

std::vector<Shape> InputShapes(const Workload& w, const Shape& shape) {
  std::vector<Shape> shapes;
  for (InputRole role : w.inputs) shapes.push_back(role == kFull ? shape : Shape{shape.back()});
  return shapes;
}

}  // namespace fusebox::bench
