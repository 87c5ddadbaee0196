#include "fusion/recognize_attention.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/attention.h"
#include "backend/cuda/flash_attention.h"
#include "fusion/causal_mask.h"
#include "fusion/compose_views.h"
#include "fusion/eliminate_dead_nodes.h"
#include "tensor/error.h"

namespace fusebox::fusion {
namespace {

using graph::Graph;
using graph::GraphBuilder;
using graph::Node;
using graph::NodeId;
using graph::Op;

bool IsHalf(DType d) { return d == DType::kFloat16 || d == DType::kBFloat16; }

bool IsConstant(const Graph& g, NodeId id, double value) {
  return g.node(id).op == Op::kConstant && g.node(id).scalar == value;
}

// A view that only renames the dims of its input's row-major value.
bool IsReshape(const Node& n) {
  return n.op == Op::kView && n.offset == 0 && n.strides == ContiguousStrides(n.shape);
}

// `id` itself, or the input it reshapes (matmul folds batch dims this way).
NodeId Unreshaped(const Graph& g, NodeId id) { return IsReshape(g.node(id)) ? g.node(id).inputs[0] : id; }

// One hand-written attention: the nodes it replaces and what the attention node needs.
struct Match {
  NodeId result = -1;  // the second matmul
  NodeId q = -1, k_t = -1, v = -1;  // the GEMMs' operands: [b?, L, E], [b?, E, S], [b?, S, Ev]
  Shape batch;
  int64_t l = 0, s = 0, e = 0, ev = 0;
  DType dtype = DType::kFloat32;
  double scale = 1;
  NodeId mask = -1;  // bool or float, [batch..., L, S]
  bool mask_drops = false;  // masked_fill's: true drops the key
  bool causal = false;
  bool keeps_all = false;  // the mask keeps every key: none is read
  std::vector<int32_t> value_inputs;  // causal or keeping all as these graph inputs' values are
  std::vector<NodeId> replaced;  // every node between the GEMMs' operands and the result
};

// The scores x that `p` is softmax(x, -1) of, noting the nodes; else -1: as
// softmax() captures it or written out (exp(x - amax(x, -1)) / sum(...)),
// computed in f32 and rounded to 16 bits, or in x's dtype. A widening cast
// of x is the caller's (ScaledScores or the 16-bit softmax's own).
NodeId SoftmaxInput(const Graph& g, NodeId p, std::vector<NodeId>* nodes) {
  NodeId div = p;
  if (g.node(p).op == Op::kCast && IsHalf(g.node(p).dtype) &&
      g.node(g.node(p).inputs[0]).dtype == DType::kFloat32) {
    div = g.node(p).inputs[0];
  }
  const Node& d = g.node(div);
  if (d.op != Op::kDiv) return -1;
  const size_t r = d.shape.size();
  // `red_view` broadcasts a keepdim reduction of `of` over the last dim.
  auto reduced = [&](NodeId red_view, Op op, NodeId of) {
    const Node& v = g.node(red_view);
    if (v.op != Op::kView || v.shape != g.node(of).shape) return false;
    const Node& red = g.node(v.inputs[0]);
    Strides want = ContiguousStrides(red.shape);
    if (!want.empty()) want.back() = 0;
    return red.op == op && red.inputs[0] == of && red.axes == std::vector<int64_t>{static_cast<int64_t>(r) - 1} &&
           v.strides == want && v.offset == 0;
  };
  const NodeId exp = d.inputs[0];
  if (g.node(exp).op != Op::kExp || !reduced(d.inputs[1], Op::kSum, exp)) return -1;
  const NodeId sub = g.node(exp).inputs[0];
  if (g.node(sub).op != Op::kSub) return -1;
  const NodeId x = g.node(sub).inputs[0];
  if (!reduced(g.node(sub).inputs[1], Op::kMax, x)) return -1;
  for (NodeId id : {p, div, d.inputs[1], g.node(d.inputs[1]).inputs[0], exp, sub, g.node(sub).inputs[1],
                    g.node(g.node(sub).inputs[1]).inputs[0]}) {
    nodes->push_back(id);
  }
  return x;
}

// `x` without a widening cast of 16-bit values to f32 (noted), else `x`.
NodeId Unwidened(const Graph& g, NodeId x, std::vector<NodeId>* nodes) {
  const Node& n = g.node(x);
  if (n.op != Op::kCast || n.dtype != DType::kFloat32 || !IsHalf(g.node(n.inputs[0]).dtype)) return x;
  nodes->push_back(x);
  return n.inputs[0];
}

// Scores as matmul(q, k^T) times or divided by a constant (or neither).
struct Scores {
  NodeId gemm = -1;
  double scale = 1;
  std::vector<NodeId> nodes;  // from the scaled value back to the GEMM
};
std::optional<Scores> ScaledScores(const Graph& g, NodeId x) {
  const Node& n = g.node(x);
  Scores out{.nodes = {x}};
  NodeId raw = x;
  auto constant = [&](NodeId id) { return g.node(id).op == Op::kConstant; };
  if (n.op == Op::kMul && (constant(n.inputs[0]) || constant(n.inputs[1]))) {
    const bool left = constant(n.inputs[0]);
    out.scale = g.node(n.inputs[left ? 0 : 1]).scalar;
    raw = n.inputs[left ? 1 : 0];
  } else if (n.op == Op::kDiv && constant(n.inputs[1])) {
    out.scale = 1 / g.node(n.inputs[1]).scalar;
    raw = n.inputs[0];
  }
  out.nodes.push_back(raw);
  raw = Unwidened(g, raw, &out.nodes);  // scores.float(): the kernel computes in f32 anyway
  out.gemm = Unreshaped(g, raw);
  if (g.node(out.gemm).op != Op::kMatmul || !std::isfinite(out.scale)) return std::nullopt;
  out.nodes.push_back(raw);
  out.nodes.push_back(out.gemm);
  return out;
}

// The pattern ending at matmul `result`, or a reason it is not attention
// (empty when it is not a softmax @ v at all).
std::optional<Match> MatchAttention(const Graph& g, NodeId result, CausalMaskMemo* memo, InputValues* values,
                                    std::string* why) {
  Match m{.result = result};
  const Node& mm = g.node(result);
  const NodeId p = Unreshaped(g, mm.inputs[0]);
  m.v = mm.inputs[1];
  m.replaced.push_back(mm.inputs[0]);
  const NodeId softmax_input = SoftmaxInput(g, p, &m.replaced);
  if (softmax_input < 0) return std::nullopt;
  const NodeId scores = Unwidened(g, softmax_input, &m.replaced);
  const Node& sc = g.node(scores);
  const size_t r = sc.shape.size();
  if (r < 2) return std::nullopt;
  // From here on it is a softmax over the last dim feeding a GEMM: say why when it stays.
  m.batch = Shape(sc.shape.begin(), sc.shape.end() - 2);
  m.l = sc.shape[r - 2], m.s = sc.shape[r - 1];
  NodeId unmasked = scores;
  if (sc.op == Op::kWhere && IsConstant(g, sc.inputs[1], -INFINITY)) {
    m.mask = sc.inputs[0], m.mask_drops = true, unmasked = sc.inputs[2];
  } else if (sc.op == Op::kWhere && IsConstant(g, sc.inputs[2], -INFINITY)) {
    m.mask = sc.inputs[0], unmasked = sc.inputs[1];
  } else if (sc.op == Op::kAdd) {
    const bool left = ScaledScores(g, sc.inputs[0]).has_value();
    m.mask = sc.inputs[left ? 1 : 0], unmasked = sc.inputs[left ? 0 : 1];
  }
  if (unmasked != scores) m.replaced.push_back(scores);
  std::optional<Scores> qk = ScaledScores(g, unmasked);
  if (!qk) {
    *why = "its scores are not matmul(q, k^T) times a constant, then masked";
    return std::nullopt;
  }
  m.scale = qk->scale;
  m.dtype = g.node(qk->gemm).dtype;
  m.replaced.insert(m.replaced.end(), qk->nodes.begin(), qk->nodes.end());
  m.q = g.node(qk->gemm).inputs[0];
  m.k_t = g.node(qk->gemm).inputs[1];
  const Node &q = g.node(m.q), &k_t = g.node(m.k_t), &v = g.node(m.v);
  m.e = q.shape.back(), m.ev = v.shape.back();
  int64_t batch = 1;
  for (int64_t b : m.batch) batch *= b;
  Shape lead = m.batch.empty() ? Shape() : Shape{batch};
  auto shaped = [&](const Node& n, int64_t rows, int64_t cols) {
    Shape want = lead;
    want.push_back(rows), want.push_back(cols);
    return n.shape == want;
  };
  if (g.node(p).dtype != m.dtype || v.dtype != m.dtype || mm.dtype != m.dtype) {
    *why = "its probabilities, v or result are not of the scores' GEMM's dtype";
    return std::nullopt;
  }
  if (!shaped(q, m.l, m.e) || !shaped(k_t, m.e, m.s) || !shaped(v, m.s, m.ev) || !shaped(mm, m.l, m.ev)) {
    *why = "its GEMMs' shapes are not [..., L, E] x [..., S, E] x [..., S, Ev]";
    return std::nullopt;
  }
  // The cheap refusals first: the mask's evaluation below costs L * S steps.
  if (!cuda::FlashAttentionSupports(m.dtype, m.e) || m.ev != m.e) {
    *why = absl::StrCat("the fused kernel takes bf16, f16 or f32 with head dim 64 or 128 (and Ev = E), not ",
                        DTypeName(m.dtype), " E ", m.e, " Ev ", m.ev, " (scaled_dot_product_attention "
                        "decomposes it the same way)");
    return std::nullopt;
  }
  if (m.l == 0 || m.s == 0 || m.batch.size() > backend::kAttentionBatchDims) {
    *why = "it has no queries or keys, or more than 4 batch dims";
    return std::nullopt;
  }
  if (m.mask >= 0) {
    const Node& mask = g.node(m.mask);
    const bool bool_mask = mask.dtype == DType::kBool && sc.op == Op::kWhere;
    if (mask.shape != sc.shape || (!bool_mask && mask.dtype != m.dtype)) {
      *why = "its mask is neither bool nor of q's dtype";
      return std::nullopt;
    }
    std::vector<int32_t> read;
    const MaskKind kind = JudgeMask(g, m.mask, !m.mask_drops, memo, values, &read);  // a float mask: additive
    m.causal = kind == MaskKind::kCausal, m.keeps_all = kind == MaskKind::kAll;
    // Only what the plan drops depends on the values: a mask read as a mask
    // is right for any, so that plan needs no guard.
    if (kind != MaskKind::kOther) m.value_inputs = std::move(read);
  }
  return m;
}

// Whether the replaced nodes feed nothing but each other and `result`.
bool Exclusive(const Graph& g, const std::vector<std::vector<NodeId>>& users, const Match& m) {
  absl::flat_hash_set<NodeId> inside(m.replaced.begin(), m.replaced.end());
  inside.insert(m.result);
  absl::flat_hash_set<NodeId> returned(g.outputs().begin(), g.outputs().end());
  for (NodeId id : m.replaced) {
    if (returned.contains(id)) return false;
    for (NodeId user : users[id]) {
      if (!inside.contains(user)) return false;
    }
  }
  return true;
}

std::string Describe(const Match& m) {
  const char* mask = m.causal ? "causal" : m.mask < 0 ? "no mask" : m.keeps_all ? "a mask keeping every key" : "a mask";
  return absl::StrCat("softmax(q @ k^T * ", m.scale, ", ", mask, ") @ v over ", DTypeName(m.dtype), " [",
                      absl::StrJoin(m.batch, ", "), m.batch.empty() ? "" : ", ", m.l, ", ", m.s, "] E ", m.e);
}

// " (graph input(s) 3 ...)" where the mask reads inputs whose values are
// never assumed, their memory's pointer handed out (InputValues::Escaped).
std::string EscapedNote(const Graph& g, NodeId mask, InputValues* values) {
  if (values == nullptr || mask < 0) return "";
  std::vector<int32_t> escaped;
  std::vector<NodeId> stack = {mask};
  absl::flat_hash_set<NodeId> seen;
  while (!stack.empty()) {
    const NodeId id = stack.back();
    stack.pop_back();
    if (!seen.insert(id).second) continue;
    const Node& n = g.node(id);
    if (n.op == Op::kInput && values->Escaped(n.input_index)) escaped.push_back(n.input_index);
    stack.insert(stack.end(), n.inputs.begin(), n.inputs.end());
  }
  if (escaped.empty()) return "";
  std::sort(escaped.begin(), escaped.end());
  return absl::StrCat(" (the mask's values are not assumed: graph input(s) ", absl::StrJoin(escaped, ", "),
                      " had a writable pointer handed out by data_ptr(), which writes unseen)");
}

// Builds the rewritten graph: each match's result becomes the attention node
// (viewed back to the GEMM's [batch, L, Ev] where batch dims were folded).
class Rewriter {
 public:
  explicit Rewriter(const Graph& g) : g_(g), builder_(g.device()), remap_(g.size(), -1) {}

