#include "frontend/reductions.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_join.h"
#include "frontend/capture.h"
#include "frontend/ops.h"

namespace fusebox {
namespace {

using graph::Op;

// Sorted, unique, wrapped dims; empty input means all dims.
std::vector<int64_t> NormalizeDims(const Tensor& x, const std::vector<int64_t>& dims, const char* op) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < x.dim(); ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) out.push_back(WrapDim(d, x.dim(), op));
  std::sort(out.begin(), out.end());
  FUSEBOX_ENSURE(std::adjacent_find(out.begin(), out.end()) == out.end(), op, ": dim repeated in [",
                 absl::StrJoin(dims, ", "), "]");
  if (x.dim() == 0) out.clear();  // dim 0 / -1 of a scalar: nothing to reduce
  return out;
}

int64_t ReducedCount(const Tensor& x, const std::vector<int64_t>& axes) {
  int64_t n = 1;
  for (int64_t d : axes) n *= x.shape()[d];
  return n;
}

Tensor DropDims(const Tensor& kept, const std::vector<int64_t>& axes) {
  Shape shape;
  for (int64_t d = 0; d < kept.dim(); ++d) {
    if (!std::binary_search(axes.begin(), axes.end(), d)) shape.push_back(kept.shape()[d]);
  }
  return kept.reshape(shape);
}

// One reduction node over `axes`, result with the reduced dims kept as 1.
Tensor Reduce(Op op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const graph::OpInfo& info = graph::Info(op);
  FUSEBOX_ENSURE(x.defined(), info.name, ": undefined Tensor");
  const std::vector<int64_t> axes = NormalizeDims(x, dims, info.name);
  DType dtype = x.dtype();
  if (info.dtype_rule == graph::DTypeRule::kReduceSum && !IsFloating(dtype)) dtype = DType::kInt64;
  if (info.dtype_rule == graph::DTypeRule::kReduceSame || info.dtype_rule == graph::DTypeRule::kReduceIndex) {
    FUSEBOX_ENSURE(dtype != DType::kBool, info.name, " does not support bool tensors (got ", x.str(),
                   "); convert first, e.g. x.to(DType::kInt32)");
    FUSEBOX_ENSURE(ReducedCount(x, axes) > 0, info.name,
                   ": cannot reduce over a zero-size dim (shape ", ShapeToString(x.shape()),
                   ") since it has no identity");
  }
  Shape kept = x.shape();
  for (int64_t d : axes) kept[d] = 1;
  if (ReducedCount(x, axes) == 1) {
    // Over size-1 dims (or of a 0-d tensor) each result is its one element,
    // so no reduction kernel: its row would be the whole iteration space.
    // Contiguous, as PyTorch allocates every reduction's result.
    const bool index = info.dtype_rule == graph::DTypeRule::kReduceIndex;
    const Tensor out = index ? zeros(kept, x.device(), DType::kInt64)
                             : (x.dtype() == dtype ? x.clone(MemoryFormat::kContiguous)
                                                   : x.to(dtype, MemoryFormat::kContiguous))
                                   .reshape(kept);
    return keepdim ? out : DropDims(out, axes);
  }
  frontend::OpRecorder recorder;
  frontend::CaptureSession& session = recorder.session();
  graph::NodeId in = session.Operand(x);
  if (info.dtype_rule == graph::DTypeRule::kReduceIndex) {
    dtype = DType::kInt64;  // the input keeps its type; the result is a position
  } else if (x.dtype() != dtype) {
    in = session.AddNode(graph::Node{.op = Op::kCast, .dtype = dtype, .shape = x.shape(), .inputs = {in}});
  }
  graph::NodeId node = session.AddNode(
      graph::Node{.op = op, .dtype = dtype, .shape = kept, .inputs = {in}, .axes = axes});
  Tensor out = recorder.Finish(node, x.device(), info.name);
  return keepdim ? out : DropDims(out, axes);
}

void EnsureFloating(const Tensor& x, const char* op) {
  FUSEBOX_ENSURE(x.defined(), op, ": undefined Tensor");
  FUSEBOX_ENSURE(IsFloating(x.dtype()), op, " needs a floating-point tensor, got ", x.str(),
                 "; convert first, e.g. x.to(DType::kFloat32)");
}

