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
    } else {
      for (int64_t d = 0; d < rank; ++d) slots.Pin(slots.At(id, d));
      // A matmul's GEMM is planned for its operands' sizes too.
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
