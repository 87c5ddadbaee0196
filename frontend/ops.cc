// Every op funnels into Apply(): validate, broadcast, promote, record into the
// current capture (or a one-op eager capture that runs at once).
#include "frontend/ops.h"

#include <cmath>
#include <initializer_list>
#include <optional>
#include <span>

#include "absl/strings/str_join.h"
#include "frontend/capture.h"
#include "tensor/layout.h"

namespace fusebox {
namespace {

using graph::DTypeRule;
using graph::Op;
// A tensor (held by reference: the caller's tensors outlive the op, and
// copying a handle costs two atomic reference-count updates) or a scalar.
struct Operand {
  Operand(const Tensor& t) : tensor(&t) {}  // NOLINT: implicit, as the braced operand lists need
  Operand(double v) : scalar(v) {}          // NOLINT
  const Tensor* tensor = nullptr;
  double scalar = 0;
};

std::string Describe(std::span<const Operand> xs) {
  std::vector<std::string> parts;
  for (const Operand& x : xs) {
    if (const Tensor* t = x.tensor) {
      parts.push_back(absl::StrCat(DTypeName(t->dtype()), ShapeToString(t->shape()), " on ", t->device().str()));
    } else {
      parts.push_back(absl::StrCat("scalar ", x.scalar));
    }
  }
  return absl::StrJoin(parts, ", ");
}

// How a result is laid out (its strides), as PyTorch allocates it.
enum class ResultLayout {
  kElementwise,  // TensorIterator's rule from the operands (tensor/layout.h)
  kPreserve,     // empty_like(preserve_format): clone(), to(dtype)
  kContiguous,   // row-major: contiguous()
};

// True when `strides` are the row-major strides of `shape` exactly.
bool RowMajor(const Shape& shape, const Strides& strides) {
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (strides[d] != expected) return false;
    expected *= std::max<int64_t>(shape[d], 1);
  }
  return true;
}

// The result's strides, or nullopt for row-major ones (every operand
// row-major: the common case, decided in one pass over their strides).
std::optional<Strides> ResultStrides(Op op, std::span<const Operand> xs, const Shape& shape, ResultLayout layout) {
  if (layout == ResultLayout::kContiguous || frontend::ContiguousResultsScope::active()) return std::nullopt;
  bool row_major = Numel(shape) > 0;
  for (const Operand& x : xs) {
    if (x.tensor != nullptr) row_major = row_major && RowMajor(x.tensor->shape(), x.tensor->strides());
  }
  if (row_major) return std::nullopt;
  if (layout == ResultLayout::kPreserve) return PreserveStrides(xs[0].tensor->shape(), xs[0].tensor->strides());
  // A scalar operand is a 0-d tensor to TensorIterator (a wrapped number),
  // except pow's exponent, which PyTorch's pow(Tensor, Scalar) takes apart.
  static const Shape kNoDims;
  static const Strides kNoStrides;
  absl::InlinedVector<StridedOperand, 4> operands;
  for (const Operand& x : xs) {
    if (x.tensor != nullptr) {
      operands.push_back({&x.tensor->shape(), &x.tensor->strides()});
    } else if (op != Op::kPow) {
      operands.push_back({&kNoDims, &kNoStrides});
    }
  }
  return ElementwiseStrides(shape, operands);
}

// Records `op` on `operands`; `cast_to` is the result dtype of kCast. (A
// braced list, not a vector: one heap allocation fewer per traced op.)
//
// The result is laid out as PyTorch lays it out (`layout`). When that is not
// row-major (gelu(x.t())), the node computes the result in memory order: its
// shape and every operand are permuted by the layout's memory order, so the
// kernel walks stores and the permuted operands' loads densely (x.t()
// permuted back is x), and the result is a view of the node with the
// layout's strides. Graph values stay row-major; only views carry layouts.
Tensor Apply(Op op, std::initializer_list<Operand> operands, DType cast_to = DType::kFloat32,
             ResultLayout layout = ResultLayout::kElementwise) {
  const std::span<const Operand> xs(operands.begin(), operands.size());
  const graph::OpInfo& info = graph::Info(op);
  const char* name = info.name;
  // Devices and shapes.
  Shape shape;
  bool first = true;
  Device device;
  bool scalar_operand = false;
  // PyTorch's three categories: tensors with dims, 0-d tensors, scalars. A
  // lower category widens the result only across a kind (bool -> int -> float).
  std::optional<DType> dims_dtype, zero_dim_dtype;
  const bool where = info.dtype_rule == DTypeRule::kWhere;
  for (size_t k = 0; k < xs.size(); ++k) {
    if (xs[k].tensor == nullptr) {
      scalar_operand = true;
      continue;
    }
    const Tensor& t = *xs[k].tensor;
    FUSEBOX_ENSURE(t.defined(), name, ": operand ", k, " is an undefined Tensor");
    if (first) {
      device = t.device();
      shape = t.shape();
      first = false;
    } else {
      FUSEBOX_ENSURE(t.device() == device, name, ": expected all tensors on one device, got ", Describe(xs),
                     "; move them with .to(Device) first");
      Shape out;
      FUSEBOX_ENSURE(BroadcastShapes(shape, t.shape(), &out), name, ": shapes cannot be broadcast together: ",
                     Describe(xs), " (sizes must match or be 1, aligned from the right)");
      // Each operand's shape was checked when it was made; only a broadcast
      // grows one ([2^40, 1] with [1, 2^40] overflows).
      if (out != shape && out != t.shape()) CheckedNumel(out, name);
      shape = std::move(out);
    }
    if (where && k == 0) {  // the condition does not take part in promotion
      FUSEBOX_ENSURE(t.dtype() == DType::kBool, name, ": the condition must be a bool tensor, got ", Describe(xs),
                     "; compare first, e.g. where(x > 0, a, b)");
      continue;
    }
    std::optional<DType>& category = t.dim() > 0 ? dims_dtype : zero_dim_dtype;
    category = category ? PromoteTypes(*category, t.dtype()) : t.dtype();
  }
  FUSEBOX_CHECK(!first, name, " needs at least one tensor operand");
  const bool have_tensor_dtype = dims_dtype || zero_dim_dtype;
  DType common = !dims_dtype        ? zero_dim_dtype.value_or(DType::kBool)
                 : !zero_dim_dtype ? *dims_dtype
                                   : PromoteAcrossCategories(*dims_dtype, *zero_dim_dtype);
  if (scalar_operand) common = have_tensor_dtype ? PromoteWithScalar(common) : DType::kFloat32;

  // The dtype the inputs are converted to, and the result's.
  DType input_dtype = common, result = common;
  switch (info.dtype_rule) {
    case DTypeRule::kArith:
      FUSEBOX_ENSURE(common != DType::kBool, name, " does not support bool tensors (got ", Describe(xs),
                     "); convert first, e.g. x.to(DType::kInt32)");
      break;
    case DTypeRule::kFloat:
      if (!IsFloating(common)) input_dtype = result = DType::kFloat32;
      break;
    case DTypeRule::kCompare: result = DType::kBool; break;
    case DTypeRule::kCast: input_dtype = common, result = cast_to; break;
    case DTypeRule::kSame:
    case DTypeRule::kWhere:
    case DTypeRule::kNone:
    case DTypeRule::kReduceSum:
    case DTypeRule::kReduceSame:
    case DTypeRule::kReduceIndex:
    case DTypeRule::kRandom: break;  // random ops record their nodes themselves (frontend/random.cc)
  }

  const std::optional<Strides> strides = ResultStrides(op, xs, shape, layout);
  std::vector<int64_t> order;  // the node's dims in the result's dims; empty: the same
  if (strides) {
    const auto memory = MemoryOrder(shape, *strides);
    order.assign(memory.begin(), memory.end());
  }
  Shape node_shape = shape;
  for (size_t k = 0; k < order.size(); ++k) node_shape[k] = shape[order[k]];

  frontend::OpRecorder recorder;
  frontend::CaptureSession* session = &recorder.session();

  graph::Node node{.op = op, .dtype = result, .shape = node_shape};
  for (size_t k = 0; k < xs.size(); ++k) {
    const DType want = (where && k == 0) ? DType::kBool : input_dtype;
    graph::NodeId id;
    if (const Tensor* t = xs[k].tensor) {
      Tensor expanded;  // only for an operand that broadcasts
      const Tensor& operand = t->shape() == shape ? *t : (expanded = t->expand(shape));
      id = order.empty() ? session->Operand(operand) : session->PermutedOperand(operand, order);
      if (operand.dtype() != want) {
        id = session->AddNode(graph::Node{.op = Op::kCast, .dtype = want, .shape = node_shape, .inputs = {id}});
      }
    } else {
      id = session->Constant(xs[k].scalar, want, node_shape);
    }
    node.inputs.push_back(id);
  }
  Tensor out = recorder.Finish(session->AddNode(std::move(node)), device, name);
  if (!strides) return out;
  if (!order.empty()) {
    std::vector<int64_t> inverse(order.size());
    for (size_t k = 0; k < order.size(); ++k) inverse[order[k]] = static_cast<int64_t>(k);
    out = out.permute(inverse);
  }
  // PyTorch's strides exactly; they differ from the view's only where no
  // element is addressed differently (size-1 dims, empty tensors).
  for (size_t d = 0; d < shape.size(); ++d) {
    FUSEBOX_CHECK(Numel(shape) == 0 || shape[d] == 1 || out.strides()[d] == (*strides)[d], name, ": result strides ",
                  ShapeToString(*strides), " do not address its node of shape ", ShapeToString(node_shape));
  }
  out.impl().strides = *strides;
  return out;
}

ResultLayout Layout(MemoryFormat format) {
  return format == MemoryFormat::kContiguous ? ResultLayout::kContiguous : ResultLayout::kPreserve;
}

}  // namespace

