// The seed's workloads and the small checks the fusion, codegen, compile and
// GPU tests share: fresh seeds, kernel names, closeness to float64.
#pragma once

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "frontend/fusebox.h"
#include "gtest/gtest.h"

// GPU tests: skip (not fail) where no CUDA device is usable, so CI passes.
#define SKIP_WITHOUT_CUDA() \
  if (!cuda_available()) GTEST_SKIP() << "no usable CUDA device"

namespace fusebox::testing_workloads {

inline Tensor ManualGelu(const Tensor& x) {
  return 0.5 * x * (1.0 + tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * pow(x, 3.0))));
}

inline double GeluRef(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// The seed's softmax written out: max, subtract, exp, sum, divide.
inline Tensor ManualSoftmax(const Tensor& x) {
  Tensor shifted = x - max(x, -1, /*keepdim=*/true);
  Tensor numerator = exp(shifted);
  return numerator / sum(numerator, -1, /*keepdim=*/true);
}

// Row-wise softmax of a rows x cols matrix given row-major, in float64.
inline std::vector<double> SoftmaxRef(const std::vector<double>& x, int64_t rows, int64_t cols) {
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, x[r * cols + c]);
    for (int64_t c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - m);
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = std::exp(x[r * cols + c] - m) / s;
  }
  return out;
}

inline uint64_t FreshSeed() { return std::random_device{}(); }

inline std::vector<std::string> Names(const std::vector<KernelInfo>& kernels) {
  std::vector<std::string> names;
  for (const KernelInfo& k : kernels) names.push_back(k.name);
  return names;
}

// Fails at the first element off by more than tol * (1 + |want|).
inline void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << "first mismatch at element " << i;
  }
}

}  // namespace fusebox::testing_workloads
