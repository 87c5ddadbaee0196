#include "fusion/fuse_kernels.h"

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "fusion/gemm_epilogue.h"
#include "fusion/row_contexts.h"

namespace fusebox::fusion {
namespace {

using graph::Graph;
using graph::Node;
using graph::NodeId;
using graph::Op;
using graph::OpKind;

bool IsReduction(const Node& n) { return graph::Info(n.op).kind == OpKind::kReduction; }
bool IsExtern(const Node& n) { return graph::Info(n.op).kind == OpKind::kExtern; }
// Values a kernel never computes inline: its own reductions aside, they are
// stored by the kernel that computes them and loaded by the others.
bool IsStoredOp(const Node& n) { return IsReduction(n) || IsExtern(n); }
// Data movement (gather, cat) fuses into pointwise kernels, and into a
// reduction over innermost rows whose own values it does not read
// (MoveInline); otherwise a pointwise kernel stores it first (StoreMoves).
bool IsMove(const Node& n) { return graph::Info(n.op).kind == OpKind::kMove; }

// A reduction group, or (kind set) a matmul's extern kernel or a pointwise
// kernel that stores a matmul operand before it.
struct Group {
  Shape shape;                 // the reduced input shape
  std::vector<int64_t> axes;
  std::vector<NodeId> reductions;
  std::vector<NodeId> outputs;
  std::optional<KernelKind> kind;  // kExtern or kPointwise; unset: a reduction group
  Rows rows() const { return {shape, axes}; }
};

class Fuser {
 public:
  explicit Fuser(const Graph& g) : g_(g) {}

  Plan Run() {
    // Reductions join the latest group over the same rows when their use of
    // that group's values is legal there; otherwise they open a new group.
    // Matmuls (extern kernels) take their place in the same order, after
    // the kernels that store their operands.
    for (NodeId id = 0; id < g_.size(); ++id) {
      if (IsReduction(g_.node(id))) {
        StoreMoves(id);
        AssignReduction(id);
      }
      if (IsExtern(g_.node(id))) AssignExtern(id);
    }
    std::vector<NodeId> pointwise_roots;
    absl::flat_hash_set<NodeId> stored;
    for (NodeId out : g_.outputs()) {
      const Node& n = g_.node(out);
      if (n.op == Op::kInput || !stored.insert(out).second || IsExtern(n) || operand_stored_.contains(out) ||
          epilogue_values_.contains(out) || move_stored_.contains(out) || residual_stored_.contains(out)) {
        continue;
      }
      if (IsReduction(n)) {
        materialized_.insert(out);
        continue;
      }
      if (std::optional<int> gi = GroupForRoot(out)) {
        groups_[*gi].outputs.push_back(out);
      } else {
        pointwise_roots.push_back(out);
      }
    }
    Plan plan{.graph = g_, .notes = notes_};
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      Group& grp = groups_[gi];
      if (grp.kind.has_value()) {
        KernelGroup k{.kind = *grp.kind, .iteration_shape = grp.shape, .outputs = grp.outputs};
        Collect(grp.outputs, static_cast<int>(gi), &k);
        plan.kernels.push_back(std::move(k));
        continue;
      }
      for (NodeId r : grp.reductions) {
        if (materialized_.contains(r)) grp.outputs.insert(grp.outputs.begin(), r);
      }
      const KernelKind kind = KeepsRowOnChip(grp.shape, grp.axes) ? KernelKind::kPersistent : KernelKind::kReduction;
      KernelGroup k{.kind = kind, .iteration_shape = grp.shape, .axes = grp.axes,
                    .reductions = grp.reductions, .outputs = grp.outputs};
      std::vector<NodeId> roots = grp.outputs;
      for (NodeId r : grp.reductions) roots.push_back(r);
      Collect(roots, static_cast<int>(gi), &k);
      plan.kernels.push_back(std::move(k));
    }
    // The remaining stored values, after every kernel above (a pointwise
    // kernel storing a matmul operand runs before its GEMM: none joins it).
    const size_t first_final = plan.kernels.size();
    for (NodeId root : pointwise_roots) {
      auto same_shape = [&](const KernelGroup& k) {
        return k.kind == KernelKind::kPointwise && k.iteration_shape == g_.node(root).shape;
      };
      auto it = std::find_if(plan.kernels.begin() + first_final, plan.kernels.end(), same_shape);
      if (it == plan.kernels.end()) {
        plan.kernels.push_back(KernelGroup{.iteration_shape = g_.node(root).shape});
        it = plan.kernels.end() - 1;
      }
      it->outputs.push_back(root);
    }
    for (size_t i = first_final; i < plan.kernels.size(); ++i) Collect(plan.kernels[i].outputs, -1, &plan.kernels[i]);
    return plan;
  }

