// A float64 GPT-2 forward written with plain loops over std::vector<double>
// and no fusebox op, so it checks examples/gpt2 independently: embeddings,
// layer norm, causal attention, tanh gelu, the tied lm_head and the cross
// entropy, from the model's weights as stored (read with to_double_vector()).
// tests/examples/gpt2_test.cc and fusebox_bench's gpt2_forward rows use it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "examples/gpt2/gpt2.h"

namespace fusebox::gpt2_reference {

using Params = std::map<std::string, std::vector<double>>;

// Every parameter of `model`, by its nanoGPT name, as float64 values.
inline Params ReadParams(const gpt2::GPT& model) {
  Params params;
  for (const auto& [name, t] : model.named_parameters()) params[name] = t.to_double_vector();
  return params;
}

// x [rows, in] @ w[out, in]^T (+ b[out] where given) -> [rows, out].
inline std::vector<double> Linear(const std::vector<double>& x, int64_t in, const std::vector<double>& w,
                                  const std::vector<double>* b) {
  const int64_t rows = static_cast<int64_t>(x.size()) / in, out = static_cast<int64_t>(w.size()) / in;
  std::vector<double> y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = b != nullptr ? (*b)[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) acc += x[r * in + i] * w[o * in + i];
      y[r * out + o] = acc;
    }
  }
  return y;
}

// Over each row of `width`, eps 1e-5, times weight (plus bias where given).
inline std::vector<double> LayerNorm(const std::vector<double>& x, int64_t width, const std::vector<double>& w,
                                     const std::vector<double>* b) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size(); r += static_cast<size_t>(width)) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < width; ++c) mean += x[r + c];
    mean /= static_cast<double>(width);
    for (int64_t c = 0; c < width; ++c) var += (x[r + c] - mean) * (x[r + c] - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(width) + 1e-5);
    for (int64_t c = 0; c < width; ++c) y[r + c] = (x[r + c] - mean) * inv * w[c] + (b != nullptr ? (*b)[c] : 0.0);
  }
  return y;
}

inline double GeluTanh(double v) {
  return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
}

struct Output {
  std::vector<double> logits;  // [B, T, vocab]
  double loss = NAN;           // mean cross entropy over targets != -1 (NaN without targets)
};

// The forward of one batch: idx and targets [batch, seq] row-major
// (targets empty: no loss). Every position's logits.
inline Output Forward(const gpt2::GPTConfig& config, const Params& p, const std::vector<int64_t>& idx, int64_t batch,
                      int64_t seq, const std::vector<int64_t>& targets = {}) {
  const int64_t C = config.n_embd, V = config.vocab_size, nh = config.n_head, hs = C / nh;
  FUSEBOX_CHECK(seq <= config.block_size && idx.size() == static_cast<size_t>(batch * seq),
                "the reference takes [batch, seq <= block_size] tokens");
  auto get = [&](const std::string& name) -> const std::vector<double>& { return p.at(name); };
  auto bias = [&](const std::string& name) { return p.contains(name) ? &p.at(name) : nullptr; };
  const std::vector<double>&wte = get("transformer.wte.weight"), &wpe = get("transformer.wpe.weight");
  std::vector<double> x(static_cast<size_t>(batch * seq * C));
  for (int64_t r = 0; r < batch * seq; ++r) {
    for (int64_t c = 0; c < C; ++c) x[r * C + c] = wte[idx[r] * C + c] + wpe[(r % seq) * C + c];
  }
  for (int64_t l = 0; l < config.n_layer; ++l) {
    const std::string n = "transformer.h." + std::to_string(l) + ".";
    // Attention: each head's queries over the keys at or before them.
    const std::vector<double> qkv =
        Linear(LayerNorm(x, C, get(n + "ln_1.weight"), bias(n + "ln_1.bias")), C, get(n + "attn.c_attn.weight"),
               bias(n + "attn.c_attn.bias"));
    std::vector<double> y(x.size(), 0.0);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < nh; ++h) {
        auto at = [&](int64_t t, int64_t part, int64_t d) { return qkv[((b * seq + t) * 3 + part) * C + h * hs + d]; };
        for (int64_t i = 0; i < seq; ++i) {
          std::vector<double> w(static_cast<size_t>(i + 1));
          double top = -std::numeric_limits<double>::infinity(), total = 0;
          for (int64_t j = 0; j <= i; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < hs; ++d) dot += at(i, 0, d) * at(j, 1, d);
            w[j] = dot / std::sqrt(static_cast<double>(hs));
            top = std::max(top, w[j]);
          }
          for (double& v : w) total += v = std::exp(v - top);
          for (int64_t d = 0; d < hs; ++d) {
            double acc = 0;
            for (int64_t j = 0; j <= i; ++j) acc += w[j] / total * at(j, 2, d);
            y[(b * seq + i) * C + h * hs + d] = acc;
          }
        }
      }
    }
    const std::vector<double> attn = Linear(y, C, get(n + "attn.c_proj.weight"), bias(n + "attn.c_proj.bias"));
    for (size_t i = 0; i < x.size(); ++i) x[i] += attn[i];
    // MLP.
    std::vector<double> hidden = Linear(LayerNorm(x, C, get(n + "ln_2.weight"), bias(n + "ln_2.bias")), C,
                                        get(n + "mlp.c_fc.weight"), bias(n + "mlp.c_fc.bias"));
    for (double& v : hidden) v = GeluTanh(v);
    const std::vector<double> mlp = Linear(hidden, 4 * C, get(n + "mlp.c_proj.weight"), bias(n + "mlp.c_proj.bias"));
    for (size_t i = 0; i < x.size(); ++i) x[i] += mlp[i];
  }
  Output out;
  out.logits = Linear(LayerNorm(x, C, get("transformer.ln_f.weight"), bias("transformer.ln_f.bias")), C, wte, nullptr);
  if (targets.empty()) return out;
  double total = 0;
  int64_t counted = 0;
  for (int64_t r = 0; r < batch * seq; ++r) {
    if (targets[r] == -1) continue;
    const double* row = &out.logits[r * V];
    double top = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t v = 0; v < V; ++v) top = std::max(top, row[v]);
    for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - top);
    total += top + std::log(sum) - row[targets[r]];
    ++counted;
  }
  out.loss = total / static_cast<double>(counted);
  return out;
}

}  // namespace fusebox::gpt2_reference
