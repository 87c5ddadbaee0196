// fusebox_bench's gpt2_forward rows (issue 24): examples/gpt2's whole
// forward with the loss, eager and compiled, as one row each of f32 and bf16
// with the written-out attention and with SDPA. A model is not a Workload
// (its parameters are not inputs), so these rows run here: first calls,
// kernels, checks (eager vs compiled, and the float64 forward of
// tests/examples/gpt2_reference.h on the first positions of one sequence)
// and the timed trials. bench/compare_gpt2.py is the PyTorch twin.
#pragma once

#include <cstdint>
#include <string>

#include "bench/harness.h"
#include "bench/report.h"
#include "examples/gpt2/gpt2.h"

namespace fusebox::bench {

inline constexpr char kGpt2Forward[] = "gpt2_forward";

struct Gpt2Spec {
  gpt2::GPTConfig config;
  int64_t batch = 0, seq = 0;
};

// GPT-2 small (12 layers, 12 heads, 768 wide, vocab 50304) at B 8, T 1024;
// quick: the tests' tiny model (2 layers, 2 heads, 32 wide, vocab 67) at B 2,
// T 16, whose kernels tests/examples/gpt2_test.cc compiles too.
Gpt2Spec Gpt2Size(bool quick, gpt2::Attention attention);

// FLOPs of one forward's matrix products: per token and layer 24 C^2 (the
// four Linears) + 4 T C (q k^T and att v, the whole T x T square, as
// nanoGPT's estimate_mfu counts), and 2 C vocab for the lm_head.
double Gpt2Flops(const Gpt2Spec& spec);

// The spec as a JSON object ("config" of the row, read by compare_gpt2.py).
std::string Gpt2Json(const Gpt2Spec& spec);

// Runs one row into `r` (whose name, label, dtype and device are set):
// the model from `seed`, random tokens and targets, timed as RunCase times.
void RunGpt2Forward(const Gpt2Spec& spec, Device device, const TimingPlan& plan, uint64_t seed, Result& r);

}  // namespace fusebox::bench
