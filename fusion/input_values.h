// Plans specialized on the values of graph inputs. A model's constant buffer
// (nanoGPT's `bias`, tril(ones(block_size, block_size))) is a graph input
// like any activation, so `bias[:T, :T] == 0` is a mask the compiler cannot
// see is causal from the graph alone: it would run the masked kernel (every
// tile, the mask read) and a kernel building the mask, per layer. Given the
// values, the pass that recognizes attention judges the mask on the host; the
// plan then holds while the memory it read is the same and unwritten (its
// Storage's id and version, the view's offset: ValueGuard), which the
// runtime checks before each run, as torch.compile's freezing holds only
// while the parameters do, but checked, not assumed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace fusebox::fusion {

// The element offsets (offset + sum of index * stride) of the row-major
// positions `at` of `shape`: how a view or an input's strides read them.
// Consecutive positions step a multi-index (no division), as a mask's
// evaluation over every position of [L, S] does.
inline void StridedOffsets(absl::Span<const int64_t> shape, absl::Span<const int64_t> strides, int64_t offset,
                           const std::vector<int64_t>& at, std::vector<int64_t>* out) {
  const size_t r = shape.size();
  out->resize(at.size());
  std::vector<int64_t> index(r, 0);
  int64_t linear = offset, previous = -2;
  for (size_t k = 0; k < at.size(); ++k) {
    if (at[k] == previous + 1 && r > 0) {
      size_t d = r - 1;  // odometer: carry into the dims before
      linear += strides[d];
      while (++index[d] == shape[d] && d > 0) {
        linear -= index[d] * strides[d];
        index[d] = 0;
        --d;
        linear += strides[d];
      }
    } else {
      int64_t rest = at[k];
      linear = offset;
      for (size_t d = r; d-- > 0;) {
        index[d] = rest % shape[d];
        linear += index[d] * strides[d];
        rest /= shape[d];
      }
    }
    previous = at[k];
    (*out)[k] = linear;
  }
}

// One graph input whose values a plan assumed: the memory it read then.
struct ValueGuard {
  int32_t input = -1;    // graph input index
  uint64_t storage = 0;  // Storage::id()
  uint64_t version = 0;  // Storage::version() when read
  int64_t offset = 0;    // the bound view's element offset into that memory
  friend bool operator==(const ValueGuard&, const ValueGuard&) = default;
};

// The values of a planned call's graph inputs, read on demand (a CUDA input
// is copied to the host once, when first asked for).
class InputValues {
 public:
  virtual ~InputValues() = default;
  // Whether input `index`'s values can be read (its memory is on the host or
  // a device, spans at most 2^23 elements, and has no failure pending).
  virtual bool Readable(int32_t index) = 0;
  // Input `index`'s elements at the row-major positions `at` of its shape
  // (a broadcast dim reads one element again), into `out`; Readable first.
  virtual void Gather(int32_t index, const std::vector<int64_t>& at, std::vector<double>* out) = 0;
  // Equal for two inputs whose values are equal (dtype, shape, strides and
  // memory bit for bit): a memo key, so equal buffers are judged once.
  virtual int64_t ContentId(int32_t index) = 0;
  // What a plan that assumed input `index`'s values guards on.
  virtual ValueGuard Guard(int32_t index) = 0;
  // Whether input `index`'s memory had a writable pointer handed out
  // (Tensor::data_ptr()): never Readable, which explain() says.
  virtual bool Escaped(int32_t index) { return false; }
};

}  // namespace fusebox::fusion
