#include "backend/lower_core.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "backend/lower_move.h"
#include "backend/lower_util.h"
#include "tensor/error.h"

namespace fusebox::backend {

using graph::Node;
using graph::NodeId;
using graph::Op;
using graph::OpKind;

LoweringCore::LoweringCore(const fusion::Plan& plan, const fusion::KernelGroup& group)
    : plan_(plan), g_(plan.graph), group_(group) {
  kernel_.name = group.name;
  kernel_.kind = group.kind;
}

bool LoweringCore::IsBuffer(NodeId id) const {
  return std::find(group_.buffer_inputs.begin(), group_.buffer_inputs.end(), id) != group_.buffer_inputs.end();
}

void LoweringCore::StartBlock(std::vector<Stmt>* block) {
  block_ = block;
  ++block_id_;
}

int LoweringCore::Emit(Stmt s) {
  if (s.kind != StmtKind::kStore) s.result = kernel_.num_temps++;
  if (s.kind == StmtKind::kLoad || s.kind == StmtKind::kIndexCheck) s.mask = mask_;
  if (s.is_access()) max_bound_ = std::max(max_bound_, s.index.bound());
  block_->push_back(std::move(s));
  return block_->back().result;
}

void LoweringCore::EmitStore(NodeId out, int value, IndexExpr index) {
  const DType dtype = g_.node(out).dtype;
  kernel_.buffers.push_back({absl::StrCat("out", num_outputs_++), dtype, /*is_output=*/true, out});
  Emit({.kind = StmtKind::kStore, .dtype = dtype, .args = {value},
        .buffer = static_cast<int>(kernel_.buffers.size()) - 1, .index = std::move(index)});
}

Kernel LoweringCore::Finish() {
  kernel_.index64 = NeedsIndex64(plan_, kernel_, max_bound_);
  // The run-time sizes some index names are the kernel's size arguments.
  std::vector<const IndexExpr*> indices;
  auto add = [&](const std::vector<Stmt>& block) {
    for (const Stmt& s : block) indices.push_back(&s.index);
  };
  add(kernel_.body), add(kernel_.elementwise), add(kernel_.row_body);
  for (const Pass& pass : kernel_.passes) add(pass.body);
  kernel_.size_args.clear();
  for (int32_t k = 0; k < std::min(plan_.symbols.num_symbols(), IndexExpr::kMaxSizeArgs); ++k) {
    if (std::any_of(indices.begin(), indices.end(), [&](const IndexExpr* e) { return e->DependsOn(SizeArgName(k)); })) {
      kernel_.size_args.push_back(k);
    }
  }
  return std::move(kernel_);
}

std::pair<std::vector<int32_t>, std::vector<int64_t>> LoweringCore::SymbolsOf(NodeId id) const {
  const size_t rank = g_.node(id).shape.size();
  std::vector<int32_t> symbols(rank);
  std::vector<int64_t> factors(rank);
  for (size_t d = 0; d < rank; ++d) {
    symbols[d] = plan_.symbols.symbol(id, static_cast<int64_t>(d));
    factors[d] = plan_.symbols.factor(id, static_cast<int64_t>(d));
  }
  return {std::move(symbols), std::move(factors)};
}

std::vector<IndexExpr> LoweringCore::NodeSizes(NodeId id) const {
  const auto [symbols, factors] = SymbolsOf(id);
  return DimSizes(g_.node(id).shape, symbols, factors);
}

int LoweringCore::InputBuffer(NodeId id) {
  auto [it, inserted] = input_buffer_.emplace(id, static_cast<int>(kernel_.buffers.size()));
  if (inserted) kernel_.buffers.push_back({absl::StrCat("in", input_buffer_.size() - 1), g_.node(id).dtype, false, id});
  return it->second;
}

IndexExpr LoweringCore::Index(NodeId id, Ctx ctx, const IndexExpr& linear, const Strides& strides, int64_t offset) {
  if (ctx == Ctx::kLinear) {
    const Shape& shape = g_.node(id).shape;
    const std::vector<IndexExpr> sizes = NodeSizes(id);
    if (std::all_of(sizes.begin(), sizes.end(), [](const IndexExpr& e) { return e.is_const(); })) {
      return Address(linear, shape, strides) + IndexExpr::Const(offset);
    }
    // Run-time sizes: by dim, each divided by its size at run time.
    return DotSized(Unravel(linear, shape, sizes), shape, sizes, strides, offset);
  }
  return IndexAt(id, ctx, strides, offset);
}

int LoweringCore::Eval(NodeId id, Ctx ctx, const IndexExpr& linear) {
  if (std::optional<int> held = HeldValue(id, ctx)) return *held;
  const MemoKey key{id, ctx, ctx == Ctx::kLinear ? linear : IndexExpr::Const(0), block_id_, mask_};
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  const Node& n = g_.node(id);
  int result;
  if (n.op == Op::kInput || IsBuffer(id)) {
    Stmt load{.kind = StmtKind::kLoad, .dtype = n.dtype, .buffer = InputBuffer(id),
              .index = Index(id, ctx, linear, OperandStrides(n, IsBuffer(id)))};
    PrepareLoad(&load, ctx);
    result = Emit(std::move(load));
  } else if (n.op == Op::kConstant) {
    result = Emit({.kind = StmtKind::kConstant, .dtype = n.dtype, .constant = n.scalar});
  } else if (n.op == Op::kIota) {
    // The element's row-major position in iota's own shape.
    IndexExpr pos = ctx == Ctx::kLinear ? linear : IndexAt(id, ctx, ContiguousStrides(n.shape), 0);
    max_bound_ = std::max(max_bound_, pos.bound());
    result = Emit({.kind = StmtKind::kPosition, .dtype = DType::kInt64, .index = std::move(pos)});
  } else if (n.op == Op::kView) {
    const Ctx base_ctx = ViewBaseContext(id, ctx);
    if (base_ctx != Ctx::kLinear) {
      result = Eval(n.inputs[0], base_ctx);
    } else {
      const IndexExpr source = Index(id, ctx, linear, n.strides, n.offset);
      max_bound_ = std::max(max_bound_, source.bound());
      result = Eval(n.inputs[0], Ctx::kLinear, source);
    }
  } else if (graph::Info(n.op).kind == OpKind::kMove) {
    // Evaluated at its contiguous position; its operands at the positions
    // LowerMove computes.
    const IndexExpr pos = ctx == Ctx::kLinear ? linear : IndexAt(id, ctx, ContiguousStrides(n.shape), 0);
    result = LowerMove(g_, id, pos,
                       {.eval = [this](NodeId in, const IndexExpr& at) { return Eval(in, Ctx::kLinear, at); },
                        .sizes = [this](NodeId in) { return NodeSizes(in); },
                        .emit = [this](Stmt st) { return Emit(std::move(st)); }, .mask = &mask_,
                        .kernel = &kernel_});
  } else {
    FUSEBOX_CHECK(graph::Info(n.op).kind == OpKind::kPointwise, "cannot lower op ", graph::OpName(n.op));
    std::vector<int> args;
    for (NodeId in : n.inputs) args.push_back(Eval(in, ctx, linear));
    result = Emit({.kind = StmtKind::kCompute, .dtype = n.dtype, .op = n.op, .args = std::move(args)});
  }
  memo_.emplace(key, result);
  return result;
}

}  // namespace fusebox::backend
