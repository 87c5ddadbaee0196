// In-place ops (Tensor::add_, copy_, fill_, ...). Each computes its result
// out of place first, so an operand that shares self's memory (`x.add_(x.t())`)
// is read before anything is written; then one pointwise kernel stores the
// result through self's strides into self's storage (a graph whose output has
// self as its store target) and the storage's version goes up. Inside
// compile() an in-place op breaks the graph: there is no functionalization
// yet, and running what was captured first keeps every earlier read of the
// memory at its old value.
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/capture.h"
#include "frontend/ops.h"
#include "frontend/runtime.h"

namespace fusebox {
namespace {

using graph::Node;
using graph::NodeId;
using graph::Op;

// The scope of one in-place op: breaks the graph under compile(), then keeps
// capture off so the op's kernels run at once, on concrete data.
class InPlaceScope {
 public:
  InPlaceScope(const Tensor& self, const char* op, const std::source_location& loc) {
    FUSEBOX_ENSURE(self.defined(), op, ": called on an undefined Tensor");
    frontend::BreakGraph(absl::StrCat("in-place op '", op, "'"), loc);
    eager_.emplace();
    frontend::Realize(self.impl(), op, loc);
    // As PyTorch: a write through an expanded dim would hit one element many times.
    for (int64_t d = 0; d < self.dim(); ++d) {
      FUSEBOX_ENSURE(self.shape()[d] <= 1 || self.strides()[d] != 0, op, ": more than one element of ",
                     self.str(), " (strides ", ShapeToString(self.strides()), ") refers to one memory location (dim ",
                     d, " is expanded); clone() it before writing to it");
    }
  }

 private:
  std::optional<frontend::EagerScope> eager_;
};

void CheckOperand(const Tensor& self, const Tensor& other, const char* op, const char* what) {
  FUSEBOX_ENSURE(other.defined(), op, ": ", what, " is an undefined Tensor");
  Shape shape;
  FUSEBOX_ENSURE(BroadcastShapes(self.shape(), other.shape(), &shape) && shape == self.shape(), op, ": ", what,
                 " of shape ", ShapeToString(other.shape()), " cannot be broadcast to self's shape ",
                 ShapeToString(self.shape()), "; an in-place op never changes self's shape, so use the "
                 "out-of-place op for a broadcast result");
}

// One kernel: `value` (built on `builder`, whose input 0 is self) is stored
// through self's strides into self's storage.
void RunInto(const Tensor& self, const graph::GraphBuilder& builder, NodeId target, NodeId value,
             const std::vector<Tensor>& inputs) {
  frontend::RunGraph(builder.Build({value}, {target}), inputs);
  if (self.impl().storage != nullptr) self.impl().storage->bump_version();
}

// A node of `t`'s dtype and shape.
Node NodeLike(const Tensor& t, Op op) {
  Node node;
  node.op = op;
  node.dtype = t.dtype();
  node.shape = t.shape();
  return node;
}

NodeId AddInput(graph::GraphBuilder& builder, const Tensor& t, int32_t index) {
  Node node = NodeLike(t, Op::kInput);
  node.input_index = index;
  node.strides = t.strides();
  return builder.Add(std::move(node));
}

// Stores `src` (same device; broadcast to self's shape; any dtype, cast) into self.
void StoreInto(const Tensor& self, const Tensor& src) {
  const Tensor value = src.shape() == self.shape() ? src : src.expand(self.shape());
  graph::GraphBuilder builder(self.device());
  const NodeId target = AddInput(builder, self, 0);
  Node out = NodeLike(self, value.dtype() == self.dtype() ? Op::kCopy : Op::kCast);
  out.inputs = {AddInput(builder, value, 1)};
  RunInto(self, builder, target, builder.Add(std::move(out)), {self, value});
}

// self = compute(), where compute is `self <op> other` out of place; `other`
// is null for a scalar.
template <typename Compute>
const Tensor& Update(const Tensor& self, const char* op, const Tensor* other, const std::source_location& loc,
                     Compute compute) {
  InPlaceScope scope(self, op, loc);
  if (other != nullptr) {
    CheckOperand(self, *other, op, "other");
    FUSEBOX_ENSURE(other->device() == self.device(), op, ": other is on ", other->device().str(), ", self on ",
                   self.device().str(), "; move it with .to(Device) first");
  }
  const Tensor result = compute();
  FUSEBOX_ENSURE(CanCast(result.dtype(), self.dtype()), op, ": result type ", DTypeName(result.dtype()),
                 " can't be cast to the desired output type ", DTypeName(self.dtype()), " of ", self.str(),
                 "; use the out-of-place op (its result is ", DTypeName(result.dtype()),
                 "), or give self a dtype that holds it");
  StoreInto(self, result);
  return self;
}

}  // namespace

const Tensor& Tensor::add_(const Tensor& other, std::source_location loc) const {
  return Update(*this, "add_", &other, loc, [&] { return *this + other; });
}
const Tensor& Tensor::sub_(const Tensor& other, std::source_location loc) const {
  return Update(*this, "sub_", &other, loc, [&] { return *this - other; });
}
const Tensor& Tensor::mul_(const Tensor& other, std::source_location loc) const {
  return Update(*this, "mul_", &other, loc, [&] { return *this * other; });
}
const Tensor& Tensor::div_(const Tensor& other, std::source_location loc) const {
  return Update(*this, "div_", &other, loc, [&] { return *this / other; });
}
const Tensor& Tensor::add_(double other, std::source_location loc) const {
  return Update(*this, "add_", nullptr, loc, [&] { return *this + other; });
}
const Tensor& Tensor::sub_(double other, std::source_location loc) const {
  return Update(*this, "sub_", nullptr, loc, [&] { return *this - other; });
}
const Tensor& Tensor::mul_(double other, std::source_location loc) const {
  return Update(*this, "mul_", nullptr, loc, [&] { return *this * other; });
}
const Tensor& Tensor::div_(double other, std::source_location loc) const {
  return Update(*this, "div_", nullptr, loc, [&] { return *this / other; });
}

const Tensor& Tensor::copy_(const Tensor& src, std::source_location loc) const {
  InPlaceScope scope(*this, "copy_", loc);
  CheckOperand(*this, src, "copy_", "src");
  frontend::Realize(src.impl(), "copy_", loc);
  Tensor value = src.to(device());
  // The kernel would read memory it writes: read a copy instead.
  if (value.impl().storage == impl().storage) value = value.clone();
  StoreInto(*this, value);
  return *this;
}

const Tensor& Tensor::fill_(double value, std::source_location loc) const {
  InPlaceScope scope(*this, "fill_", loc);
  graph::GraphBuilder builder(device());
  const NodeId target = AddInput(builder, *this, 0);
  Node constant = NodeLike(*this, Op::kConstant);
  constant.scalar = value;
  RunInto(*this, builder, target, builder.Add(std::move(constant)), {*this});
  return *this;
}

const Tensor& Tensor::zero_(std::source_location loc) const { return fill_(0.0, loc); }

}  // namespace fusebox
