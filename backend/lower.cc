#include "backend/lower.h"

#include "backend/lower_move.h"
#include "backend/lower_util.h"
#include "backend/kernel_passes.h"

#include <climits>
#include <optional>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "tensor/error.h"

namespace fusebox::backend {
namespace {

using graph::Graph;
using graph::Node;
using graph::NodeId;
using graph::Op;
using graph::OpKind;

class Lowerer {
 public:
  Lowerer(const fusion::Plan& plan, const fusion::KernelGroup& group) : plan_(plan), g_(plan.graph), group_(group) {}

  Kernel Run() {
    kernel_.name = group_.name;
    kernel_.kind = group_.kind;
    kernel_.numel = Numel(group_.iteration_shape);
    std::vector<int32_t> symbols(group_.iteration_shape.size(), -1);
    for (size_t d = 0; d < symbols.size(); ++d) symbols[d] = plan_.symbols.symbol(group_.outputs.at(0), d);
    const int64_t bound = SetDynamicExtent(group_.iteration_shape, symbols, &kernel_) ? IndexExpr::kUnbounded : kernel_.numel;
    loop_index_ = IndexExpr::Var(bound);
    PlanRootIndex();
    std::vector<int> values;
    for (NodeId out : group_.outputs) values.push_back(Eval(out, std::nullopt));
    for (size_t k = 0; k < group_.outputs.size(); ++k) {
      const Node& node = g_.node(group_.outputs[k]);
      kernel_.buffers.push_back(
          {absl::StrCat("out", k), node.dtype, /*is_output=*/true, group_.outputs[k]});
      const auto target = store_operand_.find(group_.outputs[k]);
      Emit({.kind = StmtKind::kStore, .dtype = node.dtype, .args = {values[k]},
            .buffer = static_cast<int>(kernel_.buffers.size()) - 1,
            .index = RootIndex(target == store_operand_.end() ? out_strides_ : root_strides_[target->second])});
    }
    // Inputs were numbered while evaluating; they precede the outputs.
    // Headroom: a CUDA thread may form indices up to one block tile past numel.
    kernel_.index64 = NeedsIndex64(plan_, kernel_, max_bound_);
    return std::move(kernel_);
  }

 private:
  // Nodes evaluated at the kernel's own index whose strides shape the loop:
  // inputs and views reached from the outputs through pointwise ops.
  void PlanRootIndex() {
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
      // A data-movement node is evaluated at its contiguous position.
      const bool move = graph::Info(n.op).kind == OpKind::kMove && !IsBuffer(id);
      if (n.op == Op::kInput || n.op == Op::kView || IsBuffer(id) || move) {
        FUSEBOX_CHECK(n.shape == group_.iteration_shape, "operand %", id, " shape ", ShapeToString(n.shape),
                      " differs from the kernel's ", ShapeToString(group_.iteration_shape));
        root_operand_[id] = static_cast<int>(operands.size());
        operands.push_back(move ? ContiguousStrides(n.shape) : OperandStrides(n, IsBuffer(id)));
      } else if (graph::Info(n.op).kind == OpKind::kPointwise) {
        for (NodeId in : n.inputs) stack.push_back(in);
      }
    }
    Layout layout = Coalesce(group_.iteration_shape, operands);
    root_shape_ = layout.shape;
    root_strides_ = std::move(layout.strides);
    out_strides_ = root_strides_[0];
    root_index_ = Unravel(loop_index_, root_shape_);
  }

  bool IsBuffer(NodeId id) const {
    return std::find(group_.buffer_inputs.begin(), group_.buffer_inputs.end(), id) != group_.buffer_inputs.end();
  }

  IndexExpr RootIndex(const Strides& strides, int64_t offset = 0) {
    // A dense walk in loop order is the loop index itself.
    if (strides == ContiguousStrides(root_shape_)) return loop_index_ + IndexExpr::Const(offset);
    return Dot(root_index_, strides, offset);
  }

  int Emit(Stmt s) {
    if (s.kind != StmtKind::kStore) s.result = kernel_.num_temps++;
    if (s.kind == StmtKind::kLoad || s.kind == StmtKind::kIndexCheck) s.mask = mask_;
    if (s.is_access()) max_bound_ = std::max(max_bound_, s.index.bound());
    kernel_.body.push_back(std::move(s));
    return kernel_.body.back().result;
  }