 private:
  // Reductions reachable from `id` without passing through another reduction.
  void ReductionDeps(NodeId id, absl::flat_hash_set<NodeId>* deps) {
    std::vector<NodeId> stack = {id};
    absl::flat_hash_set<NodeId> seen;
    while (!stack.empty()) {
      const NodeId x = stack.back();
      stack.pop_back();
      if (!seen.insert(x).second) continue;
      if (x != id && Stored(x)) {
        deps->insert(x);
        continue;
      }
      for (NodeId in : g_.node(x).inputs) stack.push_back(in);
    }
  }

  // Whether `id` depends on a reduction of group `gi` (without crossing other reductions).
  bool DependsOnGroup(NodeId id, int gi) {
    if (Stored(id)) return group_of_.contains(id) && group_of_[id] == gi;
    absl::flat_hash_set<NodeId> deps;
    ReductionDeps(id, &deps);
    for (NodeId d : deps) {
      if (group_of_.contains(d) && group_of_[d] == gi) return true;
    }
    return false;
  }

  // Reduction group gi, or (-1) the group the reduction being placed will open (probe_).
  const Group& GroupAt(int gi) const { return gi >= 0 ? groups_[gi] : probe_; }

  // Can `id` be evaluated in context `ctx` inside group `gi`'s kernel?
  bool Legal(NodeId id, Ctx ctx, int gi) {
    const Node& n = g_.node(id);
    if (IsExtern(n) || epilogue_values_.contains(id) || move_stored_.contains(id) ||
        (residual_stored_.contains(id) && group_of_.at(id) != gi)) {
      return true;  // stored by its own kernel, loaded
    }
    if (IsMove(n)) return MoveInline(id, gi);
    if (IsReduction(n)) {
      if (group_of_[id] != gi) return true;  // stored by an earlier kernel, loaded
      const bool row_is_full = groups_[gi].shape == n.shape;
      return ctx == Ctx::kRow || (ctx == Ctx::kFull && row_is_full);
    }
    if (graph::Info(n.op).kind == OpKind::kSource) return true;  // an input, a constant, iota
    if (ctx == Ctx::kLinear && DependsOnGroup(id, gi)) return false;
    if (n.op == Op::kView) {
      const NodeId base = n.inputs[0];
      const std::optional<Ctx> base_ctx =
          ViewBaseContext(n, g_.node(base), DependsOnGroup(base, gi), ctx, GroupAt(gi).rows());
      return base_ctx.has_value() && Legal(base, *base_ctx, gi);
    }
    for (NodeId in : n.inputs) {
      if (!Legal(in, ctx, gi)) return false;
    }
    return true;
  }

  // The latest group over the same rows (-1: none), which a reduction joins where it can.
  int CandidateGroup(const Shape& shape, const std::vector<int64_t>& axes) const {
    for (int gi = static_cast<int>(groups_.size()) - 1; gi >= 0; --gi) {
      if (groups_[gi].shape == shape && groups_[gi].axes == axes) return gi;
    }
    return -1;
  }

