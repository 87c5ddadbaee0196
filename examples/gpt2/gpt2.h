// GPT-2 as nanoGPT's model.py writes it, in fusebox's C++ API: the model a
// user would port first, so it shows what fusebox makes of a whole
// transformer forward (the kernels per forward, the first-call and warm
// times) and is the workload of fusebox_bench's gpt2_forward rows and of
// tests/examples/gpt2_test.cc. Modules are plain structs of tensors, as
// frontend/nn.h's; wrap a forward in compile() to fuse it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "frontend/fusebox.h"

namespace fusebox::gpt2 {

// How CausalSelfAttention computes attention: nanoGPT's flash path
// (scaled_dot_product_attention with is_causal) or its slow path, written
// out as users write it (q @ k^T * scale, masked_fill with a tril mask,
// softmax, @ v).
enum class Attention { kSdpa, kManual };

struct GPTConfig {
  int64_t block_size = 1024;
  int64_t vocab_size = 50304;  // GPT-2's 50257 padded up to a multiple of 64, as nanoGPT
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_embd = 768;
  double dropout = 0.0;  // nanoGPT's dropout: attention weights, residuals, embeddings (in training)
  bool bias = true;      // in the Linears and LayerNorms, as GPT-2
  Attention attention = Attention::kSdpa;
};

// Deterministic parameter init, nanoGPT's: N(0, 0.02) for Linear and
// Embedding weights, N(0, 0.02 / sqrt(2 n_layer)) for the c_proj weights,
// zero biases; each parameter drawn from its own seed.
class Init {
 public:
  Init(uint64_t seed, Device device, DType dtype) : seed_(seed), device_(device), dtype_(dtype) {}
  Tensor Normal(const Shape& shape, double std);
  Tensor Zeros(const Shape& shape) const { return zeros(shape, device_, dtype_); }
  Device device() const { return device_; }
  DType dtype() const { return dtype_; }

 private:
  uint64_t seed_;
  Device device_;
  DType dtype_;
};

struct CausalSelfAttention {
  CausalSelfAttention(const GPTConfig& config, Init& init);
  Tensor operator()(const Tensor& x) const;  // [B, T, C] -> [B, T, C]

  nn::Linear c_attn;  // C -> 3C: q, k, v
  nn::Linear c_proj;  // C -> C
  // Attention::kManual: nanoGPT's `bias` buffer, tril(ones(block_size,
  // block_size)); a key is masked where it is 0.
  Tensor mask;
  int64_t n_head, n_embd;
  Attention attention;
  // nanoGPT's: on the attention weights (Attention::kSdpa: SDPA's dropout_p
  // while training) and after c_proj.
  nn::Dropout attn_dropout, resid_dropout;
};

struct MLP {
  MLP(const GPTConfig& config, Init& init);
  Tensor operator()(const Tensor& x) const { return dropout(c_proj(gelu(c_fc(x), "tanh"))); }

  nn::Linear c_fc;    // C -> 4C
  nn::Linear c_proj;  // 4C -> C
  nn::Dropout dropout;
};

struct Block {
  Block(const GPTConfig& config, Init& init);
  Tensor operator()(const Tensor& x) const;

  nn::LayerNorm ln_1;
  CausalSelfAttention attn;
  nn::LayerNorm ln_2;
  MLP mlp;
};

// What forward returns, as nanoGPT's (logits, loss): with targets, logits
// [B, T, vocab] and the mean cross entropy (targets of -1 ignored); without,
// logits of the last position only, [B, 1, vocab], and an undefined loss.
struct GPTOutput {
  Tensor logits, loss;
};

class GPT {
 public:
  // Parameters concrete on `device` in `dtype`, drawn from `seed`.
  GPT(GPTConfig config, Device device = Device::cpu(), DType dtype = DType::kFloat32, uint64_t seed = 0);

  // idx [B, T] of int64 token ids, T <= block_size; targets [B, T] or undefined.
  GPTOutput forward(const Tensor& idx, const Tensor& targets = Tensor()) const;
  GPTOutput operator()(const Tensor& idx, const Tensor& targets = Tensor()) const { return forward(idx, targets); }

  // The logits of the last position of idx [B, T] as [B, 1, vocab] (what
  // generate() samples from): forward(idx).logits, or a compiled version.
  using LogitsFn = std::function<Tensor(const Tensor& idx)>;

  // nanoGPT's generate: max_new_tokens times, the logits of the last
  // position (of the last block_size tokens) divided by temperature (> 0),
  // the top_k largest kept, softmax, one token sampled; returns idx with the
  // new tokens appended, [B, T + max_new_tokens] on idx's device. The
  // sampling runs on the host from `seed` (top_k = 1 is greedy). `logits_fn`
  // replaces the eager forward, e.g. with a compiled one.
  Tensor generate(const Tensor& idx, int64_t max_new_tokens, double temperature = 1.0,
                  std::optional<int64_t> top_k = std::nullopt, uint64_t seed = 0,
                  const LogitsFn& logits_fn = nullptr) const;

  // Every parameter once (wte is lm_head's weight too), with nanoGPT's
  // state-dict names ("transformer.h.0.attn.c_attn.weight").
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  // Parameter count; as nanoGPT's get_num_params, without the position
  // embeddings unless non_embedding is false.
  int64_t num_parameters(bool non_embedding = true) const;

  const GPTConfig& config() const { return config_; }

  // nanoGPT's model.train() / model.eval(): switches every dropout (a new
  // model is training, as a torch module; with config.dropout 0 both
  // compute the same).
  void train(bool mode = true);
  void eval() { train(false); }

  nn::Embedding wte;  // token embeddings, [vocab, C]; also the lm_head weight (tied)
  nn::Embedding wpe;  // position embeddings, [block_size, C]
  std::vector<Block> h;
  nn::LayerNorm ln_f;
  nn::Dropout drop;  // on the embeddings

 private:
  GPTConfig config_;
};

}  // namespace fusebox::gpt2
