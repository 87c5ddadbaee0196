#include "fusion/dynamic_shapes.h"

#include <algorithm>
#include <climits>
#include <limits>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

// The dim of view input `in` that view dim `e` walks unchanged: same size and
// the stride that dim has in the input's contiguous value. -1 if none (the
// view reshapes, slices or broadcasts there).
int64_t KeptInputDim(const Node& view, int64_t e, const Node& in) {
  const Strides contiguous = ContiguousStrides(in.shape);
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (in.shape[d] >= 2 && in.shape[d] == view.shape[e] && contiguous[d] == view.strides[e]) return d;
  }
  return -1;
}

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

DimSymbols FindDimSymbols(const Graph& g, absl::Span<const InputDim> dynamic) {
  DimSymbols out;
  if (dynamic.empty()) return out;
  Slots slots(g);
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
      for (int64_t e = 0; e < rank; ++e) {
        if (n.strides[e] == 0) continue;  // broadcast: any size
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
  absl::flat_hash_map<int32_t, int32_t> symbol_of_root;
  out.of_node.resize(g.size());
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    for (int64_t d = 0; d < static_cast<int64_t>(n.shape.size()); ++d) {
      const int32_t root = slots.Find(slots.At(id, d));
      int32_t symbol = -1;
      if (class_dynamic[root] && class_pinned_by[root] < 0) {
        auto [it, inserted] = symbol_of_root.emplace(root, out.num_symbols());
        if (inserted) out.sources.emplace_back();
        symbol = it->second;
        if (n.op == graph::Op::kInput) out.sources[symbol].push_back({n.input_index, static_cast<int32_t>(d)});
      }
      out.of_node[id].push_back(symbol);
    }
  }
  return out;
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
  auto resized_shape = [&](NodeId id) {
    Shape shape = g.node(id).shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (const int32_t k = symbols.symbol(id, d); k >= 0) shape[d] = values[k];
    }
    return shape;
  };
  return g.Rewritten([&](NodeId id, Node& n) {
    if (symbols.empty()) return;
    const bool contiguous_input = n.op == graph::Op::kInput && IsContiguous(n.shape, n.strides);
    const Shape was_shape = n.shape;
    n.shape = resized_shape(id);
    // A contiguous input's strides follow from its sizes: a key leaves them out.
    if (contiguous_input) n.strides = key ? Strides{} : ContiguousStrides(n.shape);
    if (n.op == graph::Op::kInput && !contiguous_input) RestrideInput(symbols, id, was_shape, key, n);
    if (n.op != graph::Op::kView) return;
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
    for (size_t e = 0; e < n.shape.size(); ++e) {
      int64_t d = 0;
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
    if (n.op == graph::Op::kInput && extent > 0) {
      extent = 1;
      for (size_t d = 0; d < n.shape.size(); ++d) extent += (n.shape[d] - 1) * n.strides[d];
    }
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