  // `judged`: attention nodes whose mask (bool or additive) is causal or keeps every key.
  Graph Run(const absl::flat_hash_map<NodeId, Match>& matches, const absl::flat_hash_map<NodeId, MaskKind>& judged) {
    absl::flat_hash_set<NodeId> replaced;
    for (const auto& [result, m] : matches) replaced.insert(m.replaced.begin(), m.replaced.end());
    for (NodeId id = 0; id < g_.size(); ++id) {
      if (replaced.contains(id)) continue;  // read by nothing that stays
      if (auto it = matches.find(id); it != matches.end()) {
        remap_[id] = Attention(it->second);
        continue;
      }
      Node n = g_.node(id);
      if (n.op == Op::kView && reshaped_.contains(n.inputs[0])) {
        // A view of the GEMM's row-major value is one of the attention
        // node's; the one that undoes matmul's batch folding is the node.
        const NodeId attention = reshaped_.at(n.inputs[0]);
        const bool whole = n.shape == builder_.node(attention).shape && IsReshape(n);
        if (whole) {
          remap_[id] = attention;
          continue;
        }
        n.inputs[0] = attention;
      } else {
        for (NodeId& in : n.inputs) in = remap_[in];
      }
      if (auto it = judged.find(id); it != judged.end()) {  // the mask read no more
        n.inputs.pop_back();
        n.dim = it->second == MaskKind::kCausal ? 1 : 0;
      }
      remap_[id] = builder_.Add(std::move(n));
    }
    std::vector<NodeId> outputs, targets;
    for (NodeId t : g_.store_targets()) targets.push_back(t < 0 ? -1 : remap_[t]);
    for (size_t k = 0; k < g_.outputs().size(); ++k) {
      // A returned GEMM result is the attention node's value: the same
      // row-major elements, which the caller's tensor views as before.
      const NodeId out = g_.outputs()[k];
      const bool fresh = targets.empty() || targets[k] < 0;
      outputs.push_back(fresh && reshaped_.contains(out) ? reshaped_.at(out) : remap_[out]);
    }
    return EliminateDeadNodes(std::move(builder_).Build(std::move(outputs), std::move(targets)));
  }

