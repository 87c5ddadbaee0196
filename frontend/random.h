// Random numbers inside the graph, spelled as PyTorch's: manual_seed, rand,
// randn and dropout. One process-wide generator holds a seed and an offset;
// each random op takes the current (seed, offset) as a small int64 graph
// input and advances the offset by one, and its kernel draws element x's
// numbers from Philox4x32-10 at counter (x, offset) under key seed. So a
// graph's structure (the plan-cache key) is the same on every call while its
// numbers differ, and eager and compiled calls draw the same numbers after
// the same manual_seed and sequence of random ops.
#pragma once

#include <cstdint>
#include <optional>

#include "tensor/tensor.h"

namespace fusebox {

// Seeds the generator and restarts its sequence (torch.manual_seed).
void manual_seed(uint64_t seed);
// The seed of the generator's sequence (torch.initial_seed); before any
// manual_seed, PyTorch's default 67280421310721.
uint64_t initial_seed();

// float32 uniform on [0, 1) / standard normal. With a seed: generated on the
// host from that seed (std::mt19937_64), the same tensor for the same seed,
// always concrete. Without one: drawn from the generator through the graph
// (a random op, fused and lazy inside compile()), so after manual_seed(s) the
// sequence is reproducible, eager or compiled.
Tensor rand(const Shape& shape, Device device = Device::cpu(), std::optional<uint64_t> seed = std::nullopt);
Tensor randn(const Shape& shape, Device device = Device::cpu(), std::optional<uint64_t> seed = std::nullopt);

// torch.nn.functional.dropout: in training, each element of the floating x
// is zeroed with probability p and the others scaled by 1 / (1 - p), in x's
// dtype (x * 0 where dropped, so a NaN or inf stays NaN, as PyTorch's
// x * mask * scale). p must be in [0, 1]; training = false, p = 0 or an empty
// x return x itself; p = 1 gives x * 0. The result has x's layout.
Tensor dropout(const Tensor& x, double p, bool training = true);

namespace frontend {

// One random op's share of the generator: the state it reads.
struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};
// The current state; the generator's offset advances by one (thread-safe).
GeneratorState NextGeneratorState();
// NextGeneratorState() as the int64 [seed, offset] tensor a random op reads,
// on `device`, marked TensorImpl::rng_state (so replay draws it anew).
Tensor NextGeneratorStateTensor(Device device);

// int64 values 0, 1, ..., numel - 1 over `shape` in row-major order (an iota
// node, computed inside kernels: no load). Lazy inside compile().
Tensor Iota(const Shape& shape, Device device);

}  // namespace frontend
}  // namespace fusebox
