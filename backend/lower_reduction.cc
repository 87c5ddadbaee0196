// Lowers a reduction group: per row `r`, one pass over the row (index `j`) per
// dependency level of its reductions (softmax: max, then sum), then the
// full-shape stores, then the per-row stores. Values of the row (accumulators,
// and pointwise ops on them) are read wherever a row-broadcast view asks for
// them; fusion (fuse_kernels.cc) only builds groups where that is legal, by
// the rules both take from fusion/row_contexts.h.
#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/casts.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "backend/lower_core.h"
#include "backend/lower_util.h"
#include "fusion/row_contexts.h"
#include "tensor/error.h"

namespace fusebox::backend {
namespace {

using graph::Node;
using graph::NodeId;

class ReductionLowerer : public LoweringCore {
 public:
  using LoweringCore::LoweringCore;

  Kernel Run() {
    const Shape& shape = group_.iteration_shape;
    row_shape_ = fusion::RowShape(group_);
    Shape row_dims, reduced_dims;
    std::vector<int32_t> row_symbols;  // reduced dims are never run-time sizes
    std::vector<int64_t> row_factors;
    const auto [symbols, factors] = SymbolsOf(g_.node(group_.reductions.at(0)).inputs[0]);
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      if (IsAxis(d)) {
        reduced_dims.push_back(shape[d]);
      } else {
        row_dims.push_back(shape[d]);
        row_symbols.push_back(symbols[d]);
        row_factors.push_back(factors[d]);
      }
    }
    kernel_.num_rows = Numel(row_dims);
    kernel_.row_length = Numel(reduced_dims);
    kernel_.numel = kernel_.num_rows * kernel_.row_length;
    const bool dynamic_rows = SetDynamicExtent(row_dims, row_symbols, row_factors, &kernel_);
    kernel_.axis = fusion::RowsInnermost(rows()) ? ReductionAxis::kInner : ReductionAxis::kOuter;
    // Looped rows that end in the innermost dim record their cached loads
    // too: on CUDA a thread-block cluster may hold them (cuda_cluster.h).
    // Column reductions record them too: a CUDA block may hold its share of
    // each column (cuda/outer_reduction.h).
    caches_row_ = kernel_.kind == fusion::KernelKind::kPersistent ||
                  (kernel_.kind == fusion::KernelKind::kReduction && kernel_.axis == ReductionAxis::kInner) ||
                  kernel_.is_column_reduction();
    // Rows of run-time count divide by their run-time sizes (Kernel::size_args).
    const std::vector<IndexExpr> row_sizes = DimSizes(row_dims, row_symbols, row_factors);
    const std::vector<IndexExpr> r =
        Unravel(IndexExpr::Var("r", dynamic_rows ? IndexExpr::kUnbounded : kernel_.num_rows), row_dims, row_sizes);
    const std::vector<IndexExpr> j = Unravel(IndexExpr::Var("j", kernel_.row_length), reduced_dims);
    row_dims_ = row_dims;
    for (size_t d = 0, ri = 0, ji = 0; d < shape.size(); ++d) {
      if (IsAxis(d)) {
        full_index_.push_back(j[ji++]);
        row_index_.push_back(IndexExpr::Const(0));
        full_sizes_.push_back(IndexExpr::Const(shape[d]));
        row_sizes_.push_back(IndexExpr::Const(1));
      } else {
        full_index_.push_back(r[ri]);
        squeezed_index_.push_back(r[ri]);
        full_sizes_.push_back(row_sizes[ri]);
        row_sizes_.push_back(row_sizes[ri]);
        squeezed_sizes_.push_back(row_sizes[ri]);
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
      StartBlock(&kernel_.passes[p].body);
      for (NodeId red : group_.reductions) {
        if (level[red] != static_cast<int>(p)) continue;
        const Node& n = g_.node(red);
        const int value = Eval(n.inputs[0], Ctx::kFull);
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
    StartBlock(&kernel_.elementwise);
    for (NodeId out : group_.outputs) {
      // In-place writes go through pointwise kernels only (frontend/inplace_ops.cc).
      FUSEBOX_CHECK(g_.StoreTarget(out) < 0, "reduction kernel ", group_.name, " cannot store %", out, " in place");
      if (g_.node(out).shape == shape && !row_is_full) full.emplace_back(out, Eval(out, Ctx::kFull));
    }
    StartBlock(&kernel_.row_body);
    std::vector<std::pair<NodeId, int>> squeezed;
    for (NodeId out : group_.outputs) {
      const Shape& s = g_.node(out).shape;
      if (s == row_shape_ || row_is_full) {
        row.emplace_back(out, Eval(out, Ctx::kRow));
      } else if (s != shape) {
        squeezed.emplace_back(out, Eval(out, Ctx::kSqueezedRow));
      }
    }
    StartBlock(&kernel_.elementwise);
    for (auto [out, value] : full) EmitStore(out, value, DotSized(full_index_, shape, full_sizes_, ContiguousStrides(shape)));
    StartBlock(&kernel_.row_body);
    for (auto [out, value] : row) {
      EmitStore(out, value, DotSized(row_index_, row_shape_, row_sizes_, ContiguousStrides(row_shape_)));
    }
    for (auto [out, value] : squeezed) {
      EmitStore(out, value, DotSized(squeezed_index_, row_dims_, squeezed_sizes_, ContiguousStrides(g_.node(out).shape)));
    }
    return Finish();
  }

 private:
  fusion::Rows rows() const { return {group_.iteration_shape, group_.axes}; }
  bool IsAxis(int64_t d) const { return fusion::IsReducedDim(rows(), d); }
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

  // The register slot of (buffer, index); `key` spells the index the same
  // in every block (a gathered row's temporaries by what computes them).
  int CacheSlot(int buffer, const std::string& key, const IndexExpr& index, DType dtype, std::vector<Stmt> index_defs = {}) {
    auto [it, inserted] = cache_slot_.emplace(std::make_pair(buffer, key), static_cast<int>(kernel_.cached_loads.size()));
    if (inserted) kernel_.cached_loads.push_back({buffer, index, dtype, std::move(index_defs)});
    return it->second;
  }

  // Names each temporary by RowInvariantValue, in braces; `*invariant`
  // turns false (and stays) at the first that varies along the row.
  IndexExpr::TempName InvariantNamer(std::set<int>* needed, bool* invariant) const {
    return [this, needed, invariant](int t) {
      std::optional<std::string> v = *invariant ? RowInvariantValue(t, needed) : std::nullopt;
      *invariant = *invariant && v.has_value();
      return absl::StrCat("{", v.value_or(""), "}");
    };
  }

  // What the current block's statement defining temporary `t` computes, as
  // text equal for every block's copy, with the temporaries it needs added
  // to `needed`; nothing where it varies along the row (reads a position in
  // it) or is not defined in the block (a running result).
  std::optional<std::string> RowInvariantValue(int t, std::set<int>* needed) const {
    const std::vector<Stmt>& body = *block();
    auto def = std::find_if(body.begin(), body.end(), [t](const Stmt& s) { return s.result == t; });
    if (def == body.end() || def->kind == StmtKind::kStore) return std::nullopt;
    for (const char* var : {"j", "e", "k", "i"}) {
      if (def->index.DependsOn(var)) return std::nullopt;
    }
    bool invariant = true;
    const IndexExpr::TempName name = InvariantNamer(needed, &invariant);
    std::string text = absl::StrCat(static_cast<int>(def->kind), " ", static_cast<int>(def->op), " ",
                                    static_cast<int>(def->dtype), " ", def->buffer, " [", def->index.ToString(name), "] ",
                                    absl::bit_cast<uint64_t>(def->constant), " ", def->lo, " ", def->hi, " ", def->dim);
    if (def->mask >= 0) absl::StrAppend(&text, " mask ", name(def->mask));
    for (int a : def->args) absl::StrAppend(&text, " ", name(a));
    if (!invariant) return std::nullopt;
    needed->insert(t);
    return text;
  }

  // The multi-index a context reads a node at.
  IndexExpr IndexAt(NodeId id, Ctx ctx, const Strides& strides, int64_t offset) override {
    switch (ctx) {
      case Ctx::kFull: return DotSized(full_index_, group_.iteration_shape, full_sizes_, strides, offset);
      case Ctx::kRow: return DotSized(row_index_, row_shape_, row_sizes_, strides, offset);
      case Ctx::kSqueezedRow: return DotSized(squeezed_index_, row_dims_, squeezed_sizes_, strides, offset);
      case Ctx::kLinear: break;
    }
    FUSEBOX_CHECK(false, "%", id, " has no row index in kLinear");
    return IndexExpr::Const(0);
  }

  // A reduction of the group is its accumulator, read in its row.
  std::optional<int> HeldValue(NodeId id, Ctx ctx) override {
    if (!InGroup(id)) return std::nullopt;
    FUSEBOX_CHECK(ctx == Ctx::kRow || (ctx == Ctx::kFull && row_shape_ == group_.iteration_shape),
                  "reduction %", id, " read outside its row");
    FUSEBOX_CHECK(accumulator_.contains(id), "reduction %", id, " read before its pass");
    return accumulator_[id];
  }

  // A row value is read in its row, by the rules fusion built the group with.
  Ctx ViewBaseContext(NodeId view, Ctx ctx) override {
    const Node& n = g_.node(view);
    const NodeId base = n.inputs[0];
    std::optional<Ctx> base_ctx = fusion::ViewBaseContext(n, g_.node(base), row_value_.contains(base), ctx, rows());
    // With every reduced dim of size 1 the row is the whole shape: every
    // output is read in kRow, whichever context fusion checked it in.
    if (!base_ctx && ctx == Ctx::kRow && row_shape_ == group_.iteration_shape) base_ctx = Ctx::kRow;
    FUSEBOX_CHECK(base_ctx.has_value(), "view %", view, " reads a value of the rows of ", group_.name,
                  " where fusion should have refused it");
    return *base_ctx;
  }

  // Per-element loads of a persistent row come from registers after the
  // first, and so does a gathered row whose index is computed once per row
  // (an embedding's, GPT-2's first layer norm: the token id, then its row
  // of the table), keyed by what computes the index so each pass's copy
  // finds one slot. Other gathered and masked loads (data movement) are read
  // where they are used, their index or mask computed per element, and so
  // is a load whose index is the same along the row (a broadcast): one
  // value, not a slot per element.
  void PrepareLoad(Stmt* load, Ctx ctx) override {
    const bool per_element = ctx == Ctx::kFull || ctx == Ctx::kLinear;
    if (!caches_row_ || !per_element || block() == &kernel_.row_body || mask_ >= 0 || !load->index.DependsOn("j")) {
      return;
    }
    if (!load->index.HasTemp()) {
      load->cache_slot = CacheSlot(load->buffer, load->index.ToString(), load->index, load->dtype);
      return;
    }
    std::set<int> needed;
    bool invariant = true;
    const std::string key = load->index.ToString(InvariantNamer(&needed, &invariant));
    if (!invariant) return;
    std::vector<Stmt> defs;
    for (const Stmt& s : *block()) {
      if (needed.contains(s.result)) defs.push_back(s);
    }
    load->cache_slot = CacheSlot(load->buffer, key, load->index, load->dtype, std::move(defs));
  }

  Shape row_shape_, row_dims_;
  std::vector<IndexExpr> full_index_, row_index_, squeezed_index_;
  // Each context's dims' sizes as index math (run-time ones: DimSizes).
  std::vector<IndexExpr> full_sizes_, row_sizes_, squeezed_sizes_;
  absl::flat_hash_set<NodeId> row_value_;
  absl::flat_hash_map<NodeId, int> accumulator_;
  absl::flat_hash_map<std::pair<int, std::string>, int> cache_slot_;  // (buffer, index as CacheSlot's key): its slot
  bool caches_row_ = false;  // per-element loads get register slots (CachedLoad)
};

}  // namespace

Kernel LowerReduction(const fusion::Plan& plan, const fusion::KernelGroup& group) {
  return ReductionLowerer(plan, group).Run();
}

}  // namespace fusebox::backend