// The trailing dims `normalized_shape` names, checked against x's shape.
std::vector<int64_t> TrailingDims(const Tensor& x, const Shape& normalized_shape, const char* op) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  FUSEBOX_ENSURE(k >= 1 && k <= x.dim(), op, ": normalized_shape ", ShapeToString(normalized_shape),
                 " must name 1..", x.dim(), " trailing dims of ", x.str());
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t d = x.dim() - k + i;
    FUSEBOX_ENSURE(x.shape()[d] == normalized_shape[i], op, ": normalized_shape ", ShapeToString(normalized_shape),
                   " does not match the trailing dims of ", x.str());
    dims.push_back(d);
  }
  return dims;
}

void CheckAffine(const Tensor& t, const Shape& normalized_shape, const char* op, const char* what) {
  if (!t.defined()) return;
  FUSEBOX_ENSURE(t.shape() == normalized_shape, op, ": ", what, " has shape ", ShapeToString(t.shape()),
                 " but normalized_shape is ", ShapeToString(normalized_shape));
}

// Composite ops on f16/bf16 compute in f32 and round once at the end, as
// PyTorch's built-in softmax / layer_norm do (an eager decomposition in the
// 16-bit type would round every intermediate). Under compile() the casts fuse.
// Their results are contiguous (frontend::ContiguousResultsScope), as
// PyTorch's kernels for them allocate (rms_norm's composite is the exception:
// docs/architecture.md, Output layouts).
template <typename F>
Tensor InFloat32(const Tensor& x, F f) {
  frontend::ContiguousResultsScope contiguous;
  if (x.dtype() != DType::kFloat16 && x.dtype() != DType::kBFloat16) return f(x);
  return f(x.to(DType::kFloat32)).to(x.dtype());
}

}  // namespace

Tensor sum(const Tensor& x) { return Reduce(Op::kSum, x, {}, false); }
Tensor sum(const Tensor& x, int64_t dim, bool keepdim) { return Reduce(Op::kSum, x, {dim}, keepdim); }
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return Reduce(Op::kSum, x, dims, keepdim);
}
Tensor prod(const Tensor& x) { return Reduce(Op::kProd, x, {}, false); }
Tensor prod(const Tensor& x, int64_t dim, bool keepdim) { return Reduce(Op::kProd, x, {dim}, keepdim); }
Tensor max(const Tensor& x) { return Reduce(Op::kMax, x, {}, false); }
Tensor max(const Tensor& x, int64_t dim, bool keepdim) { return Reduce(Op::kMax, x, {dim}, keepdim); }
Tensor min(const Tensor& x) { return Reduce(Op::kMin, x, {}, false); }
Tensor min(const Tensor& x, int64_t dim, bool keepdim) { return Reduce(Op::kMin, x, {dim}, keepdim); }
Tensor argmax(const Tensor& x) { return Reduce(Op::kArgmax, x, {}, false); }
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { return Reduce(Op::kArgmax, x, {dim}, keepdim); }
Tensor argmin(const Tensor& x) { return Reduce(Op::kArgmin, x, {}, false); }
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) { return Reduce(Op::kArgmin, x, {dim}, keepdim); }
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return Reduce(Op::kMax, x, dims, keepdim);
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return Reduce(Op::kMin, x, dims, keepdim);
}

Tensor mean(const Tensor& x) { return mean(x, std::vector<int64_t>{}, false); }
Tensor mean(const Tensor& x, int64_t dim, bool keepdim) { return mean(x, std::vector<int64_t>{dim}, keepdim); }
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  EnsureFloating(x, "mean");
  const std::vector<int64_t> axes = NormalizeDims(x, dims, "mean");
  // Divide before dropping the dims: the division then fuses into the sum's kernel.
  const Tensor out = InFloat32(x, [&](const Tensor& xf) {
    return sum(xf, dims, /*keepdim=*/true) / static_cast<double>(ReducedCount(x, axes));
  });
  return keepdim ? out : DropDims(out, axes);
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, double correction, bool keepdim) {
  EnsureFloating(x, "var");
  const std::vector<int64_t> axes = NormalizeDims(x, dims, "var");
  const int64_t n = ReducedCount(x, axes);
  const Tensor out = InFloat32(x, [&](const Tensor& xf) {
    const Tensor d = xf - mean(xf, dims, /*keepdim=*/true);
    return sum(d * d, dims, /*keepdim=*/true) / std::max(0.0, static_cast<double>(n) - correction);
  });
  return keepdim ? out : DropDims(out, axes);
}

