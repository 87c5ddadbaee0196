#include "fusion/dynamic_shapes.h"

#include <algorithm>
#include <climits>
#include <limits>
#include <numeric>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fusion/view_dims.h"
#include "tensor/layout.h"

namespace fusebox::fusion {
namespace {

using graph::Graph;
using graph::Node;
using graph::NodeId;
using graph::OpKind;

// Every (node, dim) of a graph is a slot; slots that must have the same size
// are joined. A class becomes a symbol when it holds a dynamic input dim and
// nothing in it pins the size.
class Slots {
 public:
  explicit Slots(const Graph& g) {
    first_.reserve(g.size() + 1);
    int32_t n = 0;
    for (const Node& node : g.nodes()) {
      first_.push_back(n);
      n += static_cast<int32_t>(node.shape.size());
    }
    first_.push_back(n);
    parent_.resize(n);
    std::iota(parent_.begin(), parent_.end(), 0);
    pinned_.assign(n, {-1, nullptr});
    dynamic_.assign(n, false);
  }
  int32_t At(NodeId node, int64_t dim) const { return first_[node] + static_cast<int32_t>(dim); }
  int32_t Find(int32_t s) {
    while (parent_[s] != s) s = parent_[s] = parent_[parent_[s]];
    return s;
  }
  void Join(int32_t a, int32_t b) {
    a = Find(a), b = Find(b);
    if (a == b) return;
    parent_[std::max(a, b)] = std::min(a, b);
  }
  // `by` (a node) fixes slot s's size, for the reason `why` (the first kept).
  void Pin(int32_t s, NodeId by, const char* why) {
    if (pinned_[s].why == nullptr) pinned_[s] = {by, why};
  }
  void MarkDynamic(int32_t s) { dynamic_[s] = true; }
  bool pinned(int32_t s) const { return pinned_[s].why != nullptr; }
  struct PinReason {
    NodeId by;
    const char* why;
  };
  const PinReason& pin_reason(int32_t s) const { return pinned_[s]; }
  bool dynamic(int32_t s) const { return dynamic_[s]; }
  int32_t size() const { return static_cast<int32_t>(parent_.size()); }