  // A gather or cat evaluated inside reduction group gi's kernel (-1: the
  // group the reduction being placed will open, probe_): its operands are
  // read at positions the data gives, so none may be a value of the group's
  // rows (only its current row is at hand), and the rows must end in the
  // innermost dim (the column printers load a pass's elements ahead of its
  // body, before an index is checked or a mask known).
  bool MoveInline(NodeId id, int gi) {
    if (!RowsInnermost(GroupAt(gi).rows())) return false;
    for (NodeId in : g_.node(id).inputs) {
      if (!Legal(in, Ctx::kLinear, gi)) return false;  // (false where it depends on the group)
    }
    return true;
  }

  void AssignReduction(NodeId id) {
    const Node& r = g_.node(id);
    const Shape& shape = g_.node(r.inputs[0]).shape;
    absl::flat_hash_set<NodeId> deps;
    ReductionDeps(id, &deps);
    int candidate = CandidateGroup(shape, r.axes);
    bool ok = candidate >= 0;
    for (NodeId d : deps) ok = ok && group_of_[d] <= candidate;
    if (ok) {
      group_of_[id] = candidate;  // tentatively, for Legal()
      ok = Legal(r.inputs[0], Ctx::kFull, candidate);
      if (!ok) {
        Note(id, "reads a value of its rows through a view that is not a broadcast over the row (e.g. a "
                 "transpose), so it starts a separate kernel");
      }
    } else if (!deps.empty()) {
      Note(id, "reads reductions over other rows or of a later kernel, so it starts a separate kernel that "
               "loads them from memory");
    }
    if (!ok) {
      groups_.push_back(Group{.shape = shape, .axes = r.axes});
      candidate = static_cast<int>(groups_.size()) - 1;
    }
    group_of_[id] = candidate;
    groups_[candidate].reductions.push_back(id);
    for (NodeId d : deps) {
      if (group_of_[d] != candidate) materialized_.insert(d);
    }
  }

  // The data-movement nodes reduction `id`'s input reads (not past values
  // other kernels store) that its kernel cannot evaluate (MoveInline), each
  // stored by a pointwise kernel of its own, which also computes its
  // producers; the reduction's kernel loads it.
  void StoreMoves(NodeId id) {
    const Node& r = g_.node(id);
    probe_ = Group{.shape = g_.node(r.inputs[0]).shape, .axes = r.axes};
    const int gi = CandidateGroup(probe_.shape, probe_.axes);
    std::vector<NodeId> stack = {r.inputs[0]};
    absl::flat_hash_set<NodeId> seen;
    while (!stack.empty()) {
      const NodeId x = stack.back();
      stack.pop_back();
      if (!seen.insert(x).second || Stored(x)) continue;
      if (!IsMove(g_.node(x))) {
        for (NodeId in : g_.node(x).inputs) stack.push_back(in);
        continue;
      }
      if (MoveInline(x, gi)) continue;  // with everything it reads
      absl::flat_hash_set<NodeId> deps;
      ReductionDeps(x, &deps);
      for (NodeId d : deps) materialized_.insert(d);
      move_stored_.insert(x);
      group_of_[x] = static_cast<int>(groups_.size());
      groups_.push_back(Group{.shape = g_.node(x).shape, .outputs = {x}, .kind = KernelKind::kPointwise});
      Note(x, RowsInnermost(probe_.rows())
                  ? "is data movement (gather, cat) read by a reduction and reads values of that reduction's "
                    "rows at positions the data gives, so a pointwise kernel stores it first"
                  : "is data movement (gather, cat) read by a reduction over dims that are not the innermost "
                    "(column kernels load a pass's elements before its index checks), so a pointwise kernel "
                    "stores it first");
    }
  }