Tensor exp(const Tensor& x) { return Apply(Op::kExp, {x}); }
Tensor log(const Tensor& x) { return Apply(Op::kLog, {x}); }
Tensor tanh(const Tensor& x) { return Apply(Op::kTanh, {x}); }
Tensor sigmoid(const Tensor& x) { return Apply(Op::kSigmoid, {x}); }
Tensor relu(const Tensor& x) { return Apply(Op::kRelu, {x}); }
Tensor gelu(const Tensor& x, const std::string& approximate) {
  FUSEBOX_ENSURE(approximate == "none" || approximate == "tanh", "gelu: approximate must be \"none\" or \"tanh\", got \"",
                 approximate, "\"");
  return Apply(approximate == "tanh" ? Op::kGeluTanh : Op::kGelu, {x});
}
Tensor sqrt(const Tensor& x) { return Apply(Op::kSqrt, {x}); }
Tensor rsqrt(const Tensor& x) { return Apply(Op::kRsqrt, {x}); }
Tensor abs(const Tensor& x) { return Apply(Op::kAbs, {x}); }
Tensor neg(const Tensor& x) { return Apply(Op::kNeg, {x}); }
Tensor sin(const Tensor& x) { return Apply(Op::kSin, {x}); }
Tensor cos(const Tensor& x) { return Apply(Op::kCos, {x}); }
Tensor erf(const Tensor& x) { return Apply(Op::kErf, {x}); }
Tensor log1p(const Tensor& x) { return Apply(Op::kLog1p, {x}); }
Tensor expm1(const Tensor& x) { return Apply(Op::kExpm1, {x}); }
Tensor silu(const Tensor& x) { return Apply(Op::kSilu, {x}); }
Tensor softplus(const Tensor& x) { return Apply(Op::kSoftplus, {x}); }
// Integers are already whole: a copy, as PyTorch returns (and no float
// round trip that would lose int64 digits).
Tensor floor(const Tensor& x) { return IsFloating(x.dtype()) ? Apply(Op::kFloor, {x}) : x.clone(); }
Tensor ceil(const Tensor& x) { return IsFloating(x.dtype()) ? Apply(Op::kCeil, {x}) : x.clone(); }
Tensor round(const Tensor& x) { return IsFloating(x.dtype()) ? Apply(Op::kRound, {x}) : x.clone(); }
Tensor sign(const Tensor& x) { return Apply(Op::kSign, {x}); }