 private:
  std::vector<int32_t> first_, parent_;
  std::vector<PinReason> pinned_;
  std::vector<bool> dynamic_;
};

// A merge or split of a reshape view (ReshapeGroups), as slots: `whole` is
// the one dim, `parts` the several, with their sizes.
struct Regroup {
  NodeId view;
  int32_t whole;
  std::vector<int32_t> parts;
  std::vector<int64_t> part_sizes;
  bool merge;  // parts are the input's dims
};

// A pin found after the classes are: the slot, the node and why.
struct LatePin {
  int32_t slot;
  NodeId by;
  const char* why;
};

}  // namespace

std::vector<int64_t> DimSymbols::Values(const Graph& g) const {
  std::vector<int64_t> values;
  for (const auto& dims : sources) {
    for (const Node& n : g.nodes()) {
      if (n.op == graph::Op::kInput && n.input_index == dims.front().input) {
        values.push_back(n.shape[dims.front().dim]);
        break;
      }
    }
  }
  return values;
}

namespace {

// The library calls read their sizes from the call (the extern run sees the
// graph resized to them), so their rows, columns and sequences may be
// run-time sizes; a GEMM's reduced dim, the head dim and batch dims that
// broadcast stay compiled in (the kernels are chosen for them).
void JoinExternDims(const graph::Graph& g, NodeId id, Slots& slots) {
  const Node& n = g.node(id);
  const int64_t r = static_cast<int64_t>(n.shape.size());
  auto join = [&](NodeId a, int64_t da, NodeId b, int64_t db) {
    if (g.node(a).shape[da] == g.node(b).shape[db]) {
      slots.Join(slots.At(a, da), slots.At(b, db));
    } else {
      slots.Pin(slots.At(a, da), id, "a library call broadcasts it"), slots.Pin(slots.At(b, db), id, "a library call broadcasts it");
    }
  };
  auto pin_all = [&](NodeId x) {
    for (int64_t d = 0; d < static_cast<int64_t>(g.node(x).shape.size()); ++d) {
      slots.Pin(slots.At(x, d), id, "a GEMM of other than 2 or 3 dims");
    }
  };
  if (n.op == graph::Op::kMatmul) {  // [batch?, M, N] = [batch?, M, K] @ [batch?, K, N]
    const NodeId a = n.inputs[0], b = n.inputs[1];
    const int64_t ra = static_cast<int64_t>(g.node(a).shape.size()), rb = static_cast<int64_t>(g.node(b).shape.size());
    if (r < 2 || ra < 2 || rb < 2 || r > 3) {
      pin_all(id), pin_all(a), pin_all(b);
      return;
    }
    join(id, r - 2, a, ra - 2);
    join(id, r - 1, b, rb - 1);
    slots.Pin(slots.At(a, ra - 1), id, "a GEMM's reduced dim"), slots.Pin(slots.At(b, rb - 2), id, "a GEMM's reduced dim");
    if (r == 3) {
      slots.Pin(slots.At(id, 0), id, "a batched GEMM's batch");
      if (ra == 3) slots.Pin(slots.At(a, 0), id, "a batched GEMM's batch");
      if (rb == 3) slots.Pin(slots.At(b, 0), id, "a batched GEMM's batch");
    }
    return;
  }
  // Attention: the node's dim i is [batch..., L, Ev]'s dim axes[i] (or i).
  std::vector<int64_t> node_dim(r);
  for (int64_t i = 0; i < r; ++i) node_dim[n.axes.empty() ? i : n.axes[i]] = i;
  const NodeId q = n.inputs[0], k = n.inputs[1], v = n.inputs[2];
  for (int64_t d = 0; d + 2 < r; ++d) {  // batch dims: any broadcast pins them
    slots.Pin(slots.At(id, node_dim[d]), id, "an attention's batch");
    for (NodeId x : n.inputs) slots.Pin(slots.At(x, d), id, "an attention's batch");
  }
  join(id, node_dim[r - 2], q, r - 2);  // L
  join(k, r - 2, v, r - 2);             // S
  if (n.inputs.size() > 3) join(n.inputs[3], r - 2, q, r - 2), join(n.inputs[3], r - 1, k, r - 2);
  for (auto [x, d] : {std::pair{id, node_dim[r - 1]}, {q, r - 1}, {k, r - 1}, {v, r - 1}}) {
    slots.Pin(slots.At(x, d), id, "an attention's head dim");
  }
}

}  // namespace

namespace {

// One pass of FindDimSymbols with `late` pins added: fills `out`, or returns
// the pins the reshapes' merges and splits call for (then `out` is not the
// answer and the caller tries again with them).
std::vector<LatePin> Attempt(const Graph& g, absl::Span<const InputDim> dynamic, absl::Span<const LatePin> late,
                             DimSymbols& out) {
  Slots slots(g);
  for (const LatePin& p : late) slots.Pin(p.slot, p.by, p.why);
  std::vector<Regroup> regroups;
  absl::flat_hash_map<int64_t, int32_t> dynamic_of_size;  // duck sizing
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    const int64_t rank = static_cast<int64_t>(n.shape.size());
    const OpKind kind = graph::Info(n.op).kind;
    if (n.op == graph::Op::kInput) {
      for (int64_t d = 0; d < rank; ++d) {
        const int32_t s = slots.At(id, d);
        const bool marked = std::find(dynamic.begin(), dynamic.end(), InputDim{n.input_index, static_cast<int32_t>(d)}) !=
                            dynamic.end();
        if (!marked || n.shape[d] < 2) {
          slots.Pin(s, id, marked ? "a size of 0 or 1" : "an input dim not marked dynamic");
          continue;
        }
        slots.MarkDynamic(s);
        auto [it, inserted] = dynamic_of_size.emplace(n.shape[d], s);
        if (!inserted) slots.Join(it->second, s);
      }
    } else if (n.op == graph::Op::kConstant || n.op == graph::Op::kIota) {
      // A constant fills any shape: its dims take their consumers' sizes.
      // So does iota (positions: a kernel whose positions change with a
      // size prints differently when resized, which pins that symbol).
    } else if (n.op == graph::Op::kView) {
      const Node& in = g.node(n.inputs[0]);
      if (const std::optional<std::vector<ReshapeGroup>> groups = ReshapeGroups(n, in)) {
        // A reshape: kept dims join; merges and splits are resolved once
        // the classes are known (below); several dims into several pin.
        for (const ReshapeGroup& group : *groups) {
          if (group.in.size() == 1 && group.out.size() == 1) {
            slots.Join(slots.At(id, group.out[0]), slots.At(n.inputs[0], group.in[0]));
            continue;
          }
          if (group.in.size() > 1 && group.out.size() > 1) {
            for (int64_t e : group.out) slots.Pin(slots.At(id, e), id, "a view reshapes it");
            for (int64_t d : group.in) slots.Pin(slots.At(n.inputs[0], d), id, "a view reshapes it");
            continue;
          }
          const bool merge = group.out.size() == 1;
          Regroup r{.view = id, .whole = merge ? slots.At(id, group.out[0]) : slots.At(n.inputs[0], group.in[0]), .merge = merge};
          for (int64_t d : merge ? group.in : group.out) {
            r.parts.push_back(merge ? slots.At(n.inputs[0], d) : slots.At(id, d));
            r.part_sizes.push_back(merge ? in.shape[d] : n.shape[d]);
          }
          regroups.push_back(std::move(r));
        }
        continue;
      }
      // Other views: an input dim split by strides over several dims is a
      // split as a reshape's (resolved below); each other dim is kept or pinned.
      std::vector<bool> split(rank, false);
      for (size_t d = 0; d < in.shape.size(); ++d) {
        const std::vector<int64_t> parts = StridedSplit(n, in, d);
        if (parts.empty()) continue;
        Regroup r{.view = id, .whole = slots.At(n.inputs[0], static_cast<int64_t>(d)), .merge = false};
        for (int64_t e : parts) {
          r.parts.push_back(slots.At(id, e));
          r.part_sizes.push_back(n.shape[e]);
          split[e] = true;
        }
        regroups.push_back(std::move(r));
      }
      for (int64_t e = 0; e < rank; ++e) {
        if (n.strides[e] == 0 || split[e]) continue;  // broadcast: any size
        const int64_t d = KeptInputDim(n, e, in);
        if (d >= 0) {
          slots.Join(slots.At(id, e), slots.At(n.inputs[0], d));
        } else {
          slots.Pin(slots.At(id, e), id, "a view reshapes, slices or steps it");
        }
      }
    } else if (kind == OpKind::kReduction) {
      // Rows may be any number; the row length is compiled in.
      for (int64_t d = 0; d < rank; ++d) {
        if (std::binary_search(n.axes.begin(), n.axes.end(), d)) {
          slots.Pin(slots.At(n.inputs[0], d), id, "a reduction's row length");
        } else {
          slots.Join(slots.At(id, d), slots.At(n.inputs[0], d));
        }
      }
    } else if (kind == OpKind::kPointwise) {
      for (NodeId in : n.inputs) {
        for (int64_t d = 0; d < rank; ++d) slots.Join(slots.At(id, d), slots.At(in, d));
      }
    } else if (n.op == graph::Op::kMatmul || n.op == graph::Op::kAttention) {
      JoinExternDims(g, id, slots);
    } else if (n.op == graph::Op::kIndexSelect || n.op == graph::Op::kEmbedding) {
      // out = x's dims before `dim`, idx's dims, x's dims after it: they
      // follow their sources; the table's length along `dim` (the bound every
      // index is checked against) is compiled in.
      const NodeId x = n.inputs[0], idx = n.inputs[1];
      const int64_t rx = static_cast<int64_t>(g.node(x).shape.size());
      const int64_t ri = static_cast<int64_t>(g.node(idx).shape.size());
      for (int64_t d = 0; d < n.dim; ++d) slots.Join(slots.At(id, d), slots.At(x, d));
      for (int64_t d = 0; d < ri; ++d) slots.Join(slots.At(id, n.dim + d), slots.At(idx, d));
      for (int64_t d = n.dim + 1; d < rx; ++d) slots.Join(slots.At(id, d - 1 + ri), slots.At(x, d));
      slots.Pin(slots.At(x, n.dim), id, "the length of a table indexed along it");
    } else {
      for (int64_t d = 0; d < rank; ++d) slots.Pin(slots.At(id, d), id, "an op that keeps its sizes");
      for (NodeId in : n.inputs) {
        for (int64_t d = 0; d < static_cast<int64_t>(g.node(in).shape.size()); ++d) {
          slots.Pin(slots.At(in, d), id, "an op that keeps its sizes");
        }
      }
    }
  }

