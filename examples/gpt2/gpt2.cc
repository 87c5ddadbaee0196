#include "examples/gpt2/gpt2.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"

namespace fusebox::gpt2 {
namespace {

constexpr double kInitStd = 0.02;  // nanoGPT's _init_weights
constexpr double kLayerNormEps = 1e-5;

// A module's Linear with nanoGPT's init: weight N(0, std), bias zeros.
nn::Linear MakeLinear(int64_t in, int64_t out, bool bias, double std, Init& init) {
  // Built 1 x 1 without a bias, so its own (uniform) init costs nothing;
  // both are replaced here.
  nn::Linear linear(1, 1, /*bias=*/false);
  linear.weight = init.Normal({out, in}, std);
  if (bias) linear.bias = init.Zeros({out});
  return linear;
}

nn::Embedding MakeEmbedding(int64_t num, int64_t dim, Init& init) {
  nn::Embedding embedding(0, dim);  // empty: its N(0, 1) init is replaced below
  embedding.weight = init.Normal({num, dim}, kInitStd);
  return embedding;
}

nn::LayerNorm MakeLayerNorm(const GPTConfig& config, const Init& init) {
  return nn::LayerNorm(config.n_embd, kLayerNormEps, init.device(), init.dtype(), config.bias);
}

// The c_proj weights' std: nanoGPT scales the residual projections by
// 1 / sqrt(2 n_layer) (GPT-2's paper), two per block.
double ProjStd(const GPTConfig& config) { return kInitStd / std::sqrt(2.0 * static_cast<double>(config.n_layer)); }

}  // namespace

Tensor Init::Normal(const Shape& shape, double std) {
  // Drawn on the host from the parameter's own seed, so a model is the same
  // on every device and in every dtype (up to its rounding), and converted
  // there: building a model runs no kernel (the kernel snapshot builds some).
  std::mt19937_64 gen(seed_++);
  std::normal_distribution<float> dist(0.0f, static_cast<float>(std));
  std::vector<float> values(static_cast<size_t>(Numel(shape)));
  for (float& v : values) v = dist(gen);
  if (dtype_ == DType::kFloat32) return Tensor::from_vector(values, shape, device_);
  return Tensor::from_vector(std::vector<double>(values.begin(), values.end()), shape, dtype_, device_);
}

// config.dropout, checked before any module takes it.
static double ValidDropout(double p) {
  FUSEBOX_ENSURE(p >= 0.0 && p <= 1.0, "GPT: dropout must be in [0, 1], got ", p);
  return p;
}

CausalSelfAttention::CausalSelfAttention(const GPTConfig& config, Init& init)
    : c_attn(MakeLinear(config.n_embd, 3 * config.n_embd, config.bias, kInitStd, init)),
      c_proj(MakeLinear(config.n_embd, config.n_embd, config.bias, ProjStd(config), init)),
      n_head(config.n_head),
      n_embd(config.n_embd),
      attention(config.attention),
      attn_dropout(config.dropout),
      resid_dropout(config.dropout) {
  if (attention == Attention::kManual) {
    // tril(ones(block_size, block_size)), filled on the host (no kernel).
    const int64_t n = config.block_size;
    std::vector<float> tril(static_cast<size_t>(n * n), 0.0f);
    for (int64_t i = 0; i < n; ++i) std::fill_n(tril.begin() + i * n, i + 1, 1.0f);
    mask = Tensor::from_vector(tril, {n, n}, init.device());
  }
}

Tensor CausalSelfAttention::operator()(const Tensor& x) const {
  const int64_t batch = x.size(0), seq = x.size(1), head_size = n_embd / n_head;
  // q, k, v for all heads at once, each viewed as [B, nh, T, hs].
  const std::vector<Tensor> qkv = split(c_attn(x), n_embd, 2);
  auto heads = [&](const Tensor& t) { return t.view({batch, seq, n_head, head_size}).transpose(1, 2); };
  const Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  Tensor y;
  if (attention == Attention::kSdpa) {
    const double dropout_p = attn_dropout.training ? attn_dropout.p : 0.0;
    y = scaled_dot_product_attention(q, k, v, Tensor(), dropout_p, /*is_causal=*/true);
  } else {
    Tensor att = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(head_size)));
    const Tensor causal = mask.narrow(0, 0, seq).narrow(1, 0, seq);
    att = softmax(masked_fill(att, eq(causal, 0.0), -std::numeric_limits<double>::infinity()), -1);
    att = attn_dropout(att);
    y = matmul(att, v);
  }
  // Heads side by side again, then the output projection.
  y = y.transpose(1, 2).contiguous().view({batch, seq, n_embd});
  return resid_dropout(c_proj(y));
}