  // A matmul: its own extern kernel, after the kernels storing the operands
  // the GEMM cannot read where they are (computed values, views that are not
  // a dense matrix layout: MatmulOperandReady). An operand computed from
  // reductions (a norm, a softmax) is one more output of their group's
  // kernel where it is legal there (GroupForRoot, as for a returned value),
  // so it is stored once by the kernel that computes its row statistics;
  // otherwise a pointwise kernel stores it.
  void AssignExtern(NodeId id) {
    std::vector<NodeId> to_store;
    for (NodeId in : g_.node(id).inputs) {
      const bool ready = ExternOperandReady(g_, id, in);
      const NodeId value = ready ? MatmulOperandBase(g_, in) : in;
      if (IsReduction(g_.node(value))) materialized_.insert(value);
      // An input is read where it lies; a constant or iota has no buffer.
      if (g_.node(value).op == Op::kInput || Stored(value) || operand_stored_.contains(value)) continue;
      if (std::find(to_store.begin(), to_store.end(), value) == to_store.end()) to_store.push_back(value);
    }
    for (NodeId value : to_store) {
      operand_stored_.insert(value);
      if (std::optional<int> gi = GroupForRoot(value)) {
        groups_[*gi].outputs.push_back(value);
        continue;
      }
      absl::flat_hash_set<NodeId> deps;
      ReductionDeps(value, &deps);
      for (NodeId d : deps) materialized_.insert(d);
      groups_.push_back(Group{.shape = g_.node(value).shape, .outputs = {value}, .kind = KernelKind::kPointwise});
    }
    // The chain after the GEMM its epilogue computes (fusion/gemm_epilogue.h):
    // a residual must be stored by a kernel placed before this one. A
    // computed residual that no kernel stores yet (a transformer's residual
    // stream: the embedding sum, x + attn(x) when its GEMM could not take it)
    // is stored for it (StoreResidual); inlined instead, each later layer
    // norm would recompute the whole stream from the embedding. Attention
    // takes no epilogue: its kernel stores its own value.
    auto stored_before = [&](NodeId r) {
      if ((IsExtern(g_.node(r)) || epilogue_values_.contains(r) || residual_stored_.contains(r)) &&
          group_of_.contains(r)) {
        return true;
      }
      const Node& n = g_.node(r);
      return r < id && graph::Info(n.op).kind == OpKind::kPointwise && !Stored(r) && !operand_stored_.contains(r) &&
             n.dtype == g_.node(id).dtype && Numel(n.shape) == Numel(g_.node(id).shape);
    };
    GemmChain chain;
    if (g_.node(id).op != Op::kAttention) chain = EpilogueChain(g_, id, stored_before);
    if (chain.residual >= 0 && !group_of_.contains(chain.residual) && g_.node(chain.residual).op != Op::kInput) {
      StoreResidual(chain.residual);
    }
    const NodeId value = g_.node(id).op == Op::kAttention ? id : chain.end;
    if (value != id) epilogue_values_.insert(value);
    group_of_[id] = group_of_[value] = static_cast<int>(groups_.size());
    groups_.push_back(Group{.shape = g_.node(id).shape, .outputs = {value}, .kind = KernelKind::kExtern});
  }

  // Residual `r` (pointwise, before the GEMM reading it) stored by the
  // latest reduction kernel that can compute it over its rows after every
  // value it loads is stored (the layer norm reading the residual stream
  // computes it anyway: one more store), else by a pointwise kernel.
  void StoreResidual(NodeId r) {
    absl::flat_hash_set<NodeId> deps;
    ReductionDeps(r, &deps);
    int after = -1;  // the last kernel storing a value r loads
    for (NodeId d : deps) after = std::max(after, group_of_[d]);
    for (int gi = static_cast<int>(groups_.size()) - 1; gi >= std::max(after, 0); --gi) {
      if (groups_[gi].kind.has_value() || groups_[gi].shape != g_.node(r).shape) continue;
      if (!Legal(r, Ctx::kFull, gi)) continue;
      residual_stored_.insert(r);
      group_of_[r] = gi;
      groups_[gi].outputs.push_back(r);
      for (NodeId d : deps) {
        if (group_of_[d] != gi) materialized_.insert(d);
      }
      return;
    }
    for (NodeId d : deps) materialized_.insert(d);
    residual_stored_.insert(r);
    group_of_[r] = static_cast<int>(groups_.size());
    groups_.push_back(Group{.shape = g_.node(r).shape, .outputs = {r}, .kind = KernelKind::kPointwise});
  }