 private:
  // `base`'s value read with `layout`: the node itself where that is all of it.
  NodeId View(ViewOf layout) {
    layout = ThroughViewsAndCopies(g_, layout);
    const Node& base = g_.node(layout.base);
    FUSEBOX_CHECK(remap_[layout.base] >= 0, "attention operand %", layout.base, " was replaced");
    if (base.shape == layout.shape && layout.offset == 0 && layout.strides == ContiguousStrides(layout.shape)) {
      return remap_[layout.base];
    }
    return builder_.Add(Node{.op = Op::kView, .dtype = base.dtype, .shape = layout.shape,
                             .inputs = {remap_[layout.base]}, .strides = layout.strides, .offset = layout.offset});
  }

  Shape Full(const Match& m, int64_t rows, int64_t cols) const {
    Shape shape = m.batch;
    shape.push_back(rows), shape.push_back(cols);
    return shape;
  }

  // The keys a masked_fill mask keeps: its negation, on the unbroadcast value
  // where a view broadcasts it.
  NodeId Kept(NodeId mask) {
    const Node& m = g_.node(mask);
    if (m.op == Op::kView) {
      Node view = m;
      view.inputs[0] = Kept(m.inputs[0]);
      return builder_.Add(std::move(view));
    }
    if (m.op == Op::kEq || m.op == Op::kNe) {
      Node flipped = m;
      flipped.op = m.op == Op::kEq ? Op::kNe : Op::kEq;
      for (NodeId& in : flipped.inputs) in = remap_[in];
      return builder_.Add(std::move(flipped));
    }
    auto constant = [&](double value) {
      return builder_.Add(Node{.op = Op::kConstant, .dtype = DType::kBool, .shape = m.shape, .scalar = value});
    };
    return builder_.Add(Node{.op = Op::kWhere, .dtype = DType::kBool, .shape = m.shape,
                             .inputs = {remap_[mask], constant(0), constant(1)}});
  }