MLP::MLP(const GPTConfig& config, Init& init)
    : c_fc(MakeLinear(config.n_embd, 4 * config.n_embd, config.bias, kInitStd, init)),
      c_proj(MakeLinear(4 * config.n_embd, config.n_embd, config.bias, ProjStd(config), init)),
      dropout(config.dropout) {}

Block::Block(const GPTConfig& config, Init& init)
    : ln_1(MakeLayerNorm(config, init)), attn(config, init), ln_2(MakeLayerNorm(config, init)), mlp(config, init) {}

Tensor Block::operator()(const Tensor& x) const {
  const Tensor y = x + attn(ln_1(x));
  return y + mlp(ln_2(y));
}

GPT::GPT(GPTConfig config, Device device, DType dtype, uint64_t seed)
    : wte(0, 0), wpe(0, 0), ln_f(1), drop(ValidDropout(config.dropout)), config_(config) {
  FUSEBOX_ENSURE(config.vocab_size > 0 && config.block_size > 0 && config.n_layer >= 0 && config.n_head > 0,
                 "GPT: vocab_size, block_size and n_head must be positive and n_layer >= 0, got vocab_size ",
                 config.vocab_size, ", block_size ", config.block_size, ", n_head ", config.n_head, ", n_layer ",
                 config.n_layer);
  FUSEBOX_ENSURE(config.n_embd > 0 && config.n_embd % config.n_head == 0, "GPT: n_embd (", config.n_embd,
                 ") must be a positive multiple of n_head (", config.n_head, ")");
  Init init(seed, device, dtype);
  wte = MakeEmbedding(config.vocab_size, config.n_embd, init);
  wpe = MakeEmbedding(config.block_size, config.n_embd, init);
  for (int64_t l = 0; l < config.n_layer; ++l) h.emplace_back(config, init);
  ln_f = MakeLayerNorm(config, init);
}

GPTOutput GPT::forward(const Tensor& idx, const Tensor& targets) const {
  FUSEBOX_ENSURE(idx.dim() == 2 && IsIntegral(idx.dtype()), "GPT: idx must be [B, T] of token ids (int64 or int32), got ",
                 DTypeName(idx.dtype()), ShapeToString(idx.shape()));
  const int64_t batch = idx.size(0), seq = idx.size(1);
  FUSEBOX_ENSURE(seq <= config_.block_size, "GPT: cannot forward a sequence of length ", seq,
                 ", the block size is only ", config_.block_size);
  const Tensor pos = arange(0, seq, 1, idx.device());
  Tensor x = wte(idx) + wpe(pos);  // [B, T, C] + [T, C]
  x = drop(x);
  for (const Block& block : h) x = block(x);
  x = ln_f(x);
  if (!targets.defined()) {
    // Inference: the lm_head on the last position only.
    return {linear(x.narrow(1, seq - 1, 1), wte.weight), Tensor()};
  }
  FUSEBOX_ENSURE(targets.shape() == idx.shape(), "GPT: targets ", ShapeToString(targets.shape()),
                 " must have idx's shape ", ShapeToString(idx.shape()));
  const Tensor logits = linear(x, wte.weight);  // [B, T, vocab]; lm_head tied to wte
  const Tensor loss = cross_entropy(logits.view({batch * seq, config_.vocab_size}), targets.reshape({batch * seq}),
                                    /*ignore_index=*/-1);
  return {logits, loss};
}

