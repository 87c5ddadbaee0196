#include "backend/cuda/held_row_values.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "backend/c_printer.h"

namespace fusebox::backend {
namespace {

// The structural identity of an expression: the statement's every field
// that decides its value, with operands by their expressions' ids (a
// temporary from outside the body, such as an earlier pass's result, by its
// number: -1 - t). Equal ids are the same computation.
struct ExprNode {
  StmtKind kind;
  graph::Op op;
  DType dtype;
  uint64_t constant;
  int slot, buffer;
  IndexExpr index;
  int64_t lo, hi, dim;
  std::vector<int64_t> operands;  // args, then the mask and the index's temporaries
  friend bool operator==(const ExprNode&, const ExprNode&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const ExprNode& n) {
    return H::combine(std::move(h), n.kind, n.op, n.dtype, n.constant, n.slot, n.buffer, n.index, n.lo, n.hi, n.dim,
                      n.operands);
  }
};

// Ids of expressions, shared by every loop body of a kernel.
class ExprIds {
 public:
  int Of(ExprNode node) { return ids_.try_emplace(std::move(node), static_cast<int>(ids_.size())).first->second; }

 private:
  absl::flat_hash_map<ExprNode, int> ids_;
};

// Per temporary of one loop body: its expression's id, how many statements
// it spans, the cache slots it reads and the outside temporaries.
struct Expressions {
  absl::flat_hash_map<int, int> key;
  absl::flat_hash_map<int, int> size;
  absl::flat_hash_map<int, std::set<int>> slots;
  absl::flat_hash_map<int, std::set<int>> outside;
};

Expressions Describe(const std::vector<Stmt>& body, ExprIds& ids) {
  Expressions e;
  for (const Stmt& s : body) {
    if (s.result < 0 || s.kind == StmtKind::kStore) continue;
    // A held load is its slot's value, wherever it is read from.
    const bool held = s.kind == StmtKind::kLoad && s.cache_slot >= 0;
    ExprNode node{.kind = s.kind, .op = s.kind == StmtKind::kCompute ? s.op : graph::Op::kCopy, .dtype = s.dtype,
                  .constant = std::bit_cast<uint64_t>(s.constant), .slot = s.cache_slot,
                  .buffer = held ? -1 : s.buffer, .index = held ? IndexExpr() : s.index, .lo = s.lo, .hi = s.hi,
                  .dim = s.dim, .operands = {}};
    int size = 1;
    std::set<int> slots, outside;
    if (held) slots.insert(s.cache_slot);
    std::vector<int> reads = s.args;
    if (s.mask >= 0) reads.push_back(s.mask);
    if (!held) {
      for (int t : s.index.Temps()) reads.push_back(t);
    }
    for (int arg : reads) {
      if (auto it = e.key.find(arg); it != e.key.end()) {
        node.operands.push_back(it->second);
        size += e.size[arg];
        slots.insert(e.slots[arg].begin(), e.slots[arg].end());
        outside.insert(e.outside[arg].begin(), e.outside[arg].end());
      } else {
        node.operands.push_back(-1 - int64_t{arg});
        outside.insert(arg);
      }
    }
    e.key[s.result] = ids.Of(std::move(node));
    e.size[s.result] = size;
    e.slots[s.result] = std::move(slots);
    e.outside[s.result] = std::move(outside);
  }
  return e;
}

bool ReadsSlot(const std::vector<Stmt>& body, int slot) {
  return std::any_of(body.begin(), body.end(),
                     [&](const Stmt& s) { return s.kind == StmtKind::kLoad && s.cache_slot == slot; });
}

// Removes the statements of loops `first`.. whose results nothing reads.
void RemoveDeadStatements(Kernel& k, size_t first) {
  for (bool removed = true; removed;) {
    absl::flat_hash_set<int> used;
    auto use = [&](const std::vector<Stmt>& body) {
      for (const Stmt& s : body) {
        used.insert(s.args.begin(), s.args.end());
        for (int t : s.index.Temps()) used.insert(t);  // a gather's checked index
      }
    };
    for (const Pass& p : k.passes) {
      use(p.body);
      for (const Accumulator& a : p.accumulators) used.insert(a.value);
    }
    use(k.elementwise);
    use(k.row_body);
    removed = false;
    for (size_t l = first; l < k.NumRowLoops(); ++l) {
      std::vector<Stmt>& body = k.RowLoop(l);
      const size_t before = body.size();
      std::erase_if(body, [&](const Stmt& s) { return s.kind != StmtKind::kStore && !used.contains(s.result); });
      removed |= body.size() != before;
    }
  }
}

// Holds `value` (a temporary of pass `p`) in `slot` from pass p on, if every
// later read of the slot is a copy of its expression.
bool TryHold(Kernel& k, size_t p, int slot, int value, int key, ExprIds& ids) {
  Kernel trial = k;
  const CachedLoad& c = k.cached_loads[slot];
  absl::flat_hash_set<int> replaced;
  for (size_t l = p + 1; l < trial.NumRowLoops(); ++l) {
    std::vector<Stmt>& body = trial.RowLoop(l);
    const Expressions e = Describe(body, ids);
    for (Stmt& s : body) {
      if (s.kind != StmtKind::kCompute || e.key.at(s.result) != key) continue;
      s = Stmt{.kind = StmtKind::kLoad, .result = s.result, .dtype = s.dtype, .buffer = c.buffer, .index = c.index,
               .cache_slot = slot};
      replaced.insert(s.result);
    }
  }
  if (replaced.empty()) return false;
  RemoveDeadStatements(trial, p + 1);
  for (size_t l = p + 1; l < trial.NumRowLoops(); ++l) {
    for (const Stmt& s : trial.RowLoop(l)) {
      if (s.kind == StmtKind::kLoad && s.cache_slot == slot && !replaced.contains(s.result)) return false;
    }
  }
  trial.passes[p].body.push_back(Stmt{.kind = StmtKind::kStore, .dtype = c.dtype, .args = {value}, .buffer = c.buffer,
                                      .index = c.index, .cache_slot = slot});
  k = std::move(trial);
  return true;
}

}  // namespace

Kernel ReuseHeldRowValues(Kernel kernel) {
  ExprIds ids;
  for (int slot = 0; slot < static_cast<int>(kernel.cached_loads.size()); ++slot) {
    // The last pass reading the slot, and whether a later loop reads it.
    int last = -1;
    for (size_t p = 0; p < kernel.passes.size(); ++p) {
      if (ReadsSlot(kernel.passes[p].body, slot)) last = static_cast<int>(p);
    }
    if (last < 0) continue;
    bool read_later = false;
    for (size_t l = last + 1; l < kernel.NumRowLoops(); ++l) read_later |= ReadsSlot(kernel.RowLoop(l), slot);
    if (!read_later) continue;
    // Candidates: values computed from the slot, held in its C type, and
    // reading no running result of this pass or a later one (those change
    // along the row); the largest first (the most work saved).
    std::set<int> running;
    for (size_t p = last; p < kernel.passes.size(); ++p) {
      for (const Accumulator& a : kernel.passes[p].accumulators) running.insert({a.temp, a.index_temp});
    }
    const std::vector<Stmt>& body = kernel.passes[last].body;
    const Expressions e = Describe(body, ids);
    const char* held_type = ComputeCType(kernel.cached_loads[slot].dtype);
    std::vector<int> candidates;
    for (const Stmt& s : body) {
      if (s.kind != StmtKind::kCompute || !e.slots.at(s.result).contains(slot) ||
          std::strcmp(ComputeCType(s.dtype), held_type) != 0) {
        continue;
      }
      const std::set<int>& outside = e.outside.at(s.result);
      if (std::none_of(outside.begin(), outside.end(), [&](int t) { return running.contains(t); })) {
        candidates.push_back(s.result);
      }
    }
    std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) { return e.size.at(a) > e.size.at(b); });
    for (int value : candidates) {
      if (TryHold(kernel, last, slot, value, e.key.at(value), ids)) break;
    }
  }
  return kernel;
}

}  // namespace fusebox::backend
