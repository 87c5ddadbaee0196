#include "backend/lower.h"

#include "backend/kernel_passes.h"
#include "backend/lower_core.h"
#include "backend/lower_util.h"

#include "absl/container/flat_hash_map.h"
#include "tensor/error.h"

namespace fusebox::backend {
namespace {

using graph::Node;
using graph::NodeId;
using graph::Op;
using graph::OpKind;

// A pointwise kernel reads every value at its root index (kFull) or, below
// views and data movement, at linear positions (kLinear).
class Lowerer : public LoweringCore {
 public:
  using LoweringCore::LoweringCore;

  Kernel Run() {
    kernel_.numel = Numel(group_.iteration_shape);
    const auto [symbols, factors] = SymbolsOf(group_.outputs.at(0));
    const int64_t bound =
        SetDynamicExtent(group_.iteration_shape, symbols, factors, &kernel_) ? IndexExpr::kUnbounded : kernel_.numel;
    loop_index_ = IndexExpr::Var(bound);
    PlanRootIndex(symbols, factors);
    std::vector<int> values;
    for (NodeId out : group_.outputs) values.push_back(Eval(out, Ctx::kFull));
    for (size_t k = 0; k < group_.outputs.size(); ++k) {
      const auto target = store_operand_.find(group_.outputs[k]);
      EmitStore(group_.outputs[k], values[k],
                RootIndex(target == store_operand_.end() ? out_strides_ : root_strides_[target->second]));
    }
    // Inputs were numbered while evaluating; they precede the outputs.
    // Headroom: a CUDA thread may form indices up to one block tile past numel.
    return Finish();
  }

 private:
  // Nodes evaluated at the kernel's own index whose strides shape the loop:
  // inputs and views reached from the outputs through pointwise ops.
  void PlanRootIndex(const std::vector<int32_t>& symbols, const std::vector<int64_t>& factors) {
    std::vector<NodeId> stack(group_.outputs.begin(), group_.outputs.end());
    absl::flat_hash_map<NodeId, bool> seen;
    std::vector<Strides> operands = {ContiguousStrides(group_.iteration_shape)};
    // An in-place output is stored through its target input's strides.
    for (NodeId out : group_.outputs) {
      if (const NodeId target = g_.StoreTarget(out); target >= 0) {
        store_operand_[out] = static_cast<int>(operands.size());
        operands.push_back(g_.node(target).strides);
      }
    }
    while (!stack.empty()) {
      NodeId id = stack.back();
      stack.pop_back();
      if (!seen.emplace(id, true).second) continue;
      const Node& n = g_.node(id);
      // A data-movement node and iota are evaluated at their contiguous position.
      const bool move = (graph::Info(n.op).kind == OpKind::kMove || n.op == Op::kIota) && !IsBuffer(id);
      if (n.op == Op::kInput || n.op == Op::kView || IsBuffer(id) || move) {
        FUSEBOX_CHECK(n.shape == group_.iteration_shape, "operand %", id, " shape ", ShapeToString(n.shape),
                      " differs from the kernel's ", ShapeToString(group_.iteration_shape));
        root_operand_[id] = static_cast<int>(operands.size());
        operands.push_back(move ? ContiguousStrides(n.shape) : OperandStrides(n, IsBuffer(id)));
      } else if (graph::Info(n.op).kind == OpKind::kPointwise) {
        for (NodeId in : n.inputs) stack.push_back(in);
      }
    }
    Layout layout = Coalesce(group_.iteration_shape, operands, symbols, factors);
    root_shape_ = layout.shape;
    root_strides_ = std::move(layout.strides);
    out_strides_ = root_strides_[0];
    root_sizes_ = DimSizes(root_shape_, layout.symbols, layout.factors);
    root_index_ = Unravel(loop_index_, root_shape_, root_sizes_);
  }

  IndexExpr RootIndex(const Strides& strides, int64_t offset = 0) {
    // A dense walk in loop order is the loop index itself.
    if (strides == ContiguousStrides(root_shape_)) return loop_index_ + IndexExpr::Const(offset);
    return DotSized(root_index_, root_shape_, root_sizes_, strides, offset);
  }

  // The root index walks each operand with its merged strides (PlanRootIndex).
  IndexExpr IndexAt(NodeId id, Ctx ctx, const Strides& strides, int64_t offset) override {
    FUSEBOX_CHECK(ctx == Ctx::kFull, "pointwise kernel ", group_.name, " reads %", id, " per row");
    return RootIndex(root_strides_[root_operand_[id]], offset);
  }

  IndexExpr loop_index_;  // `i`
  Shape root_shape_;
  std::vector<Strides> root_strides_;
  Strides out_strides_;
  std::vector<IndexExpr> root_index_, root_sizes_;
  absl::flat_hash_map<NodeId, int> root_operand_;
  absl::flat_hash_map<NodeId, int> store_operand_;  // in-place outputs: their strides in root_strides_
};

}  // namespace

Kernel LowerKernel(const fusion::Plan& plan, const fusion::KernelGroup& group, const TuningSnapshot& tuning) {
  Kernel kernel = group.kind != fusion::KernelKind::kPointwise ? LowerReduction(plan, group)
                                                                : Lowerer(plan, group).Run();
  return RunKernelPasses(std::move(kernel), NeutralKernelPasses(), nullptr, tuning);
}

}  // namespace fusebox::backend