  int InputBuffer(NodeId id) {
    auto [it, inserted] = input_buffer_.emplace(id, static_cast<int>(kernel_.buffers.size()));
    if (inserted) {
      kernel_.buffers.push_back({absl::StrCat("in", input_buffer_.size() - 1), g_.node(id).dtype, false, id});
    }
    return it->second;
  }

  // Evaluates node `id` at the kernel's root index (nullopt) or at contiguous
  // position `linear` of the node's own shape; returns the temporary.
  int Eval(NodeId id, const std::optional<IndexExpr>& linear) {
    const MemoKey key{id, linear.has_value(), linear.value_or(IndexExpr::Const(0)), mask_};
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    const Node& n = g_.node(id);
    int result = -1;
    switch (IsBuffer(id) ? Op::kInput : n.op) {
      case Op::kInput: {
        IndexExpr index = linear ? Address(*linear, n.shape, OperandStrides(n, IsBuffer(id)))
                                 : RootIndex(root_strides_[root_operand_[id]]);
        result = Emit({.kind = StmtKind::kLoad, .dtype = n.dtype, .buffer = InputBuffer(id), .index = index});
        break;
      }
      case Op::kConstant:
        result = Emit({.kind = StmtKind::kConstant, .dtype = n.dtype, .constant = n.scalar});
        break;
      case Op::kView: {
        IndexExpr source = linear ? Address(*linear, n.shape, n.strides) + IndexExpr::Const(n.offset)
                                  : RootIndex(root_strides_[root_operand_[id]], n.offset);
        max_bound_ = std::max(max_bound_, source.bound());
        result = Eval(n.inputs[0], source);
        break;
      }
      case Op::kIndexSelect:
      case Op::kEmbedding:
      case Op::kGather:
      case Op::kCat: {
        const IndexExpr pos = linear ? *linear : RootIndex(root_strides_[root_operand_[id]]);
        result = LowerMove(g_, id, pos,
                           {.eval = [this](NodeId in, const IndexExpr& at) { return Eval(in, at); },
                            .emit = [this](Stmt st) { return Emit(std::move(st)); }, .mask = &mask_,
                            .kernel = &kernel_});
        break;
      }
      default: {
        FUSEBOX_CHECK(graph::Info(n.op).kind == OpKind::kPointwise, "cannot lower op ", graph::OpName(n.op));
        std::vector<int> args;
        for (NodeId in : n.inputs) args.push_back(Eval(in, linear));
        result = Emit({.kind = StmtKind::kCompute, .dtype = n.dtype, .op = n.op, .args = std::move(args)});
      }
    }
    memo_.emplace(key, result);
    return result;
  }

  const fusion::Plan& plan_;
  const Graph& g_;
  const fusion::KernelGroup& group_;
  Kernel kernel_;
  IndexExpr loop_index_;  // `i`
  Shape root_shape_;
  std::vector<Strides> root_strides_;
  Strides out_strides_;
  std::vector<IndexExpr> root_index_;
  absl::flat_hash_map<NodeId, int> root_operand_;
  absl::flat_hash_map<NodeId, int> store_operand_;  // in-place outputs: their strides in root_strides_
  absl::flat_hash_map<NodeId, int> input_buffer_;
  // (node, at the root or at `linear`, under mask): its temporary.
  using MemoKey = std::tuple<NodeId, bool, IndexExpr, int>;
  absl::flat_hash_map<MemoKey, int> memo_;
  int64_t max_bound_ = 0;
  int mask_ = -1;  // the mask loads are emitted under (cat's operands: lower_move.h)
};

}  // namespace

Kernel LowerKernel(const fusion::Plan& plan, const fusion::KernelGroup& group, const TuningSnapshot& tuning) {
  Kernel kernel = group.kind != fusion::KernelKind::kPointwise ? LowerReduction(plan, group)
                                                                : Lowerer(plan, group).Run();
  return RunKernelPasses(std::move(kernel), NeutralKernelPasses(), nullptr, tuning);
}

}  // namespace fusebox::backend