  // A class is pinned or dynamic when any of its slots is.
  std::vector<int32_t> class_pinned_by(slots.size(), -1);  // a pinned slot of the class
  std::vector<bool> class_dynamic(slots.size(), false);
  for (int32_t s = 0; s < slots.size(); ++s) {
    const int32_t root = slots.Find(s);
    if (class_pinned_by[root] < 0 && slots.pinned(s)) class_pinned_by[root] = s;
    class_dynamic[root] = class_dynamic[root] || slots.dynamic(s);
  }
  // Why each marked input dim stays static (FUSEBOX_LOG=debug says it).
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (n.op != graph::Op::kInput) continue;
    for (int64_t d = 0; d < static_cast<int64_t>(n.shape.size()); ++d) {
      const int32_t s = slots.At(id, d), pinned_by = class_pinned_by[slots.Find(s)];
      if (!slots.dynamic(s) || pinned_by < 0) continue;
      const Slots::PinReason& reason = slots.pin_reason(pinned_by);
      const Node& by = g.node(reason.by);
      out.kept_static.push_back(absl::StrCat("input ", n.input_index, " dim ", d, " (size ", n.shape[d],
                                             ") stays static: node ", reason.by, " (", graph::OpName(by.op), " ",
                                             ShapeToString(by.shape), "): ", reason.why));
    }
  }
  // Each class's size: symbol k (a provisional number) times f; k -1: fixed.
  struct Size {
    int32_t k = -1;
    int64_t f = 1;
  };
  std::vector<Size> size_of_root(slots.size());
  int32_t provisional = 0;
  for (int32_t s = 0; s < slots.size(); ++s) {
    if (slots.Find(s) == s && class_dynamic[s] && class_pinned_by[s] < 0) size_of_root[s] = {provisional++, 1};
  }
  auto size_of = [&](int32_t slot) { return size_of_root[slots.Find(slot)]; };
  // Makes slot's class `target` in size: a fixed, free class takes it; a
  // symbol of its own becomes target's times a factor everywhere it is.
  auto assign = [&](int32_t slot, Size target) {
    const int32_t root = slots.Find(slot);
    const Size now = size_of_root[root];
    if (now.k == target.k) return now.f == target.f;
    if (now.k < 0) {
      if (class_pinned_by[root] >= 0) return false;
      size_of_root[root] = target;
      return true;
    }
    for (const Size& other : size_of_root) {
      if (other.k == now.k && other.f * target.f % now.f != 0) return false;
    }
    for (Size& other : size_of_root) {
      if (other.k == now.k) other = {target.k, other.f * target.f / now.f};
    }
    return true;
  };
  // Merges and splits in graph order (a split finds what its input merged).
  std::vector<LatePin> pins;
  for (const Regroup& r : regroups) {
    const Size whole = size_of(r.whole);
    std::vector<size_t> run_time;  // the parts of run-time size
    int64_t fixed = 1;             // the others' product
    for (size_t p = 0; p < r.parts.size(); ++p) {
      if (size_of(r.parts[p]).k >= 0) {
        run_time.push_back(p);
      } else {
        fixed *= r.part_sizes[p];
      }
    }
    bool ok = run_time.size() <= 1;
    if (ok && run_time.size() == 1) {
      // Merge or split, the whole is the fixed parts times the run-time one.
      const Size part = size_of(r.parts[run_time[0]]);
      ok = assign(r.whole, {part.k, part.f * fixed});
    } else if (ok && whole.k >= 0) {
      if (r.merge) {
        ok = false;  // a multiple of a run-time size made of fixed sizes
      } else {
        // The part of run-time size: the one whose companions' product
        // divides the factor ([2 T] as [2, T]: T). Where two could be
        // (T = 2), none is taken.
        std::optional<size_t> fit;
        for (size_t p = 0; p < r.parts.size() && ok; ++p) {
          if (whole.f % (fixed / r.part_sizes[p]) != 0) continue;
          ok = !fit.has_value();
          fit = p;
        }
        ok = ok && fit.has_value() && assign(r.parts[*fit], {whole.k, whole.f / (fixed / r.part_sizes[*fit])});
      }
    }
    if (!ok) {
      const char* why = "a view merges or splits it with another run-time size";
      pins.push_back({r.whole, r.view, why});
      for (int32_t part : r.parts) pins.push_back({part, r.view, why});
    }
  }
  if (!pins.empty()) return pins;

