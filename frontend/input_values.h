// The tensors of a planned call as fusion::InputValues: what a plan may
// assume of their values (fusion/input_values.h), read straight from their
// memory (no op runs: planning happens inside a capture), and the check
// that the memory a plan assumed is still the same before it runs.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "fusion/input_values.h"
#include "tensor/tensor.h"

namespace fusebox::frontend {

class TensorInputValues final : public fusion::InputValues {
 public:
  explicit TensorInputValues(absl::Span<const Tensor> inputs) : inputs_(inputs) {}
  bool Readable(int32_t index) override;
  void Gather(int32_t index, const std::vector<int64_t>& at, std::vector<double>* out) override;
  int64_t ContentId(int32_t index) override;
  fusion::ValueGuard Guard(int32_t index) override;
  bool Escaped(int32_t index) override;

 private:
  // The bytes from an input's first element to its last, copied to the host
  // once (nullopt: not readable).
  const std::optional<std::vector<char>>& Bytes(int32_t index);

  absl::Span<const Tensor> inputs_;
  absl::flat_hash_map<int32_t, std::optional<std::vector<char>>> read_;
  absl::flat_hash_map<int32_t, int64_t> content_;
  std::vector<int32_t> distinct_;  // one input of each content read so far
};

// Whether `t` is still the memory (and version) `guard` read.
bool ValueGuardHolds(const fusion::ValueGuard& guard, const Tensor& t);
// Whether every guarded input is still the memory (and version) the plan read.
bool ValueGuardsHold(absl::Span<const fusion::ValueGuard> guards, absl::Span<const Tensor> inputs);

}  // namespace fusebox::frontend
