// Lowers a reduction group: per row `r`, one pass over the row (index `j`) per
// dependency level of its reductions (softmax: max, then sum), then the
// full-shape stores, then the per-row stores. Values of the row (accumulators,
// and pointwise ops on them) are read wherever a row-broadcast view asks for
// them; fusion (fuse_kernels.cc) only builds groups where that is legal.
#include <algorithm>
#include <climits>
#include <optional>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "backend/lower_move.h"
#include "backend/lower_util.h"
#include "tensor/error.h"

namespace fusebox::backend {
namespace {

using graph::Graph;
using graph::Node;
using graph::NodeId;
using graph::Op;
using graph::OpKind;

enum class Ctx { kFull, kRow, kSqueezedRow, kLinear };

class ReductionLowerer {
 public:
  ReductionLowerer(const fusion::Plan& plan, const fusion::KernelGroup& group)
      : plan_(plan), g_(plan.graph), group_(group) {}

  Kernel Run() {
    const Shape& shape = group_.iteration_shape;
    row_shape_ = fusion::RowShape(group_);
    Shape row_dims, reduced_dims;
    std::vector<int32_t> row_symbols;  // reduced dims are never run-time sizes
    const NodeId reduced = g_.node(group_.reductions.at(0)).inputs[0];
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      if (IsAxis(d)) {
        reduced_dims.push_back(shape[d]);
      } else {
        row_dims.push_back(shape[d]);
        row_symbols.push_back(plan_.symbols.symbol(reduced, d));
      }
    }
    kernel_.name = group_.name;
    kernel_.kind = group_.kind;
    kernel_.num_rows = Numel(row_dims);
    kernel_.row_length = Numel(reduced_dims);
    kernel_.numel = kernel_.num_rows * kernel_.row_length;
    const bool dynamic_rows = SetDynamicExtent(row_dims, row_symbols, &kernel_);
    kernel_.axis = ReducesInnermost(shape) ? ReductionAxis::kInner : ReductionAxis::kOuter;
    // Looped rows that end in the innermost dim record their cached loads
    // too: on CUDA a thread-block cluster may hold them (cuda_cluster.h).
    // Column reductions record them too: a CUDA block may hold its share of
    // each column (cuda/outer_reduction.h).
    caches_row_ = kernel_.kind == fusion::KernelKind::kPersistent ||
                  (kernel_.kind == fusion::KernelKind::kReduction && kernel_.axis == ReductionAxis::kInner) ||
                  kernel_.is_column_reduction();
    const std::vector<IndexExpr> r =
        Unravel(IndexExpr::Var("r", dynamic_rows ? IndexExpr::kUnbounded : kernel_.num_rows), row_dims);
    const std::vector<IndexExpr> j = Unravel(IndexExpr::Var("j", kernel_.row_length), reduced_dims);
    for (size_t d = 0, ri = 0, ji = 0; d < shape.size(); ++d) {
      if (IsAxis(d)) {
        full_index_.push_back(j[ji++]);
        row_index_.push_back(IndexExpr::Const(0));
      } else {
        full_index_.push_back(r[ri]);
        squeezed_index_.push_back(r[ri]);
        row_index_.push_back(r[ri++]);
      }
    }
    MarkRowValues();

    // One pass per dependency level: a reduction reading another goes after it.
    absl::flat_hash_map<NodeId, int> level;
    for (NodeId red : group_.reductions) {
      int l = 0;
      for (NodeId dep : group_.reductions) {
        if (dep != red && level.contains(dep) && Reaches(g_.node(red).inputs[0], dep)) l = std::max(l, level[dep] + 1);
      }
      level[red] = l;
      if (static_cast<int>(kernel_.passes.size()) <= l) kernel_.passes.resize(l + 1);
    }
    for (size_t p = 0; p < kernel_.passes.size(); ++p) {
      block_ = &kernel_.passes[p].body;
      ++block_id_;
      for (NodeId red : group_.reductions) {
        if (level[red] != static_cast<int>(p)) continue;
        const Node& n = g_.node(red);
        const int value = Eval(n.inputs[0], Ctx::kFull, {});
        const int acc = kernel_.num_temps++;
        if (graph::Info(n.op).dtype_rule == graph::DTypeRule::kReduceIndex) {
          const int index = kernel_.num_temps++;
          kernel_.passes[p].accumulators.push_back({acc, n.op, g_.node(n.inputs[0]).dtype, value, index});
          accumulator_[red] = index;
        } else {
          kernel_.passes[p].accumulators.push_back({acc, n.op, n.dtype, value});
          accumulator_[red] = acc;
        }
      }
    }