  // Symbols numbered in order of first sight; an input dim of factor 1 is a source.
  absl::flat_hash_map<int32_t, int32_t> symbol_of;
  out.of_node.resize(g.size());
  out.factor_of_node.resize(g.size());
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    for (int64_t d = 0; d < static_cast<int64_t>(n.shape.size()); ++d) {
      const Size size = size_of(slots.At(id, d));
      int32_t symbol = -1;
      if (size.k >= 0) {
        auto [it, inserted] = symbol_of.emplace(size.k, out.num_symbols());
        if (inserted) out.sources.emplace_back();
        symbol = it->second;
        if (n.op == graph::Op::kInput && size.f == 1) out.sources[symbol].push_back({n.input_index, static_cast<int32_t>(d)});
      }
      out.of_node[id].push_back(symbol);
      out.factor_of_node[id].push_back(symbol >= 0 ? size.f : 1);
    }
  }
  // A symbol no input dim gives alone (only its multiples): its dims stay fixed.
  for (int32_t k = 0; k < out.num_symbols(); ++k) {
    if (!out.sources[k].empty()) continue;
    for (NodeId id = 0; id < g.size(); ++id) {
      for (size_t d = 0; d < out.of_node[id].size(); ++d) {
        if (out.of_node[id][d] == k) pins.push_back({slots.At(id, static_cast<int64_t>(d)), id, "no input dim has the size alone"});
      }
    }
  }
  return pins;
}

}  // namespace

