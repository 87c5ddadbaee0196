#include "bench/gpt2_case.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/compile_cache.h"
#include "bench/suite.h"
#include "tests/examples/gpt2_reference.h"

namespace fusebox::bench {
namespace {

// Positions of the first sequence the float64 forward checks at full size
// (GPT-2 small: ~0.13 GFLOP per position in double on the host).
constexpr int64_t kCheckedPositions = 8;

std::vector<int64_t> RandomTokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> dist(0, vocab - 1);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t& id : ids) id = dist(gen);
  return ids;
}

double RelL2(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    ref += want[i] * want[i];
  }
  return ref > 0 ? std::sqrt(err / ref) : NAN;
}

// Eager vs compiled over the loss and the first sequence's logits, and
// both against float64 on the first positions of that sequence (all of it,
// and the loss, when the whole batch is small enough to check).
void Check(const Gpt2Spec& s, const gpt2::GPT& model, const std::vector<int64_t>& ids,
           const std::vector<int64_t>& targets, const gpt2::GPTOutput& eager, const gpt2::GPTOutput& compiled,
           Result& r) {
  const int64_t vocab = s.config.vocab_size;
  const std::vector<float> e = eager.logits.narrow(0, 0, 1).to_vector();
  const std::vector<float> c = compiled.logits.narrow(0, 0, 1).to_vector();
  double max_abs = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    r.max_abs_diff = std::max(r.max_abs_diff, std::abs(static_cast<double>(e[i]) - c[i]));
    max_abs = std::max(max_abs, std::abs(static_cast<double>(e[i])));
    if (!std::isfinite(e[i]) || !std::isfinite(c[i])) r.max_abs_diff = NAN;
  }
  const double loss_e = eager.loss.item(), loss_c = compiled.loss.item();
  r.max_abs_diff = std::max(r.max_abs_diff, std::abs(loss_e - loss_c));
  // bf16: eager rounds every intermediate, the fused kernels keep float32;
  // over 12 layers that drifts more than one op's two ulps.
  const bool bf16 = r.dtype == DType::kBFloat16;
  r.max_abs_diff_tol = (bf16 ? 0.125 : 1e-4) * std::max(1.0, max_abs);
  r.rel_err_tol = bf16 ? 3e-2 : 1e-4;

  const bool whole = s.batch * s.seq * vocab <= (int64_t{1} << 20);
  const int64_t batch = whole ? s.batch : 1, seq = whole ? s.seq : std::min(s.seq, kCheckedPositions);
  std::vector<int64_t> first_ids, first_targets;
  for (int64_t b = 0; b < batch; ++b) {
    first_ids.insert(first_ids.end(), ids.begin() + b * s.seq, ids.begin() + b * s.seq + seq);
    first_targets.insert(first_targets.end(), targets.begin() + b * s.seq, targets.begin() + b * s.seq + seq);
  }
  const gpt2_reference::Output want = gpt2_reference::Forward(
      s.config, gpt2_reference::ReadParams(model), first_ids, batch, seq, whole ? first_targets : std::vector<int64_t>{});
  auto checked = [&](const Tensor& logits) {
    return logits.narrow(0, 0, batch).narrow(1, 0, seq).contiguous().to_vector();
  };
  r.rel_err_eager = RelL2(checked(eager.logits), want.logits);
  r.rel_err_compiled = RelL2(checked(compiled.logits), want.logits);
  r.checked = static_cast<int64_t>(want.logits.size());
  if (whole) {
    // The loss too: its relative error joins the logits'.
    r.rel_err_eager = std::max(r.rel_err_eager, std::abs(loss_e - want.loss) / std::abs(want.loss));
    r.rel_err_compiled = std::max(r.rel_err_compiled, std::abs(loss_c - want.loss) / std::abs(want.loss));
  }
  if (!(r.max_abs_diff <= r.max_abs_diff_tol)) r.failures.push_back("eager and compiled results disagree");
  if (!(r.rel_err_eager <= r.rel_err_tol)) r.failures.push_back("eager result is off the float64 reference");
  if (!(r.rel_err_compiled <= r.rel_err_tol)) r.failures.push_back("compiled result is off the float64 reference");
}

}  // namespace