namespace {

// Whether `value` converts to the integer or bool `dtype` without overflow.
bool FitsIntegral(double value, DType dtype) {
  if (!std::isfinite(value)) return false;
  if (dtype == DType::kInt32) return value >= -2147483648.0 && value <= 2147483647.0;
  if (dtype == DType::kInt64) return value >= -9223372036854775808.0 && value < 9223372036854775808.0;
  return true;  // bool: nonzero is true
}

// `value` as a 0-d tensor of x's integer or bool dtype: an operand that, unlike
// a double scalar, does not widen x to float.
Tensor IntegralScalarLike(const Tensor& x, double value) { return full({}, value, x.device(), x.dtype()); }

}  // namespace

Tensor clamp(const Tensor& x, double min, double max) {
  FUSEBOX_ENSURE(x.defined(), "clamp: x is an undefined Tensor");
  // Whole bounds that fit an integer x are its integer scalars (PyTorch's
  // clamp(x, 0, 9)); others promote it as a float scalar does.
  if (!IsFloating(x.dtype()) && std::trunc(min) == min && std::trunc(max) == max && FitsIntegral(min, x.dtype()) &&
      FitsIntegral(max, x.dtype())) {
    return Apply(Op::kMinimum, {Apply(Op::kMaximum, {x, IntegralScalarLike(x, min)}), IntegralScalarLike(x, max)});
  }
  return Apply(Op::kMinimum, {Apply(Op::kMaximum, {x, min}), max});
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  FUSEBOX_ENSURE(x.defined() && mask.defined(), "masked_fill: x and mask must be defined Tensors");
  FUSEBOX_ENSURE(mask.dtype() == DType::kBool, "masked_fill: only supports boolean masks, but got mask with dtype ",
                 DTypeName(mask.dtype()), "; compare first, e.g. masked_fill(x, m != 0, v)");
  Shape shape;
  FUSEBOX_ENSURE(BroadcastShapes(x.shape(), mask.shape(), &shape) && shape == x.shape(), "masked_fill: mask ",
                 ShapeToString(mask.shape()), " does not broadcast to x's shape ", ShapeToString(x.shape()));
  // A float x takes the value as a scalar of the kernel (a double scalar
  // does not widen it); other dtypes take it as a 0-d tensor of x's dtype.
  if (IsFloating(x.dtype())) return Apply(Op::kWhere, {mask, value, x});
  FUSEBOX_ENSURE(FitsIntegral(value, x.dtype()), "masked_fill: value ", value, " cannot be converted to ",
                 DTypeName(x.dtype()), " without overflow");
  return Apply(Op::kWhere, {mask, IntegralScalarLike(x, value), x});
}