DimSymbols FindDimSymbols(const Graph& g, absl::Span<const InputDim> dynamic) {
  if (dynamic.empty()) return {};
  // Each round pins what the last one's merges and splits could not keep;
  // pins only grow, so it ends (the bound is a safeguard: all fixed).
  std::vector<LatePin> late;
  for (int round = 0; round < 16; ++round) {
    DimSymbols out;
    const std::vector<LatePin> more = Attempt(g, dynamic, late, out);
    if (more.empty()) return out;
    late.insert(late.end(), more.begin(), more.end());
  }
  return {};
}

namespace {

// Whether view `n`'s dim e walks an input dim whose stride in the input's
// contiguous value holds a symbol's size (the heads' transpose of a [B, T, C]
// value steps T * C along B): Resize recomputes such strides.
bool StrideFollowsSizes(const Graph& g, const DimSymbols& symbols, NodeId view, int64_t e, int64_t* input_dim) {
  const Node& n = g.node(view);
  const NodeId in = n.inputs[0];
  if (n.strides[e] == 0) return false;
  const int64_t d = KeptInputDim(n, e, g.node(in));
  if (d < 0) return false;
  *input_dim = d;
  for (size_t j = d + 1; j < g.node(in).shape.size(); ++j) {
    if (symbols.symbol(in, j) >= 0) return true;
  }
  return false;
}

// An argument passed as a view of a bigger storage (a batch of heads sliced
// from qkv: strides [T * 3C, hd, 3C, 1]): a dim whose stride spans a whole
// run-time dim j (stride == size[j] * stride[j]) follows that size. Inner
// strides resolve first; a key names j by a marker. A stride that only
// happens to match is harmless: the next size's key differs, so it recompiles.
void RestrideInput(const DimSymbols& symbols, NodeId id, const Shape& was_shape, bool key, Node& n) {
  const Strides was_strides = n.strides;
  std::vector<size_t> order(was_shape.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return was_strides[a] < was_strides[b]; });
  for (size_t d : order) {
    if (was_strides[d] == 0 || was_shape[d] == 1) continue;
    for (size_t j : order) {
      if (j == d || symbols.symbol(id, j) < 0 || was_shape[j] * was_strides[j] != was_strides[d]) continue;
      n.strides[d] = key ? std::numeric_limits<int64_t>::min() + static_cast<int64_t>(j) : n.shape[j] * n.strides[j];
      break;
    }
  }
}