// Softmax over a zero-size dim has nothing to normalize and no max to shift
// by: PyTorch returns the (empty) result without reducing.
bool EmptyAlong(const Tensor& x, const std::vector<int64_t>& axes) { return ReducedCount(x, axes) == 0; }

Tensor softmax(const Tensor& input, int64_t dim) {
  EnsureFloating(input, "softmax");
  // A bad dim is reported as softmax's, not max's.
  if (EmptyAlong(input, NormalizeDims(input, {dim}, "softmax"))) {
    return Tensor::empty(input.shape(), input.dtype(), input.device());
  }
  return InFloat32(input, [&](const Tensor& x) {
    const Tensor e = exp(x - amax(x, {dim}, /*keepdim=*/true));
    return e / sum(e, dim, /*keepdim=*/true);
  });
}

Tensor log_softmax(const Tensor& input, int64_t dim) {
  EnsureFloating(input, "log_softmax");
  if (EmptyAlong(input, NormalizeDims(input, {dim}, "log_softmax"))) {
    return Tensor::empty(input.shape(), input.dtype(), input.device());
  }
  return InFloat32(input, [&](const Tensor& x) {
    const Tensor shifted = x - amax(x, {dim}, /*keepdim=*/true);
    return shifted - log(sum(exp(shifted), dim, /*keepdim=*/true));
  });
}

Tensor logsumexp(const Tensor& input, const std::vector<int64_t>& dims, bool keepdim) {
  EnsureFloating(input, "logsumexp");
  const std::vector<int64_t> axes = NormalizeDims(input, dims, "logsumexp");
  if (EmptyAlong(input, axes)) {  // the log of an empty sum (PyTorch: -inf)
    Shape kept = input.shape();
    for (int64_t d : axes) kept[d] = 1;
    const Tensor out = full(kept, -INFINITY, input.device(), input.dtype());
    return keepdim ? out : DropDims(out, axes);
  }
  return InFloat32(input, [&](const Tensor& x) {
    // An all -inf (or +inf) slice would give inf - inf = NaN: shift by 0 there.
    const Tensor m = amax(x, dims, /*keepdim=*/true);
    const Tensor shift = where(eq(abs(m), INFINITY), 0.0, m);
    const Tensor out = log(sum(exp(x - shift), dims, /*keepdim=*/true)) + shift;
    return keepdim ? out : DropDims(out, axes);
  });
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  EnsureFloating(x, "layer_norm");
  const std::vector<int64_t> dims = TrailingDims(x, normalized_shape, "layer_norm");
  CheckAffine(weight, normalized_shape, "layer_norm", "weight");
  CheckAffine(bias, normalized_shape, "layer_norm", "bias");
  return InFloat32(x, [&](const Tensor& xf) {
    const Tensor centered = xf - mean(xf, dims, /*keepdim=*/true);
    Tensor y = centered * rsqrt(mean(centered * centered, dims, /*keepdim=*/true) + eps);
    if (weight.defined()) y = y * weight;
    if (bias.defined()) y = y + bias;
    return y;
  });
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps) {
  EnsureFloating(x, "rms_norm");
  const std::vector<int64_t> dims = TrailingDims(x, normalized_shape, "rms_norm");
  CheckAffine(weight, normalized_shape, "rms_norm", "weight");
  const double e = eps.value_or(x.dtype() == DType::kFloat16    ? 0.0009765625
                                : x.dtype() == DType::kBFloat16 ? 0.0078125
                                                                : 1.1920928955078125e-07);
  return InFloat32(x, [&](const Tensor& xf) {
    Tensor y = xf * rsqrt(mean(xf * xf, dims, /*keepdim=*/true) + e);
    if (weight.defined()) y = y * weight;
    return y;
  });
}

}  // namespace fusebox
