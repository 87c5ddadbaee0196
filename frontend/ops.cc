// Every op funnels into Apply(): validate, broadcast, promote, record into the
// current capture (or a one-op eager capture that runs at once).
#include "frontend/ops.h"

#include <initializer_list>
#include <optional>
#include <span>

#include "absl/strings/str_join.h"
#include "frontend/capture.h"

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

// Records `op` on `operands`; `cast_to` is the result dtype of kCast. (A
// braced list, not a vector: one heap allocation fewer per traced op.)
Tensor Apply(Op op, std::initializer_list<Operand> operands, DType cast_to = DType::kFloat32) {
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
    case DTypeRule::kReduceIndex: break;
  }

  frontend::OpRecorder recorder;
  frontend::CaptureSession* session = &recorder.session();

  graph::Node node{.op = op, .dtype = result, .shape = shape};
  for (size_t k = 0; k < xs.size(); ++k) {
    const DType want = (where && k == 0) ? DType::kBool : input_dtype;
    graph::NodeId id;
    if (const Tensor* t = xs[k].tensor) {
      Tensor expanded;  // only for an operand that broadcasts
      const Tensor& operand = t->shape() == shape ? *t : (expanded = t->expand(shape));
      id = session->Operand(operand);
      if (operand.dtype() != want) {
        id = session->AddNode(graph::Node{.op = Op::kCast, .dtype = want, .shape = shape, .inputs = {id}});
      }
    } else {
      id = session->Constant(xs[k].scalar, want, shape);
    }
    node.inputs.push_back(id);
  }
  return recorder.Finish(session->AddNode(std::move(node)), device, name);
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
Tensor Tensor::to(DType dtype) const {
  if (dtype == this->dtype()) return *this;
  return Apply(Op::kCast, {*this}, dtype);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const { return Apply(Op::kCopy, {*this}); }

}  // namespace fusebox
