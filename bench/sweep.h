// fusebox_bench --sweep: memory-bound work on shapes nobody tuned for. Each
// class of work (a pointwise chain on one input layout; a reduction or
// normalization over the last, the first or a middle dim) runs over a grid of
// odd shapes (multiples of neither 4, 8 nor 32), 2-D and 3-D, f32/bf16/f16,
// rows of 1 to 2^18 elements. bench/compare_torch.py --sweep times the same
// grid in PyTorch (eager and torch.compile) from the JSON; the kernel
// snapshot test prints every kernel of the grid.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "bench/workloads.h"
#include "frontend/fusebox.h"

namespace fusebox::bench {

// How the one tensor input is laid out in memory (its logical shape is the
// case's shape in every layout).
enum class SweepLayout {
  kContiguous,
  kTransposed,  // 2-D: a [cols, rows] tensor's transpose
  kPermuted,    // 3-D: a [c, a, b] tensor permuted to [a, b, c]
  kSliced,      // every row narrowed from one 3 elements longer, at offset 1
  kBroadcast,   // x plus a [rows, 1] column broadcast over the columns
};

// kCopy: x.clone() of a contiguous x, the copy ceiling at the grid's own
// sizes (a 2^24-element kernel pays its launch and tail as the others do).
enum class SweepOp { kGelu, kSum, kSoftmax, kLogSoftmax, kLayerNorm, kRmsNorm, kCopy };

struct SweepCase {
  std::string cls;   // "gelu/transposed", "softmax/dim0": one class of work
  SweepOp op;
  SweepLayout layout = SweepLayout::kContiguous;
  Shape shape;       // the input's logical shape
  int64_t dim = -1;  // the reduced (normalized) dim; -1: the last
  DType dtype = DType::kFloat32;
  std::string name() const;  // cls, shape and dtype: unique in the grid
};

const char* SweepOpName(SweepOp op);
const char* SweepLayoutName(SweepLayout layout);

// The grid: every class at several shapes (quick: small ones, for CI).
std::vector<SweepCase> SweepCases(bool quick);

// The case's inputs: the tensor in its layout, then (norms) weight and bias
// of the reduced dim's size, shaped to broadcast along it; (kBroadcast) the
// [rows, 1] column. `uninitialized`: Tensor::empty instead of randn (the
// kernel snapshot needs the layouts, not the values).
std::vector<Tensor> MakeSweepInputs(const SweepCase& c, Device device, uint64_t seed, bool uninitialized = false);

// The case's work on its inputs: what compile() fuses and what PyTorch's
// twin in compare_torch.py computes.
Tensor RunSweepOp(const SweepCase& c, const std::vector<Tensor>& inputs);
// The same as a function of as many tensors as the case has inputs.
WorkloadFn SweepFunction(const SweepCase& c);

struct SweepResult {
  SweepCase c;
  double bytes = 0;  // minimal: each input's elements read once, the output written once
  Timing compiled;
  int kernels = 0;
  std::vector<std::string> kernel_names;
  double max_diff = 0;  // max |compiled - eager| over max(1, max |eager|)
  std::string error;    // empty when it ran and matched eager
  bool ok() const { return error.empty(); }
};

SweepResult RunSweepCase(const SweepCase& c, Device device, const TimingPlan& plan, double cache_bytes,
                         uint64_t seed);

}  // namespace fusebox::bench