  // The reduction group a stored value can join, if any: the latest group it
  // depends on, when its shape is that group's reduced or row shape and it
  // reads that group's values legally there.
  std::optional<int> GroupForRoot(NodeId id) {
    absl::flat_hash_set<NodeId> deps;
    ReductionDeps(id, &deps);
    if (deps.empty()) return std::nullopt;
    int gi = -1;
    for (NodeId d : deps) gi = std::max(gi, group_of_[d]);
    if (groups_[gi].kind.has_value()) {  // after a matmul: a pointwise kernel loads what it needs
      for (NodeId d : deps) materialized_.insert(d);
      return std::nullopt;
    }
    const Group& grp = groups_[gi];
    const Shape row = RowShape(grp.rows());
    const Shape& shape = g_.node(id).shape;
    const bool legal = (shape == grp.shape && Legal(id, Ctx::kFull, gi)) ||
                       (shape == row && Legal(id, Ctx::kRow, gi)) ||
                       (shape == SqueezedRowShape(grp.rows()) && shape != row &&
                        Legal(id, Ctx::kSqueezedRow, gi));
    for (NodeId d : deps) {
      if (!legal || group_of_[d] != gi) materialized_.insert(d);
    }
    if (!legal) {
      Note(id, "is not of its reductions' row layout (or reads them through a non-broadcast view), so a "
               "separate kernel computes it from the stored reductions");
      return std::nullopt;
    }
    return gi;
  }

  // Fills the kernel's compute nodes and the stored values it loads.
  void Collect(const std::vector<NodeId>& roots, int gi, KernelGroup* k) {
    absl::flat_hash_set<NodeId> seen, loads;
    std::vector<NodeId> stack(roots.begin(), roots.end());
    while (!stack.empty()) {
      const NodeId x = stack.back();
      stack.pop_back();
      if (!seen.insert(x).second) continue;
      const Node& n = g_.node(x);
      if (Stored(x) && group_of_[x] != gi) {
        loads.insert(x);
        continue;
      }
      if (graph::Info(n.op).kind != OpKind::kSource) k->nodes.push_back(x);
      if (IsExtern(n)) {  // its operands: read where they lie (stored by earlier kernels, or inputs)
        for (NodeId in : n.inputs) {
          const NodeId base = MatmulOperandBase(g_, in);
          if (g_.node(in).op == Op::kView) k->nodes.push_back(in);
          if (graph::Info(g_.node(base).op).kind != OpKind::kSource || operand_stored_.contains(base)) loads.insert(base);
        }
        continue;
      }
      for (NodeId in : n.inputs) stack.push_back(in);
    }
    std::sort(k->nodes.begin(), k->nodes.end());
    k->buffer_inputs.assign(loads.begin(), loads.end());
    std::sort(k->buffer_inputs.begin(), k->buffer_inputs.end());
  }

  void Note(NodeId id, const std::string& why) {
    const Node& n = g_.node(id);
    notes_.push_back(absl::StrCat("%", id, " (", graph::OpName(n.op), " ", DTypeName(n.dtype),
                                  ShapeToString(n.shape), ") ", why));
  }

  const Graph& g_;
  std::vector<std::string> notes_;
  std::vector<Group> groups_;
  absl::flat_hash_map<NodeId, int> group_of_;
  absl::flat_hash_set<NodeId> materialized_;
  absl::flat_hash_set<NodeId> operand_stored_;  // stored by a kernel before a matmul
  absl::flat_hash_set<NodeId> residual_stored_;  // stored by a kernel before the GEMM taking it as C (StoreResidual)
  absl::flat_hash_set<NodeId> epilogue_values_;  // stored by a matmul's kernel (its epilogue's end)
  Group probe_;  // the rows of the reduction StoreMoves is placing (MoveInline)
  absl::flat_hash_set<NodeId> move_stored_;      // stored before a reduction that reads them (StoreMoves)

  bool Stored(NodeId id) const {
    return IsStoredOp(g_.node(id)) || epilogue_values_.contains(id) || move_stored_.contains(id) ||
           residual_stored_.contains(id);
  }
};

}  // namespace

Plan FuseKernels(const Graph& graph) { return Fuser(graph).Run(); }

}  // namespace fusebox::fusion