namespace {

// Where col - row <= diagonal (lower) or >= diagonal (upper) over the last
// two dims of x, zero elsewhere.
Tensor Triangle(const Tensor& x, int64_t diagonal, bool lower, const char* name) {
  FUSEBOX_ENSURE(x.defined(), name, ": x is an undefined Tensor");
  FUSEBOX_ENSURE(x.dim() >= 2, name, ": input tensor must have at least 2 dimensions, got ", ShapeToString(x.shape()));
  const int64_t rows = x.shape()[x.dim() - 2], cols = x.shape()[x.dim() - 1];
  // Positions computed in the kernel (iota), not arange tensors made on the host.
  const Tensor r = frontend::Iota({rows}, x.device()).unsqueeze(1), c = frontend::Iota({cols}, x.device());
  const Tensor offset = Apply(Op::kSub, {c, r});  // [rows, cols]
  const Tensor drop = lower ? Apply(Op::kGt, {offset, static_cast<double>(diagonal)})
                            : Apply(Op::kLt, {offset, static_cast<double>(diagonal)});
  return masked_fill(x, drop, 0.0);
}

}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return Triangle(x, diagonal, true, "tril"); }
Tensor triu(const Tensor& x, int64_t diagonal) { return Triangle(x, diagonal, false, "triu"); }

