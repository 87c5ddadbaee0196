#include "fusion/dynamic_shapes.h"

#include <algorithm>
#include <climits>
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
    pinned_.assign(n, false);
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
  void Pin(int32_t s) { pinned_[s] = true; }
  void MarkDynamic(int32_t s) { dynamic_[s] = true; }
  bool pinned(int32_t s) const { return pinned_[s]; }
  bool dynamic(int32_t s) const { return dynamic_[s]; }
  int32_t size() const { return static_cast<int32_t>(parent_.size()); }

 private:
  std::vector<int32_t> first_, parent_;
  std::vector<bool> pinned_, dynamic_;
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
      slots.Pin(slots.At(a, da)), slots.Pin(slots.At(b, db));
    }
  };
  auto pin_all = [&](NodeId x) {
    for (int64_t d = 0; d < static_cast<int64_t>(g.node(x).shape.size()); ++d) slots.Pin(slots.At(x, d));
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
    slots.Pin(slots.At(a, ra - 1)), slots.Pin(slots.At(b, rb - 2));  // K
    if (r == 3) {
      slots.Pin(slots.At(id, 0));
      if (ra == 3) slots.Pin(slots.At(a, 0));
      if (rb == 3) slots.Pin(slots.At(b, 0));
    }
    return;
  }
  // Attention: the node's dim i is [batch..., L, Ev]'s dim axes[i] (or i).
  std::vector<int64_t> node_dim(r);
  for (int64_t i = 0; i < r; ++i) node_dim[n.axes.empty() ? i : n.axes[i]] = i;
  const NodeId q = n.inputs[0], k = n.inputs[1], v = n.inputs[2];
  for (int64_t d = 0; d + 2 < r; ++d) {  // batch dims: any broadcast pins them
    slots.Pin(slots.At(id, node_dim[d]));
    for (NodeId x : n.inputs) slots.Pin(slots.At(x, d));
  }
  join(id, node_dim[r - 2], q, r - 2);  // L
  join(k, r - 2, v, r - 2);             // S
  if (n.inputs.size() > 3) join(n.inputs[3], r - 2, q, r - 2), join(n.inputs[3], r - 1, k, r - 2);
  slots.Pin(slots.At(id, node_dim[r - 1]));  // the head dims
  slots.Pin(slots.At(q, r - 1)), slots.Pin(slots.At(k, r - 1)), slots.Pin(slots.At(v, r - 1));
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
          slots.Pin(s);
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
          slots.Pin(slots.At(id, e));
        }
      }
    } else if (kind == OpKind::kReduction) {
      // Rows may be any number; the row length is compiled in.
      for (int64_t d = 0; d < rank; ++d) {
        if (std::binary_search(n.axes.begin(), n.axes.end(), d)) {
          slots.Pin(slots.At(n.inputs[0], d));
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
      slots.Pin(slots.At(x, n.dim));
    } else {
      for (int64_t d = 0; d < rank; ++d) slots.Pin(slots.At(id, d));
      for (NodeId in : n.inputs) {
        for (int64_t d = 0; d < static_cast<int64_t>(g.node(in).shape.size()); ++d) slots.Pin(slots.At(in, d));
      }
    }
  }

  // A class is pinned or dynamic when any of its slots is.
  std::vector<bool> class_pinned(slots.size(), false), class_dynamic(slots.size(), false);
  for (int32_t s = 0; s < slots.size(); ++s) {
    const int32_t root = slots.Find(s);
    class_pinned[root] = class_pinned[root] || slots.pinned(s);
    class_dynamic[root] = class_dynamic[root] || slots.dynamic(s);
  }
  absl::flat_hash_map<int32_t, int32_t> symbol_of_root;
  out.of_node.resize(g.size());
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    for (int64_t d = 0; d < static_cast<int64_t>(n.shape.size()); ++d) {
      const int32_t root = slots.Find(slots.At(id, d));
      int32_t symbol = -1;
      if (class_dynamic[root] && !class_pinned[root]) {
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

Graph SymbolicKey(const Graph& g, const DimSymbols& symbols) {
  std::vector<int64_t> markers(symbols.num_symbols());
  for (int32_t k = 0; k < symbols.num_symbols(); ++k) markers[k] = -1 - k;
  return Resize(g, symbols, markers);
}

Graph Resize(const Graph& g, const DimSymbols& symbols, absl::Span<const int64_t> values) {
  return g.Rewritten([&](NodeId id, Node& n) {
    const bool contiguous_input = n.op == graph::Op::kInput && IsContiguous(n.shape, n.strides);
    bool marker = false;
    for (size_t d = 0; d < n.shape.size(); ++d) {
      if (const int32_t k = symbols.symbol(id, d); k >= 0) n.shape[d] = values[k];
      marker = marker || n.shape[d] < 0;
    }
    // Negative sizes are key markers: there a contiguous input's strides are
    // left out, since they follow from the sizes.
    if (contiguous_input) n.strides = marker ? Strides{} : ContiguousStrides(n.shape);
  });
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
