// Building blocks of the float64 reference: broadcasting pointwise maps,
// reductions over dims, row maps, each finishing with the rounding bound of
// the output dtype. Used by the op table's rows (tests/fuzz/op_table.cc).
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "tests/fuzz/ref_array.h"

namespace fusebox::fuzz {

inline constexpr double kU32 = 5.9604644775390625e-8;  // float32 unit roundoff: fused math runs in f32

// A value and its error bound.
struct VE {
  double v = 0, e = 0;
};

// Throws RefError unless x is floating (PyTorch rejects these ops on integers).
void RequireFloat(const RefArray& x, const char* op);

// Adds the output's rounding (dtype, plus float32 compute) to each bound;
// values past half the dtype's range become unchecked (+inf bound).
void Finish(RefArray* out);

// Broadcasts the operands and applies f per element.
// Floating operands of another dtype are converted to `compute` first (the
// result's dtype when unset; a comparison's common dtype, as PyTorch's).
RefArray Map(const std::vector<const RefArray*>& xs, DType out,
             const std::function<VE(const VE*)>& f, std::optional<DType> compute = std::nullopt);
// f over one value with an interval bound: monotone pieces use the
// endpoints; `lipschitz` (> 0) bounds non-monotone functions.
VE Interval(const std::function<double(double)>& f, VE x, double lipschitz = 0);
VE Add(VE a, VE b);
VE Mul(VE a, VE b);
VE Div(VE a, VE b);

// Reduces `dims` (empty: all; PyTorch's wrapping and duplicate check).
RefArray Reduce(const RefArray& x, Dims dims, bool keepdim, DType out,
                const std::function<VE(const std::vector<VE>&)>& f);
// Maps each row along `dim` to a row of the same length.
RefArray RowMap(const RefArray& x, int64_t dim, DType out,
                const std::function<void(const std::vector<VE>&, std::vector<VE>*)>& f);

}  // namespace fusebox::fuzz