    // Stores: full-shape values in an element loop, row values once per row.
    std::vector<std::pair<NodeId, int>> full, row;
    const bool row_is_full = row_shape_ == shape;
    block_ = &kernel_.elementwise;
    ++block_id_;
    for (NodeId out : group_.outputs) {
      // In-place writes go through pointwise kernels only (frontend/inplace_ops.cc).
      FUSEBOX_CHECK(g_.StoreTarget(out) < 0, "reduction kernel ", group_.name, " cannot store %", out, " in place");
      if (g_.node(out).shape == shape && !row_is_full) full.emplace_back(out, Eval(out, Ctx::kFull, {}));
    }
    block_ = &kernel_.row_body;
    ++block_id_;
    std::vector<std::pair<NodeId, int>> squeezed;
    for (NodeId out : group_.outputs) {
      const Shape& s = g_.node(out).shape;
      if (s == row_shape_ || row_is_full) {
        row.emplace_back(out, Eval(out, Ctx::kRow, {}));
      } else if (s != shape) {
        squeezed.emplace_back(out, Eval(out, Ctx::kSqueezedRow, {}));
      }
    }
    int k = 0;
    for (auto [out, value] : full) {
      block_ = &kernel_.elementwise;
      Store(out, value, Dot(full_index_, ContiguousStrides(shape)), k++);
    }
    for (auto [out, value] : row) {
      block_ = &kernel_.row_body;
      Store(out, value, Dot(row_index_, ContiguousStrides(row_shape_)), k++);
    }
    for (auto [out, value] : squeezed) {
      block_ = &kernel_.row_body;
      Store(out, value, Dot(squeezed_index_, ContiguousStrides(g_.node(out).shape)), k++);
    }
    kernel_.index64 = NeedsIndex64(plan_, kernel_, max_bound_);
    return std::move(kernel_);
  }

 private:
  // The innermost non-trivial dim decides which walk is coalesced.
  bool ReducesInnermost(const Shape& shape) const {
    int64_t inner = static_cast<int64_t>(shape.size()) - 1;
    while (inner > 0 && shape[inner] == 1) --inner;
    return inner < 0 || IsAxis(inner);
  }
  bool IsAxis(int64_t d) const { return std::binary_search(group_.axes.begin(), group_.axes.end(), d); }
  bool IsBuffer(NodeId id) const {
    return std::find(group_.buffer_inputs.begin(), group_.buffer_inputs.end(), id) != group_.buffer_inputs.end();
  }
  bool InGroup(NodeId id) const {
    return std::find(group_.reductions.begin(), group_.reductions.end(), id) != group_.reductions.end();
  }

  // Whether `from` depends on `target` (without passing other kernels' values).
  bool Reaches(NodeId from, NodeId target) const {
    std::vector<NodeId> stack = {from};
    absl::flat_hash_set<NodeId> seen;
    while (!stack.empty()) {
      const NodeId x = stack.back();
      stack.pop_back();
      if (x == target) return true;
      if (!seen.insert(x).second || IsBuffer(x)) continue;
      for (NodeId in : g_.node(x).inputs) stack.push_back(in);
    }
    return false;
  }

  // Row values: the group's reductions and everything computed from them.
  void MarkRowValues() {
    for (NodeId id = 0; id < g_.size(); ++id) {
      bool row = InGroup(id);
      if (!IsBuffer(id)) {
        for (NodeId in : g_.node(id).inputs) row = row || row_value_.contains(in);
      }
      if (row) row_value_.insert(id);
    }
  }

  int Emit(Stmt s) {
    if (s.kind != StmtKind::kStore) s.result = kernel_.num_temps++;
    if (s.kind == StmtKind::kLoad || s.kind == StmtKind::kIndexCheck) s.mask = mask_;
    if (s.is_access()) max_bound_ = std::max(max_bound_, s.index.bound());
    block_->push_back(std::move(s));
    return block_->back().result;
  }

  int CacheSlot(int buffer, const IndexExpr& index, DType dtype) {
    auto [it, inserted] = cache_slot_.emplace(std::make_pair(buffer, index), static_cast<int>(kernel_.cached_loads.size()));
    if (inserted) kernel_.cached_loads.push_back({buffer, index, dtype});
    return it->second;
  }

  void Store(NodeId out, int value, IndexExpr index, int k) {
    kernel_.buffers.push_back({absl::StrCat("out", k), g_.node(out).dtype, /*is_output=*/true, out});
    Emit({.kind = StmtKind::kStore, .dtype = g_.node(out).dtype, .args = {value},
          .buffer = static_cast<int>(kernel_.buffers.size()) - 1, .index = std::move(index)});
  }

  int InputBuffer(NodeId id) {
    auto [it, inserted] = input_buffer_.emplace(id, static_cast<int>(kernel_.buffers.size()));
    if (inserted) kernel_.buffers.push_back({absl::StrCat("in", input_buffer_.size() - 1), g_.node(id).dtype, false, id});
    return it->second;
  }