  NodeId Attention(const Match& m) {
    const Shape q_shape = Full(m, m.l, m.e), k_t_shape = Full(m, m.e, m.s);
    Strides k_strides = ContiguousStrides(k_t_shape);  // k[..., s, e] = k_t[..., e, s]
    std::swap(k_strides[k_strides.size() - 1], k_strides[k_strides.size() - 2]);
    Node node{.op = Op::kAttention, .dtype = m.dtype, .shape = Full(m, m.l, m.ev), .scalar = m.scale,
              .dim = m.causal ? 1 : 0};
    node.inputs.push_back(View({.base = m.q, .shape = q_shape, .strides = ContiguousStrides(q_shape)}));
    node.inputs.push_back(View({.base = m.k_t, .shape = Full(m, m.s, m.e), .strides = k_strides}));
    const Shape v_shape = Full(m, m.s, m.ev);
    node.inputs.push_back(View({.base = m.v, .shape = v_shape, .strides = ContiguousStrides(v_shape)}));
    if (m.mask >= 0 && !m.causal && !m.keeps_all) node.inputs.push_back(m.mask_drops ? Kept(m.mask) : remap_[m.mask]);
    const Shape shape = node.shape;
    const NodeId attention = builder_.Add(std::move(node));
    const Node& gemm = g_.node(m.result);
    if (gemm.shape == shape) return attention;
    reshaped_[m.result] = attention;
    return builder_.Add(Node{.op = Op::kView, .dtype = m.dtype, .shape = gemm.shape, .inputs = {attention},
                             .strides = ContiguousStrides(gemm.shape)});
  }