Tensor GPT::generate(const Tensor& idx, int64_t max_new_tokens, double temperature, std::optional<int64_t> top_k,
                     uint64_t seed, const LogitsFn& logits_fn) const {
  FUSEBOX_ENSURE(idx.dim() == 2 && idx.size(1) > 0, "generate: idx must be [B, T] with T >= 1, got ",
                 ShapeToString(idx.shape()));
  FUSEBOX_ENSURE(max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got ", max_new_tokens);
  FUSEBOX_ENSURE(temperature > 0 && std::isfinite(temperature), "generate: temperature must be positive, got ",
                 temperature);
  FUSEBOX_ENSURE(!top_k || *top_k >= 1, "generate: top_k must be >= 1, got ", top_k.value_or(0));
  const int64_t batch = idx.size(0), vocab = config_.vocab_size;
  std::vector<std::vector<int64_t>> tokens(static_cast<size_t>(batch));
  const std::vector<double> start = idx.to_double_vector();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < idx.size(1); ++t) tokens[b].push_back(static_cast<int64_t>(start[b * idx.size(1) + t]));
  }
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    // The context: at most the last block_size tokens of each row.
    const int64_t len = std::min<int64_t>(static_cast<int64_t>(tokens[0].size()), config_.block_size);
    std::vector<int64_t> context;
    for (const std::vector<int64_t>& row : tokens) context.insert(context.end(), row.end() - len, row.end());
    const Tensor cond = Tensor::from_vector(context, {batch, len}, idx.device());
    const Tensor logits = logits_fn ? logits_fn(cond) : forward(cond).logits;
    FUSEBOX_ENSURE(logits.numel() == batch * vocab, "generate: the logits must be [B, 1, vocab], got ",
                   ShapeToString(logits.shape()));
    const std::vector<double> values = logits.to_double_vector();
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<double> p(values.begin() + b * vocab, values.begin() + (b + 1) * vocab);
      for (double& v : p) v /= temperature;
      if (top_k && *top_k < vocab) {
        // Keep the logits at least as large as the k-th largest (ties kept, as nanoGPT's `<`).
        std::vector<double> sorted = p;
        std::nth_element(sorted.begin(), sorted.begin() + (*top_k - 1), sorted.end(), std::greater<double>());
        const double kth = sorted[*top_k - 1];
        for (double& v : p) v = v < kth ? -std::numeric_limits<double>::infinity() : v;
      }
      const double top = *std::max_element(p.begin(), p.end());
      double total = 0;
      for (double& v : p) total += v = std::exp(v - top);
      // Inverse-CDF sampling; the last nonzero token takes any rounding slack.
      double u = uniform(gen) * total;
      int64_t next = 0;
      for (int64_t c = 0; c < vocab; ++c) {
        if (p[c] == 0) continue;
        next = c;
        if ((u -= p[c]) < 0) break;
      }
      tokens[b].push_back(next);
    }
  }
  std::vector<int64_t> out;
  for (const std::vector<int64_t>& row : tokens) out.insert(out.end(), row.begin(), row.end());
  return Tensor::from_vector(out, {batch, static_cast<int64_t>(tokens[0].size())}, idx.device());
}

void GPT::train(bool mode) {
  drop.training = mode;
  for (Block& block : h) {
    block.attn.attn_dropout.training = block.attn.resid_dropout.training = block.mlp.dropout.training = mode;
  }
}

std::vector<std::pair<std::string, Tensor>> GPT::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> params = {{"transformer.wte.weight", wte.weight},
                                                        {"transformer.wpe.weight", wpe.weight}};
  // A module's weight and bias (a bias only where the config has them).
  auto add = [&](const std::string& name, const Tensor& weight, const Tensor& bias) {
    params.emplace_back(name + ".weight", weight);
    if (bias.defined()) params.emplace_back(name + ".bias", bias);
  };
  for (size_t l = 0; l < h.size(); ++l) {
    const std::string p = absl::StrCat("transformer.h.", l, ".");
    const Block& b = h[l];
    add(p + "ln_1", b.ln_1.weight, b.ln_1.bias);
    add(p + "attn.c_attn", b.attn.c_attn.weight, b.attn.c_attn.bias);
    add(p + "attn.c_proj", b.attn.c_proj.weight, b.attn.c_proj.bias);
    add(p + "ln_2", b.ln_2.weight, b.ln_2.bias);
    add(p + "mlp.c_fc", b.mlp.c_fc.weight, b.mlp.c_fc.bias);
    add(p + "mlp.c_proj", b.mlp.c_proj.weight, b.mlp.c_proj.bias);
  }
  add("transformer.ln_f", ln_f.weight, ln_f.bias);
  return params;
}

int64_t GPT::num_parameters(bool non_embedding) const {
  int64_t n = 0;
  for (const auto& [name, t] : named_parameters()) n += t.numel();
  return non_embedding ? n - wpe.weight.numel() : n;
}

}  // namespace fusebox::gpt2
