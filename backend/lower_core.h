// The lowering core shared by the pointwise (lower.cc) and reduction
// (lower_reduction.cc) lowerings. It owns the kernel being built and
// evaluates a node in a context (fusion/row_contexts.h): inputs and values of
// earlier kernels as loads, constants, views as a new index into their base,
// data movement through LowerMove, pointwise ops as computes, each once per
// (node, context, block, mask). The lowerings say, through a few hooks, how a
// context indexes an operand and what a reduction adds (its accumulators,
// row values read through views, cached loads).
#pragma once

#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "backend/kernel_ir.h"
#include "fusion/plan.h"
#include "fusion/row_contexts.h"

namespace fusebox::backend {

class LoweringCore {
 public:
  LoweringCore(const fusion::Plan& plan, const fusion::KernelGroup& group);
  virtual ~LoweringCore() = default;

 protected:
  using Ctx = fusion::Ctx;

  // Evaluates node `id` in context `ctx` (kLinear: at contiguous position
  // `linear` of the node's own shape); returns its temporary.
  int Eval(graph::NodeId id, Ctx ctx, const IndexExpr& linear = IndexExpr::Const(0));
  // Appends `s` to the current block; returns its temporary.
  int Emit(Stmt s);
  // Stores `value` of output `out` at `index`, as the kernel's next output buffer.
  void EmitStore(graph::NodeId out, int value, IndexExpr index);
  // Statements from here on go to `block`; values are evaluated anew there.
  void StartBlock(std::vector<Stmt>* block);
  const std::vector<Stmt>* block() const { return block_; }
  // Whether `id` is a value an earlier kernel stored, loaded here.
  bool IsBuffer(graph::NodeId id) const;
  // The finished kernel (its index width from the bounds seen, the
  // run-time sizes its index math names).
  Kernel Finish();
  // Node `id`'s dims' symbols (fusion::DimSymbols, -1 for a fixed size) and
  // the factors their sizes are of the symbols'.
  std::pair<std::vector<int32_t>, std::vector<int64_t>> SymbolsOf(graph::NodeId id) const;
  // Node `id`'s dims' sizes as index math (run-time ones in dynamic plans).
  std::vector<IndexExpr> NodeSizes(graph::NodeId id) const;

  // The index of node `id` read in context `ctx` (not kLinear) with
  // `strides` and `offset`.
  virtual IndexExpr IndexAt(graph::NodeId id, Ctx ctx, const Strides& strides, int64_t offset) = 0;
  // A value the lowering holds instead of evaluating it (a reduction's accumulator).
  virtual std::optional<int> HeldValue(graph::NodeId id, Ctx ctx) { return std::nullopt; }
  // The context view `view`, read in `ctx`, reads its base in (kLinear: at
  // the position its strides give).
  virtual Ctx ViewBaseContext(graph::NodeId view, Ctx ctx) { return Ctx::kLinear; }
  // Called on each load before it is emitted (a reduction gives it a register slot).
  virtual void PrepareLoad(Stmt* load, Ctx ctx) {}

  const fusion::Plan& plan_;
  const graph::Graph& g_;
  const fusion::KernelGroup& group_;
  Kernel kernel_;
  int64_t max_bound_ = 0;
  int mask_ = -1;  // the mask loads are emitted under (cat's operands: lower_move.h)

 private:
  IndexExpr Index(graph::NodeId id, Ctx ctx, const IndexExpr& linear, const Strides& strides, int64_t offset = 0);
  int InputBuffer(graph::NodeId id);

  std::vector<Stmt>* block_ = &kernel_.body;
  int block_id_ = 0;
  int num_outputs_ = 0;
  absl::flat_hash_map<graph::NodeId, int> input_buffer_;
  // (node, context, the linear index in kLinear, block, mask): its temporary.
  using MemoKey = std::tuple<graph::NodeId, Ctx, IndexExpr, int, int>;
  absl::flat_hash_map<MemoKey, int> memo_;
};

}  // namespace fusebox::backend
