// A float64 reference of scaled_dot_product_attention and its tolerance,
// shared by the decomposition's tests (attention_test.cc) and the fused
// kernel's (flash_attention_test.cc).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "frontend/fusebox.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace fusebox::test_util {

// Attention over [batch, L, E] x [batch, S, E] x [batch, S, Ev] (batch dims
// flattened, equal on all three). `allowed(b, i, j)` and `bias(b, i, j)`
// give the mask; a row with no allowed key is NaN.
template <typename Allowed, typename Bias>
Expected AttentionRef(const Tensor& q, const Tensor& k, const Tensor& v, double scale, Allowed allowed, Bias bias) {
  const int64_t l = q.shape()[q.dim() - 2], e = q.shape().back(), s = k.shape()[k.dim() - 2], ev = v.shape().back();
  const int64_t batch = q.numel() / (l * e);
  const std::vector<double> qv = q.to_double_vector(), kv = k.to_double_vector(), vv = v.to_double_vector();
  Shape shape = q.shape();
  shape.back() = ev;
  Expected out{.shape = shape, .dtype = q.dtype()};
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < l; ++i) {
      std::vector<double> p(s, -std::numeric_limits<double>::infinity());
      double top = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < s; ++j) {
        if (!allowed(b, i, j)) continue;
        double dot = 0;
        for (int64_t c = 0; c < e; ++c) dot += qv[(b * l + i) * e + c] * kv[(b * s + j) * e + c];
        p[j] = dot * scale + bias(b, i, j);
        top = std::max(top, p[j]);
      }
      double total = 0;
      for (double& x : p) total += x = std::exp(x - top);
      for (int64_t c = 0; c < ev; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < s; ++j) acc += p[j] / total * vv[(b * s + j) * ev + c];
        out.values.push_back(RoundTo(q.dtype(), acc));
      }
    }
  }
  return out;
}

// Looser than one rounding: two GEMMs and a softmax, each rounded to the dtype.
inline ::testing::AssertionResult CloseToAttention(const Tensor& got, const Expected& want, const std::string& what) {
  if (got.shape() != want.shape || got.dtype() != want.dtype) return AllClose(got, want, what);
  const double atol = got.dtype() == DType::kFloat32 ? 1e-5 : 2e-2,
               rtol = got.dtype() == DType::kFloat32 ? 1e-4 : 3e-2;
  const std::vector<double> g = got.to_double_vector();
  for (size_t i = 0; i < g.size(); ++i) {
    const double w = want.values[i];
    if (std::isnan(w) != std::isnan(g[i]) || (!std::isnan(w) && std::fabs(g[i] - w) > atol + rtol * std::fabs(w))) {
      return ::testing::AssertionFailure() << what << ": element " << i << " is " << g[i] << ", expected " << w;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace fusebox::test_util