Tensor add(const Tensor& a, const Tensor& b) { return Apply(Op::kAdd, {a, b}); }
Tensor sub(const Tensor& a, const Tensor& b) { return Apply(Op::kSub, {a, b}); }
Tensor mul(const Tensor& a, const Tensor& b) { return Apply(Op::kMul, {a, b}); }
Tensor div(const Tensor& a, const Tensor& b) { return Apply(Op::kDiv, {a, b}); }
Tensor pow(const Tensor& x, double e) { return Apply(Op::kPow, {x, e}); }
Tensor pow(const Tensor& x, const Tensor& e) { return Apply(Op::kPow, {x, e}); }
Tensor maximum(const Tensor& a, const Tensor& b) { return Apply(Op::kMaximum, {a, b}); }
Tensor minimum(const Tensor& a, const Tensor& b) { return Apply(Op::kMinimum, {a, b}); }
Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) { return Apply(Op::kWhere, {c, a, b}); }
Tensor where(const Tensor& c, const Tensor& a, double b) { return Apply(Op::kWhere, {c, a, b}); }
Tensor where(const Tensor& c, double a, const Tensor& b) { return Apply(Op::kWhere, {c, a, b}); }
Tensor eq(const Tensor& a, const Tensor& b) { return Apply(Op::kEq, {a, b}); }
Tensor ne(const Tensor& a, const Tensor& b) { return Apply(Op::kNe, {a, b}); }
Tensor lt(const Tensor& a, const Tensor& b) { return Apply(Op::kLt, {a, b}); }
Tensor le(const Tensor& a, const Tensor& b) { return Apply(Op::kLe, {a, b}); }
Tensor gt(const Tensor& a, const Tensor& b) { return Apply(Op::kGt, {a, b}); }
Tensor ge(const Tensor& a, const Tensor& b) { return Apply(Op::kGe, {a, b}); }
Tensor eq(const Tensor& a, double b) { return Apply(Op::kEq, {a, b}); }
Tensor ne(const Tensor& a, double b) { return Apply(Op::kNe, {a, b}); }
Tensor lt(const Tensor& a, double b) { return Apply(Op::kLt, {a, b}); }
Tensor le(const Tensor& a, double b) { return Apply(Op::kLe, {a, b}); }
Tensor gt(const Tensor& a, double b) { return Apply(Op::kGt, {a, b}); }
Tensor ge(const Tensor& a, double b) { return Apply(Op::kGe, {a, b}); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return Apply(Op::kAdd, {a, b}); }
Tensor operator-(const Tensor& a, double b) { return Apply(Op::kSub, {a, b}); }
Tensor operator*(const Tensor& a, double b) { return Apply(Op::kMul, {a, b}); }
Tensor operator/(const Tensor& a, double b) { return Apply(Op::kDiv, {a, b}); }
Tensor operator+(double a, const Tensor& b) { return Apply(Op::kAdd, {a, b}); }
Tensor operator-(double a, const Tensor& b) { return Apply(Op::kSub, {a, b}); }
Tensor operator*(double a, const Tensor& b) { return Apply(Op::kMul, {a, b}); }
Tensor operator/(double a, const Tensor& b) { return Apply(Op::kDiv, {a, b}); }
Tensor operator-(const Tensor& x) { return neg(x); }

// --- Tensor methods that run kernels
Tensor Tensor::to(DType dtype, MemoryFormat format) const {
  if (dtype == this->dtype()) return *this;
  return Apply(Op::kCast, {*this}, dtype, Layout(format));
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone(MemoryFormat::kContiguous);
}

Tensor Tensor::clone(MemoryFormat format) const { return Apply(Op::kCopy, {*this}, DType::kFloat32, Layout(format)); }

}  // namespace fusebox