// Resize's rewrite; `key` writes a key instead (markers for sizes and for the
// strides that follow them, size-1 dims' strides left out).
Graph Rewrite(const Graph& g, const DimSymbols& symbols, absl::Span<const int64_t> values, bool key) {
  // A key's size marker names the symbol and the factor (values[k] is -1 - k).
  auto resized_shape = [&](NodeId id) {
    Shape shape = g.node(id).shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (const int32_t k = symbols.symbol(id, d); k >= 0) {
        const int64_t f = symbols.factor(id, d);
        shape[d] = key ? values[k] - (f - 1) * symbols.num_symbols() : f * values[k];
      }
    }
    return shape;
  };
  return g.Rewritten([&](NodeId id, Node& n) {
    if (symbols.empty()) return;
    const bool contiguous_input = n.op == graph::Op::kInput && IsContiguous(n.shape, n.strides);
    // A reshape's strides are its shape's contiguous ones at every size.
    const bool reshape = n.op == graph::Op::kView && ReshapeGroups(n, g.node(n.inputs[0])).has_value();
    const Shape was_shape = n.shape;
    n.shape = resized_shape(id);
    // A contiguous input's strides follow from its sizes: a key leaves them out.
    if (contiguous_input || reshape) n.strides = key ? Strides{} : ContiguousStrides(n.shape);
    if (n.op == graph::Op::kInput && !contiguous_input) RestrideInput(symbols, id, was_shape, key, n);
    if (n.op != graph::Op::kView || reshape) return;
    const Shape input_shape = resized_shape(n.inputs[0]);
    const Strides input_strides = ContiguousStrides(input_shape);
    // The offset, as a position along each input dim: along a run-time size,
    // a position past 0 counts from the end (narrow(1, T - 1, 1), the last
    // token's row). A key lists the positions in `axes` (from the end as
    // negative) and no offset.
    const Shape& was = g.node(n.inputs[0]).shape;
    if (!was.empty() && Numel(was) > 0) {
      std::vector<int64_t> position(was.size());
      int64_t rest = n.offset;
      for (size_t d = was.size(); d-- > 1;) position[d] = rest % was[d], rest /= was[d];
      position[0] = rest;
      n.offset = 0;
      for (size_t d = 0; d < was.size(); ++d) {
        const bool from_end = symbols.symbol(n.inputs[0], d) >= 0 && position[d] > 0;
        if (key) {
          n.axes.push_back(from_end ? position[d] - was[d] : position[d]);
        } else {
          n.offset += (from_end ? input_shape[d] - (was[d] - position[d]) : position[d]) * input_strides[d];
        }
      }
    }
    // A strided split's steps: the input dim's, then times each part's size.
    std::vector<bool> split(n.shape.size(), false);
    const Node& in = g.node(n.inputs[0]);
    for (size_t d = 0; d < in.shape.size(); ++d) {
      const std::vector<int64_t> parts = StridedSplit(g.node(id), in, d);
      int64_t step = input_strides[d];
      for (size_t p = 0; p < parts.size(); ++p) {
        // In a key: a marker naming the input dim and the part.
        n.strides[parts[p]] = key ? std::numeric_limits<int64_t>::min() + 4096 + static_cast<int64_t>(d * 64 + p) : step;
        step *= n.shape[parts[p]];
        split[parts[p]] = true;
      }
    }
    for (size_t e = 0; e < n.shape.size(); ++e) {
      int64_t d = 0;
      if (split[e]) continue;
      if (StrideFollowsSizes(g, symbols, id, static_cast<int64_t>(e), &d)) {
        // In a key: a marker no real stride (>= 0) equals, naming the dim.
        n.strides[e] = key ? std::numeric_limits<int64_t>::min() + d : input_strides[d];
      } else if (key && n.shape[e] == 1) {
        n.strides[e] = 0;  // never stepped: a batch of 1's stride holds T * C
      }
    }
  });
}

}  // namespace

Graph SymbolicKey(const Graph& g, const DimSymbols& symbols) {
  std::vector<int64_t> markers(symbols.num_symbols());
  for (int32_t k = 0; k < symbols.num_symbols(); ++k) markers[k] = -1 - k;
  return Rewrite(g, symbols, markers, /*key=*/true);
}

Graph Resize(const Graph& g, const DimSymbols& symbols, absl::Span<const int64_t> values) {
  return Rewrite(g, symbols, values, /*key=*/false);
}

bool NeedsIndex64(const Graph& g) {
  constexpr int64_t kLimit = INT_MAX - (1 << 16);
  for (const Node& n : g.nodes()) {
    int64_t extent = Numel(n.shape);
    if (n.op == graph::Op::kInput && extent > 0) extent = ElementSpan(n.shape, n.strides);
    if (extent > kLimit) return true;
  }
  return false;
}

std::vector<std::string> DescribeSymbols(const DimSymbols& symbols) {
  std::vector<std::string> out;
  for (int32_t k = 0; k < symbols.num_symbols(); ++k) {
    std::vector<std::string> dims;
    for (const InputDim& d : symbols.sources[k]) dims.push_back(absl::StrCat("input ", d.input, " dim ", d.dim));
    out.push_back(absl::StrCat("s", k, " = ", absl::StrJoin(dims, " = ")));
  }
  return out;
}

}  // namespace fusebox::fusion