  // The multi-index a context reads a node of `shape` at.
  IndexExpr Index(Ctx ctx, const IndexExpr& linear, const Shape& shape, const Strides& strides, int64_t offset = 0) {
    switch (ctx) {
      case Ctx::kFull: return Dot(full_index_, strides, offset);
      case Ctx::kRow: return Dot(row_index_, strides, offset);
      case Ctx::kSqueezedRow: return Dot(squeezed_index_, strides, offset);
      case Ctx::kLinear: return Address(linear, shape, strides) + IndexExpr::Const(offset);
    }
    return IndexExpr::Const(0);
  }

  int Eval(NodeId id, Ctx ctx, const IndexExpr& linear) {
    const Node& n = g_.node(id);
    if (InGroup(id)) {
      FUSEBOX_CHECK(ctx == Ctx::kRow || (ctx == Ctx::kFull && row_shape_ == group_.iteration_shape),
                    "reduction %", id, " read outside its row");
      FUSEBOX_CHECK(accumulator_.contains(id), "reduction %", id, " read before its pass");
      return accumulator_[id];
    }
    const MemoKey key{id, ctx, ctx == Ctx::kLinear ? linear : IndexExpr::Const(0), block_id_, mask_};
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    int result;
    if (n.op == Op::kInput || IsBuffer(id)) {
      const Strides strides = OperandStrides(n, IsBuffer(id));
      Stmt load{.kind = StmtKind::kLoad, .dtype = n.dtype, .buffer = InputBuffer(id),
                .index = Index(ctx, linear, n.shape, strides)};
      // Per-element loads of a persistent row come from registers after the
      // first; a gathered or masked one (data movement) is read where it is
      // used, since its index or mask is computed in the body.
      const bool per_element = ctx == Ctx::kFull || (ctx == Ctx::kLinear && block_ != &kernel_.row_body);
      const bool data_dependent = mask_ >= 0 || load.index.HasTemp();
      if (caches_row_ && per_element && block_ != &kernel_.row_body && !data_dependent) {
        load.cache_slot = CacheSlot(load.buffer, load.index, n.dtype);
      }
      result = Emit(std::move(load));
    } else if (n.op == Op::kConstant) {
      result = Emit({.kind = StmtKind::kConstant, .dtype = n.dtype, .constant = n.scalar});
    } else if (n.op == Op::kView) {
      const NodeId base = n.inputs[0];
      if (row_value_.contains(base) && ctx != Ctx::kLinear) {
        result = Eval(base, Ctx::kRow, {});  // a row value broadcast over its row
      } else {
        const IndexExpr source = Index(ctx, linear, n.shape, n.strides, n.offset);
        max_bound_ = std::max(max_bound_, source.bound());
        result = Eval(base, Ctx::kLinear, source);
      }
    } else if (graph::Info(n.op).kind == OpKind::kMove) {
      // Evaluated at its contiguous position; its operands at the positions
      // LowerMove computes (fusion inlines it only where they are not values
      // of this kernel's rows).
      const IndexExpr pos = Index(ctx, linear, n.shape, ContiguousStrides(n.shape));
      result = LowerMove(g_, id, pos,
                         {.eval = [this](NodeId in, const IndexExpr& at) { return Eval(in, Ctx::kLinear, at); },
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

  const fusion::Plan& plan_;
  const Graph& g_;
  const fusion::KernelGroup& group_;
  Kernel kernel_;
  Shape row_shape_;
  std::vector<IndexExpr> full_index_, row_index_, squeezed_index_;
  absl::flat_hash_set<NodeId> row_value_;
  absl::flat_hash_map<NodeId, int> accumulator_;
  absl::flat_hash_map<NodeId, int> input_buffer_;
  // (node, context, the linear index in kLinear, block, mask): its temporary.
  using MemoKey = std::tuple<NodeId, Ctx, IndexExpr, int, int>;
  absl::flat_hash_map<MemoKey, int> memo_;
  absl::flat_hash_map<std::pair<int, IndexExpr>, int> cache_slot_;  // (buffer, index): its slot
  std::vector<Stmt>* block_ = nullptr;
  int block_id_ = 0;
  bool caches_row_ = false;  // per-element loads get register slots (CachedLoad)
  int64_t max_bound_ = 0;
  int mask_ = -1;  // the mask loads are emitted under (cat's operands: lower_move.h)
};

}  // namespace

Kernel LowerReduction(const fusion::Plan& plan, const fusion::KernelGroup& group) {
  return ReductionLowerer(plan, group).Run();
}

}  // namespace fusebox::backend