Gpt2Spec Gpt2Size(bool quick, gpt2::Attention attention) {
  if (quick) {
    return {{.block_size = 16, .vocab_size = 67, .n_layer = 2, .n_head = 2, .n_embd = 32, .attention = attention}, 2,
            16};
  }
  return {{.attention = attention}, 8, 1024};  // GPTConfig's defaults: GPT-2 small
}

double Gpt2Flops(const Gpt2Spec& s) {
  const double c = static_cast<double>(s.config.n_embd), t = static_cast<double>(s.seq);
  const double per_token = static_cast<double>(s.config.n_layer) * (24 * c * c + 4 * t * c) +
                           2 * c * static_cast<double>(s.config.vocab_size);
  return per_token * static_cast<double>(s.batch) * t;
}

std::string Gpt2Json(const Gpt2Spec& s) {
  const gpt2::GPTConfig& c = s.config;
  return absl::StrCat("{\"block_size\": ", c.block_size, ", \"vocab_size\": ", c.vocab_size, ", \"n_layer\": ",
                      c.n_layer, ", \"n_head\": ", c.n_head, ", \"n_embd\": ", c.n_embd, ", \"bias\": ",
                      c.bias ? "true" : "false", ", \"attention\": \"",
                      c.attention == gpt2::Attention::kSdpa ? "sdpa" : "manual", "\", \"batch\": ", s.batch,
                      ", \"seq\": ", s.seq, "}");
}

void RunGpt2Forward(const Gpt2Spec& s, Device device, const TimingPlan& plan, uint64_t seed, Result& r) {
  const gpt2::GPT model(s.config, device, r.dtype, seed);
  const std::vector<int64_t> ids = RandomTokens(s.batch * s.seq, s.config.vocab_size, seed + 1);
  const std::vector<int64_t> targets = RandomTokens(s.batch * s.seq, s.config.vocab_size, seed + 2);
  const Tensor idx = Tensor::from_vector(ids, {s.batch, s.seq}, device);
  const Tensor tgt = Tensor::from_vector(targets, {s.batch, s.seq}, device);
  auto forward = [&model](const Tensor& x, const Tensor& y) {
    const gpt2::GPTOutput out = model(x, y);
    return std::pair{out.logits, out.loss};
  };
  auto as_output = [](std::pair<Tensor, Tensor> p) { return gpt2::GPTOutput{p.first, p.second}; };

  gpt2::GPTOutput eager, compiled_out;
  auto compiled = compile(forward);
  r.eager.timing.cold_ms = TimeOnceMs(device, [&] { eager = as_output(forward(idx, tgt)); });
  const backend::CompileCacheStats before = backend::CompileCache::Get().stats();
  r.compiled.timing.cold_ms = TimeOnceMs(device, [&] { compiled_out = as_output(compiled(idx, tgt)); });
  const backend::CompileCacheStats after = backend::CompileCache::Get().stats();
  r.cold_compiles = after.compiles - before.compiles;
  r.cold_disk_hits = after.disk_hits - before.disk_hits;
  r.cold_times = compiled.stats().times;
  auto second = compile(forward);  // a new compiled function: its plan is in the process's cache
  r.warm_start_ms = TimeOnceMs(device, [&] { (void)second(idx, tgt); });
  for (const KernelInfo& k : compiled.kernels()) r.compiled.kernels.push_back(k.name);
  r.compiled.ptx = PtxLines(compiled.kernels());
  r.compiled.kernels_per_call = static_cast<int64_t>(r.compiled.kernels.size());

  r.bytes = static_cast<double>(2 * idx.numel() * 8 + eager.logits.numel() * DTypeSize(r.dtype));
  for (const auto& [name, t] : model.named_parameters()) r.bytes += static_cast<double>(t.numel() * DTypeSize(r.dtype));
  Check(s, model, ids, targets, eager, compiled_out, r);
  eager = compiled_out = {};

  r.eager.kernels_per_call = GraphsRun([&] { (void)forward(idx, tgt); });
  r.eager.timing.trials_ms = TimeTrialsMs(device, plan, [&](int) { (void)forward(idx, tgt); });
  r.compiled.timing.trials_ms = TimeTrialsMs(device, plan, [&](int) { (void)compiled(idx, tgt); });
  if (plan.profile) Profile(device, [&](int) { (void)compiled(idx, tgt); }, r);
}

}  // namespace fusebox::bench