  const Graph& g_;
  GraphBuilder builder_;
  std::vector<NodeId> remap_;
  absl::flat_hash_map<NodeId, NodeId> reshaped_;  // a result GEMM -> its attention node (new graph)
};

}  // namespace

GraphRewrite RecognizeAttention(const Graph& g, InputValues* values) {
  std::vector<std::vector<NodeId>> users(g.size());
  for (NodeId id = 0; id < g.size(); ++id) {
    for (NodeId in : g.node(id).inputs) users[in].push_back(id);
  }
  absl::flat_hash_map<NodeId, Match> matches;
  absl::flat_hash_map<NodeId, MaskKind> judged;
  GraphRewrite out;
  // " (causal as the values of graph input(s) 3 are now ...)", noting the inputs.
  auto assumed = [&](MaskKind kind, const std::vector<int32_t>& inputs) -> std::string {
    if (inputs.empty()) return "";
    for (int32_t in : inputs) {
      if (std::find(out.value_inputs.begin(), out.value_inputs.end(), in) == out.value_inputs.end()) {
        out.value_inputs.push_back(in);
      }
    }
    return absl::StrCat(" (", kind == MaskKind::kCausal ? "causal" : "keeping every key",
                        " as the values of graph input(s) ", absl::StrJoin(inputs, ", "),
                        " are now: the plan is used while that memory is not written or rebound)");
  };
  CausalMaskMemo memo;  // each layer's mask is judged once
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    // scaled_dot_product_attention's own mask (bool: true keeps a key; float: added).
    if (n.op == Op::kAttention && n.inputs.size() == 4 && n.dim == 0) {
      std::vector<int32_t> read;
      const MaskKind kind = JudgeMask(g, n.inputs[3], /*keeps=*/true, &memo, values, &read);
      if (kind == MaskKind::kOther) {
        if (std::string escaped = EscapedNote(g, n.inputs[3], values); !escaped.empty()) {
          out.notes.push_back(absl::StrCat("attention %", id, "'s mask is read by the kernel", escaped));
        }
        continue;
      }
      judged.emplace(id, kind);
      out.notes.push_back(absl::StrCat("attention %", id, "'s ",
                                       g.node(n.inputs[3]).dtype == DType::kBool ? "bool" : "additive", " mask ",
                                       kind == MaskKind::kCausal ? "is causal: the causal kernel runs"
                                                                 : "keeps every key: the unmasked kernel runs",
                                       " and reads no mask", assumed(kind, read)));
      continue;
    }
    if (n.op != Op::kMatmul) continue;
    std::string why;
    std::optional<Match> m = MatchAttention(g, id, &memo, values, &why);
    if (m && !Exclusive(g, users, *m)) {
      why = "its scores or probabilities are also used elsewhere";
      m.reset();
    }
    if (m) {
      const std::string note = m->causal || m->keeps_all
                                   ? assumed(m->causal ? MaskKind::kCausal : MaskKind::kAll, m->value_inputs)
                                   : EscapedNote(g, m->mask, values);
      out.notes.push_back(absl::StrCat("hand-written attention ", Describe(*m),
                                       " recognized: runs as scaled_dot_product_attention's fused kernel", note));
      matches.emplace(id, *std::move(m));
    } else if (!why.empty()) {
      out.notes.push_back(absl::StrCat("softmax(scores) @ v -> ", DTypeName(g.node(id).dtype),
                                       ShapeToString(g.node(id).shape), " stays as written: ", why));
    }
  }
  out.graph = matches.empty() && judged.empty() ? g : Rewriter(g).Run(matches, judged);
  return out;
}

}  // namespace fusebox::fusion
