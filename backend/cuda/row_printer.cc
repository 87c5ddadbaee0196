#include "backend/cuda/row_printer.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "backend/c_printer.h"
#include "backend/cuda/cache_hints.h"
#include "backend/cuda/held_row_values.h"

namespace fusebox::backend {
namespace {

// `bytes` (4, 8, or a multiple of 16) from `src` to `dst`, both pointers, in
// accesses of up to 16 bytes; a load from global `src` with `load`, or a store
// to global `dst` with `store`.
std::string VectorCopy(const std::string& dst, const std::string& src, int bytes, const std::string& indent,
                       CacheHint load, CacheHint store) {
  const int chunk = std::min(bytes, 16);
  const char* type = chunk == 16 ? "uint4" : chunk == 8 ? "uint2" : "unsigned int";
  std::string out;
  for (int c = 0; c < bytes / chunk; ++c) {
    const std::string to = absl::StrCat("reinterpret_cast<", type, "*>(", dst, ")");
    const std::string from = absl::StrCat("reinterpret_cast<const ", type, "*>(", src, ")");
    if (load != CacheHint::kNormal) {
      absl::StrAppend(&out, indent, to, "[", c, "] = ", HintedLoad(load, absl::StrCat(from, " + ", c)), ";\n");
    } else if (store != CacheHint::kNormal) {
      absl::StrAppend(&out, indent, HintedStore(store, absl::StrCat(to, " + ", c), absl::StrCat(from, "[", c, "]")), ";\n");
    } else {
      absl::StrAppend(&out, indent, to, "[", c, "] = ", from, "[", c, "];\n");
    }
  }
  return out;
}

// Rows held in registers and shared memory (CudaRowLayout::shared_groups):
// value k of a thread is register k below R, else in shared memory, where
// the thread's groups of W values are W-vectors T apart (s: the thread's
// first vector, T: threads), so a warp's accesses to one group are
// consecutive 16-byte vectors. k is a constant once the loops over the
// groups are unrolled, so the choice folds away and `r` stays in registers.
// fb_cp_async16 copies a group from global to shared memory without
// staging it in registers (sm_80+), so all of a row's loads are in flight at
// once; fb_cp_async_wait waits for the thread's own copies.
constexpr char kRowCachePrelude[] = R"(template <typename V, int R, int T, int W>
struct fb_row_cache {
  V r[R];
  V* s;
  FB_INLINE V& operator[](int k) { return k < R ? r[k] : s[(k - R) / W * T * W + (k - R) % W]; }
};
FB_INLINE void fb_cp_async16(void* dst, const void* src) {
  unsigned long long shared;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(shared) : "l"(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"((unsigned)shared), "l"(src) : "memory");
}
FB_INLINE void fb_cp_async_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }
)";

// One row access staged through registers: a load into array c<array>, or a
// store from array s<array> (one group).
struct Access {
  int buffer;
  IndexExpr index;
  int array;
  bool vector;
  CacheHint hint = CacheHint::kNormal;  // of its 16-byte accesses (cache_hints.h)
};

// One loop over the row: its body with staged loads reading c<array>[k] and
// staged stores writing s<array>[e], and what to stage.
struct LoopPlan {
  Kernel lanes;  // the kernel's buffers, then the store staging arrays
  std::vector<Stmt> body;
  std::vector<Access> loads, stores;
};

class RowPrinter {
 public:
  // `layout`: ChooseCudaRowLayout's, of `k` as lowered (held row values
  // leave it unchanged).
  RowPrinter(const Kernel& k, const CudaRowLayout& layout, const CudaRowHooks& hooks, const TuningSnapshot& tuning)
      : k_(k), hooks_(hooks), tuning_(tuning), layout_(layout), v_(layout_.vector_width),
        idx_(k.index64 ? "long long" : "int"), n_(absl::StrCat(k.row_length, k.index64 ? "LL" : "")),
        preloaded_(layout_.on_chip ? PreloadedSlots(k) : std::set<int>{}),
        rereads_rows_(CudaCacheHintLevel(tuning) >= 1 && RereadsRows()) {}

  std::string Print() const {
    const bool warp = k_.strategy == RowStrategy::kWarpPerRow;
    const std::string extent = k_.dynamic_extent ? "fb_n" : absl::StrCat(k_.num_rows, k_.index64 ? "LL" : "");
    std::string out = absl::StrCat(hooks_.prelude, layout_.shared_groups > 0 ? kRowCachePrelude : "", "\n// ", k_.name, ": ");
    if (k_.dynamic_extent) {
      absl::StrAppend(&out, "fb_n (run-time) rows of ", k_.row_length);
    } else {
      absl::StrAppend(&out, k_.numel, " elements, ", k_.num_rows, " rows of ", k_.row_length);
    }
    const int lanes = layout_.threads_per_row;  // warp rows: L lanes each, 32 / L rows per warp
    const bool short_rows = warp && lanes < 32;
    absl::StrAppend(&out, "; ", lanes, " threads per row", short_rows ? absl::StrCat(" (", 32 / lanes, " rows per warp)") : "",
                    ", groups of ", v_,
                    !PersistentRows(k_) || layout_.on_chip ? ""
                    : LoopsReadingTwice(k_)            ? ", looped (read twice, the second time from the L2)"
                    : LoopsOneGroupPerStep(k_, tuning_) ? ", looped (one group per step, the row kept in the L2)"
                                                       : ", looped (over the register budget)",
                    layout_.shared_groups > 0 ? absl::StrCat(", on chip: the last ", layout_.shared_groups,
                                                             " groups of each thread in shared memory")
                                              : "",
                    "\n", layout_.shared_groups > 0 ? "extern __shared__ __align__(16) unsigned char fb_smem[];\n" : "");
    // A warp-per-row block holds rows_per_block rows, one per L lanes.
    int lane_bits = 0;
    while ((1 << lane_bits) < lanes) ++lane_bits;
    const std::string row = warp && layout_.rows_per_block > 1
        ? absl::StrCat("(", idx_, ")blockIdx.x * ", layout_.rows_per_block, " + ",
                       lane_bits > 0 ? absl::StrCat("(threadIdx.x >> ", lane_bits, ")") : "threadIdx.x")
        : absl::StrCat("(", idx_, ")blockIdx.x");
    // One block per SM walks the rows (CudaRowLayout::grid_stride), or one row per block / warp.
    const std::string open_row = layout_.grid_stride
        ? absl::StrCat("  for (", idx_, " r = blockIdx.x; r < ", extent, "; r += gridDim.x) {\n")
        : absl::StrCat("  const ", idx_, " r = ", row, ";\n  if (r < ", extent, ") {\n");
    const std::string params =
        absl::StrCat(CPrinter::ParamList(k_, /*restrict_qualified=*/true), k_.dynamic_extent ? ", long long fb_n" : "");
    const std::string aligned = AlignedPointers();
    // Rows held on chip with vectorized accesses are a function template on
    // whether the pointers are aligned (`fb_vec`), which the kernel picks
    // once: each instance is straight-line code without the other's path
    // (the shared branches cost the softmax over 65536 7% on the H200, in
    // registers). Looped rows test `fb_vec` inline: picked once, rms_norm
    // over 16384 x 4096 measured 5.5% slower.
    const bool instances = !aligned.empty() && layout_.on_chip;
    const std::string kernel =
        absl::StrCat("extern \"C\" __global__ void __launch_bounds__(", layout_.block_size,
                     layout_.min_blocks > 0 ? absl::StrCat(", ", layout_.min_blocks) : "", ") ", k_.name, "(", params, ") {\n");
    if (instances) {
      const std::string rows = absl::StrCat("template <bool fb_vec>\nFB_INLINE void ", k_.name, "_rows(", params, ")");
      std::string args;
      for (const BufferParam& b : k_.buffers) absl::StrAppend(&args, args.empty() ? "" : ", ", b.name);
      if (k_.checks_indices) absl::StrAppend(&args, ", fb_err");
      if (k_.dynamic_extent) absl::StrAppend(&args, ", fb_n");
      absl::StrAppend(&out, rows, ";\n", kernel, "  if (", aligned, ") {\n    ", k_.name, "_rows<true>(", args,
                      ");\n  } else {\n    ", k_.name, "_rows<false>(", args, ");\n  }\n}\n", rows, " {\n");
    } else {
      absl::StrAppend(&out, kernel);
    }
    // Rows of a warp past the last row skip the whole row (r < extent), so
    // shuffles name the row's own lanes (fb_mask), never the whole warp.
    absl::StrAppend(&out, open_row, "    const int fb_lane = ",
                    !warp ? "threadIdx.x" : lanes == 1 ? "0" : absl::StrCat("threadIdx.x & ", lanes - 1), ";\n");
    if (short_rows && lanes > 1) {
      absl::StrAppend(&out, "    const unsigned fb_mask = 0x", absl::Hex((uint64_t{1} << lanes) - 1), "u << (threadIdx.x & ",
                      32 - lanes, ");\n");
    }
    if (!aligned.empty() && !instances) absl::StrAppend(&out, "    const bool fb_vec = ", aligned, ";\n");

    if (layout_.on_chip) {
      int64_t shared_offset = 0;  // elements of fb_smem before this slot's
      for (size_t c = 0; c < k_.cached_loads.size(); ++c) {
        const char* type = ComputeCType(k_.cached_loads[c].dtype);
        if (layout_.shared_groups == 0 || !preloaded_.contains(static_cast<int>(c))) {
          absl::StrAppend(&out, "    ", type, " c", c, "[", layout_.groups * v_, "];\n");
          continue;
        }
        const int64_t registers = (layout_.groups - layout_.shared_groups) * v_;
        absl::StrAppend(&out, "    fb_row_cache<", type, ", ", registers, ", ", layout_.block_size, ", ", v_, "> c", c,
                        ";\n    c", c, ".s = reinterpret_cast<", type, "*>(fb_smem) + ", shared_offset, " + threadIdx.x * ",
                        v_, ";\n");
        shared_offset += layout_.shared_groups * v_ * layout_.block_size;
      }
      LoopPlan plan{.lanes = k_};
      for (int slot : preloaded_) plan.loads.push_back(CachedAccess(slot, /*next_loop=*/0));
      if (!plan.loads.empty()) absl::StrAppend(&out, Loop(plan, nullptr, /*preload=*/true));
      if (AsyncPreload(plan)) absl::StrAppend(&out, "    fb_cp_async_wait();\n");
    }
    for (size_t p = 0; p < k_.passes.size(); ++p) {
      const Pass& pass = k_.passes[p];
      for (const Accumulator& a : pass.accumulators) absl::StrAppend(&out, CPrinter::AccumulatorDecl(a, "    "));
      absl::StrAppend(&out, Loop(Plan(p), &pass.accumulators));
      for (const Accumulator& a : pass.accumulators) {
        absl::StrAppend(&out, hooks_.after_pass(a, CPrinter::CombineLambda(a, OpTemplate(a.op)), lanes));
      }
    }
    if (!k_.elementwise.empty()) absl::StrAppend(&out, Loop(Plan(k_.passes.size()), nullptr));
    if (!k_.row_body.empty()) {
      absl::StrAppend(&out, short_rows ? "    if (fb_lane == 0) {\n" : hooks_.open_row_stores,
                      CPrinter::Statements(k_, k_.row_body, OpTemplate, "      "),
                      "    }\n");
    }
    return absl::StrCat(out, "  }\n}\n");
  }

 private:
  static const char* OpTemplate(graph::Op op) { return graph::Info(op).cuda_expr; }

  // Whether a loop from `next_loop` on reads element (buffer, index) from
  // memory again.
  bool ReadAgain(int buffer, const IndexExpr& index, size_t next_loop) const {
    for (size_t l = next_loop; l < k_.NumRowLoops(); ++l) {
      for (const Stmt& s : k_.RowLoop(l)) {
        const bool from_registers = layout_.on_chip && s.cache_slot >= 0 && preloaded_.contains(s.cache_slot);
        if (s.kind == StmtKind::kLoad && s.buffer == buffer && !from_registers && s.index == index) return true;
      }
    }
    return false;
  }
  // Whether the kernel re-reads rows: some per-element load is read again.
  bool RereadsRows() const {
    for (size_t l = 0; l < k_.NumRowLoops(); ++l) {
      for (const Stmt& s : k_.RowLoop(l)) {
        if (s.kind == StmtKind::kLoad && TouchesEachElementOnce(s.index) && ReadAgain(s.buffer, s.index, l + 1)) return true;
      }
    }
    return false;
  }
  // The cache hint (cache_hints.h) of a load, in the loop before
  // `next_loop`, of an element of `buffer` at `index` that a row touches
  // once per pass: kept while a later loop reads it again, else streamed.
  CacheHint LoadHint(int buffer, const IndexExpr& index, size_t next_loop) const {
    if (!TouchesEachElementOnce(index)) {
      const bool kept = rereads_rows_ && BroadcastOverRows(index) && (CudaL1HintBits(tuning_) & 4);
      return kept ? CacheHint::kKeep : CacheHint::kNormal;
    }
    if (!rereads_rows_) return k_.elementwise.empty() ? StreamReadOnlyReduction(tuning_) : StreamEverywhere(tuning_);
    if (ReadAgain(buffer, index, next_loop)) return CacheHint::kKeep;
    return (CudaL1HintBits(tuning_) & 2) ? CacheHint::kLastRead : CacheHint::kStream;
  }
  CacheHint StoreHint(const IndexExpr& index) const {
    if (!TouchesEachElementOnce(index)) return CacheHint::kNormal;
    if (!rereads_rows_) return StreamEverywhere(tuning_);
    return (CudaL1HintBits(tuning_) & 8) ? CacheHint::kNormal : CacheHint::kStream;
  }

  Access CachedAccess(int slot, size_t next_loop) const {
    const CachedLoad& c = k_.cached_loads[slot];
    return {c.buffer, c.index, slot, Vectorizable(c.dtype, c.index, v_), LoadHint(c.buffer, c.index, next_loop)};
  }

  // Whether the preload copies the shared-memory groups with cp.async: every
  // preloaded value moves as a 16-byte group of the type it is held in
  // (float: no conversion on the way), on sm_80+.
  bool AsyncPreload(const LoopPlan& preload) const {
    if (layout_.shared_groups == 0 || (k_.cuda_arch != 0 && k_.cuda_arch < 80) || preload.loads.empty()) return false;
    for (const Access& a : preload.loads) {
      const DType dtype = k_.buffers[a.buffer].dtype;
      if (!a.vector || ComputeDType(dtype) != dtype || v_ * DTypeSize(dtype) != 16) return false;
    }
    return true;
  }

  // Whether every buffer with a vectorized access is aligned for it (the
  // kernel's choice of `fb_vec`), as a condition; "" without such accesses.
  std::string AlignedPointers() const {
    std::set<int> buffers;
    auto visit = [&](const std::vector<Stmt>& block) {
      for (const Stmt& s : block) {
        if (s.is_access() && Vectorizable(k_.buffers[s.buffer].dtype, s.index, v_)) buffers.insert(s.buffer);
      }
    };
    for (const Pass& p : k_.passes) visit(p.body);
    visit(k_.elementwise);
    if (buffers.empty()) return "";
    std::string mask;
    for (int b : buffers) {
      const int align = std::min(16, v_ * DTypeSize(k_.buffers[b].dtype));
      absl::StrAppend(&mask, mask.empty() ? "" : " | ", "((unsigned long long)", k_.buffers[b].name, " & ", align - 1, ")");
    }
    return absl::StrCat("(", mask, ") == 0");
  }

  // Which loads of `block` are staged (looped rows: every per-element load;
  // persistent rows: cached values the passes did not preload) and which
  // stores are (the vectorizable ones).
  LoopPlan Plan(size_t loop) const {
    LoopPlan plan{.lanes = k_, .body = k_.RowLoop(loop)};
    std::set<int> staged;
    for (Stmt& s : plan.body) {
      if (s.kind == StmtKind::kLoad && layout_.on_chip && s.cache_slot >= 0) {
        if (!preloaded_.contains(s.cache_slot) && staged.insert(s.cache_slot).second) {
          plan.loads.push_back(CachedAccess(s.cache_slot, loop + 1));
        }
      } else if (s.kind == StmtKind::kLoad) {
        s.cache_slot = -1;  // a plain load, unless staged below
        // Gathered and masked loads stay in the body, after their index and mask.
        if (!s.index.DependsOn("j") || s.is_data_dependent()) continue;
        s.cache_slot = static_cast<int>(plan.loads.size());
        plan.loads.push_back({s.buffer, s.index, s.cache_slot, Vectorizable(k_.buffers[s.buffer].dtype, s.index, v_),
                              LoadHint(s.buffer, s.index, loop + 1)});
      } else if (s.kind == StmtKind::kStore && s.cache_slot < 0 && Vectorizable(k_.buffers[s.buffer].dtype, s.index, v_)) {
        const int array = static_cast<int>(plan.stores.size());
        plan.stores.push_back({s.buffer, s.index, array, true, StoreHint(s.index)});
        plan.lanes.buffers.push_back({absl::StrCat("s", array), k_.buffers[s.buffer].dtype, true});
        s.buffer = static_cast<int>(plan.lanes.buffers.size()) - 1;
        s.index = IndexExpr::Var("e", v_);
      }
    }
    return plan;
  }

  // The loop over the row's groups. Persistent rows: one unrolled step of
  // `groups` per thread over the registers c<slot> (`preload`: only filling
  // them). Looped rows: steps of kCudaLoopGroups groups, each step loading all
  // its groups into c<array> before using any, so the loads are in flight
  // together.
  std::string Loop(const LoopPlan& plan, const std::vector<Accumulator>* accumulators, bool preload = false) const {
    const int64_t width = int64_t{layout_.threads_per_row} * v_;  // elements per group of all the row's threads
    const int64_t step = width * layout_.groups;                      // elements per step of a looped row
    const bool persistent = layout_.on_chip;
    // Looped rows count their steps (a constant trip count, which the
    // compiler unrolls without remainder code) and skip the group guards
    // where the steps tile the row: a looped layer_norm's PTX 609 -> 390
    // lines, 39 -> 34 registers. Knob::kCountedLoop off (A/B runs) tests
    // `jc < n` instead.
    const bool counted = tuning_.On(Knob::kCountedLoop);
    const int64_t steps = (k_.row_length + step - 1) / step;
    // Float sums and products of rows whose threads fold over
    // kCudaRowRunValues values each fold in runs of about that many into
    // fresh (shadowing) accumulators, each added to the row's, so no thread's
    // rounding chain grows with the row (RoundsEachFold; a 2^25-element var
    // was 1.8e-5 off with one chain).
    const int64_t run = std::max<int64_t>(1, kCudaRowRunValues / (layout_.groups * v_));
    std::vector<const Accumulator*> runs;
    if (!persistent && counted && accumulators != nullptr && steps > run) {
      for (const Accumulator& a : *accumulators) {
        if (RoundsEachFold(a)) runs.push_back(&a);
      }
    }
    std::string out, loop_in = runs.empty() ? "    " : "        ";
    if (!runs.empty()) {
      absl::StrAppend(&out, "    for (int fb_run = 0; fb_run < ", steps, "; fb_run += ", run, ") {\n");
      for (const Accumulator* a : runs) absl::StrAppend(&out, "      ", ComputeCType(a->dtype), " fb_run_t", a->temp, ";\n");
      absl::StrAppend(&out, "      {\n");
      for (const Accumulator* a : runs) absl::StrAppend(&out, CPrinter::AccumulatorDecl(*a, loop_in));
    }
    std::string in = loop_in;
    if (!persistent) {
      const std::string first = runs.empty() ? "0" : "fb_run";
      const std::string bound =
          runs.empty() ? absl::StrCat(steps)
                       : absl::StrCat("(fb_run + ", run, " < ", steps, " ? fb_run + ", run, " : ", steps, ")");
      absl::StrAppend(&out, in,
                      counted ? absl::StrCat("for (int fb_step = ", first, "; fb_step < ", bound, "; ++fb_step) {\n", in,
                                             "  const ", idx_, " jc = (", idx_, ")fb_lane * ", v_, " + (", idx_,
                                             ")fb_step * ", step, ";\n")
                              : absl::StrCat("for (", idx_, " jc = (", idx_, ")fb_lane * ", v_, "; jc < ", n_,
                                             "; jc += ", step, ") {\n"));
      in += "  ";
      for (const Access& a : plan.loads) {
        absl::StrAppend(&out, in, ComputeCType(k_.buffers[a.buffer].dtype), " c", a.array, "[", layout_.groups * v_, "];\n");
      }
    }
    const bool guard = persistent ? k_.row_length % width != 0 : !counted || k_.row_length % step != 0;
    const std::string body_in = in + (guard ? "    " : "  ");
    const std::string open_groups = absl::StrCat(
        in, "#pragma unroll\n", in, "for (int q = 0; q < ", layout_.groups, "; ++q) {\n", in, "  const ", idx_, " jv = ",
        persistent ? absl::StrCat("((", idx_, ")fb_lane + q * ", layout_.threads_per_row, ") * ", v_)
                   : absl::StrCat("jc + q * ", width),
        ";\n", guard ? absl::StrCat(in, "  if (jv < ", n_, ") {\n") : "");
    const std::string close_groups = absl::StrCat(guard ? absl::StrCat(in, "  }\n") : "", in, "}\n");
    if (preload) {
      if (!AsyncPreload(plan)) return absl::StrCat(out, open_groups, LoadGroup(plan, body_in), close_groups);
      // The groups held in shared memory are copied there by cp.async.
      std::string copies;
      for (const Access& a : plan.loads) {
        absl::StrAppend(&copies, body_in, "  fb_cp_async16(&c", a.array, "[q * ", v_, "], ", k_.buffers[a.buffer].name,
                        " + (", a.index.ToString(), "));\n");
      }
      return absl::StrCat(out, open_groups, body_in, "if (q >= ", layout_.groups - layout_.shared_groups,
                          " && fb_vec) {\n", body_in, "  const ", idx_, " j = jv;\n", copies, body_in, "} else {\n",
                          LoadGroup(plan, body_in + "  "), body_in, "}\n", close_groups);
    }
    if (!persistent && !plan.loads.empty()) absl::StrAppend(&out, open_groups, LoadGroup(plan, body_in), close_groups);
    absl::StrAppend(&out, open_groups);
    if (persistent) absl::StrAppend(&out, LoadGroup(plan, body_in));
    for (const Access& a : plan.stores) {
      absl::StrAppend(&out, body_in, StorageCType(k_.buffers[a.buffer].dtype), " s", a.array, "[", v_, "];\n");
    }
    const std::string e_in = body_in + "  ";
    if (v_ > 1) {
      absl::StrAppend(&out, body_in, "#pragma unroll\n", body_in, "for (int e = 0; e < ", v_, "; ++e) {\n", e_in,
                      "const int k = q * ", v_, " + e;\n", e_in, "const ", idx_, " j = jv + e;\n");
    } else {
      absl::StrAppend(&out, body_in, "{\n", e_in, "const int k = q;\n", e_in, "const ", idx_, " j = jv;\n");
    }
    absl::StrAppend(&out, CPrinter::Statements(plan.lanes, plan.body, OpTemplate, e_in, /*cached_loads=*/true));
    if (accumulators != nullptr) {
      for (const Accumulator& a : *accumulators) {
        absl::StrAppend(&out, CPrinter::AccumulateStep(a, OpTemplate(a.op), absl::StrCat("t", a.value), "(long long)j", e_in));
      }
    }
    absl::StrAppend(&out, body_in, "}\n", StoreGroup(plan, body_in), close_groups);
    if (!persistent) absl::StrAppend(&out, loop_in, "}\n");
    if (!runs.empty()) {
      for (const Accumulator* a : runs) absl::StrAppend(&out, loop_in, "fb_run_t", a->temp, " = t", a->temp, ";\n");
      absl::StrAppend(&out, "      }\n");
      for (const Accumulator* a : runs) {
        const std::string t = absl::StrCat("t", a->temp);
        absl::StrAppend(&out, "      ", t, " = ", absl::Substitute(OpTemplate(a->op), t, "fb_run_" + t), ";\n");
      }
      absl::StrAppend(&out, "    }\n");
    }
    return out;
  }

  // Loads one group (jv, q in scope) of each staged load into c<array>[q * V + e].
  std::string LoadGroup(const LoopPlan& plan, const std::string& in) const {
    std::string out, vector, scalar, convert;
    for (const Access& a : plan.loads) {
      const BufferParam& b = k_.buffers[a.buffer];
      const std::string load = CPrinter::LoadExpression(k_, a.buffer, a.index);
      if (v_ == 1) {
        absl::StrAppend(&out, in, "{\n", in, "  const ", idx_, " j = jv;\n", in, "  c", a.array, "[q] = ", load, ";\n", in,
                        "}\n");
        continue;
      }
      if (!a.vector) {
        absl::StrAppend(&out, in, "#pragma unroll\n", in, "for (int e = 0; e < ", v_, "; ++e) {\n", in, "  const ", idx_,
                        " j = jv + e;\n", in, "  c", a.array, "[q * ", v_, " + e] = ", load, ";\n", in, "}\n");
        continue;
      }
      const std::string t = absl::StrCat("fb_t", a.array);
      absl::StrAppend(&out, in, StorageCType(b.dtype), " ", t, "[", v_, "];\n");
      absl::StrAppend(&vector, VectorCopy(t, absl::StrCat(b.name, " + (", a.index.ToString(), ")"),
                                          v_ * DTypeSize(b.dtype), in + "  ", a.hint, CacheHint::kNormal));
      absl::StrAppend(&scalar, in, "  #pragma unroll\n", in, "  for (int e = 0; e < ", v_, "; ++e) {\n", in, "    const ", idx_, " j = jv + e;\n",
                      in, "    ", t, "[e] = ", b.name, "[", a.index.ToString(), "];\n", in, "  }\n");
      Kernel staged;
      staged.buffers.push_back({t, b.dtype});
      absl::StrAppend(&convert, in, "#pragma unroll\n", in, "for (int e = 0; e < ", v_, "; ++e) c", a.array, "[q * ", v_,
                      " + e] = ", CPrinter::LoadExpression(staged, 0, IndexExpr::Var("e", v_)), ";\n");
    }
    if (vector.empty()) return out;
    // Rows in registers and shared memory: the scalar path's loads of all
    // groups, hoisted ahead together, would spill; one group at a time.
    if (layout_.shared_groups > 0) absl::StrAppend(&scalar, in, "  asm volatile(\"\" ::: \"memory\");\n");
    return absl::StrCat(out, in, "if (fb_vec) {\n", in, "  const ", idx_, " j = jv;\n", vector, in, "} else {\n", scalar, in, "}\n", convert);
  }

  // Writes one group of each staged store from s<array>.
  std::string StoreGroup(const LoopPlan& plan, const std::string& in) const {
    if (plan.stores.empty()) return "";
    std::string vector, scalar;
    for (const Access& a : plan.stores) {
      const BufferParam& b = k_.buffers[a.buffer];
      const std::string s = absl::StrCat("s", a.array);
      absl::StrAppend(&vector, VectorCopy(absl::StrCat(b.name, " + (", a.index.ToString(), ")"), s,
                                          v_ * DTypeSize(b.dtype), in + "  ", CacheHint::kNormal, a.hint));
      absl::StrAppend(&scalar, in, "  #pragma unroll\n", in, "  for (int e = 0; e < ", v_, "; ++e) {\n", in, "    const ", idx_, " j = jv + e;\n",
                      in, "    ", b.name, "[", a.index.ToString(), "] = ", s, "[e];\n", in, "  }\n");
    }
    return absl::StrCat(in, "if (fb_vec) {\n", in, "  const ", idx_, " j = jv;\n", vector, in, "} else {\n", scalar, in, "}\n");
  }

  const Kernel& k_;
  const CudaRowHooks& hooks_;
  const TuningSnapshot& tuning_;
  const CudaRowLayout layout_;
  const int v_;
  const char* idx_;
  const std::string n_;
  const std::set<int> preloaded_;  // on-chip rows: the cache slots loaded before the passes
  const bool rereads_rows_;        // hints on, and rows are read from memory more than once
};

}  // namespace

std::string PrintCudaRows(const Kernel& kernel, const CudaRowLayout& layout, const CudaRowHooks& hooks,
                          const TuningSnapshot& tuning) {
  return RowPrinter(kernel, layout, hooks, tuning).Print();
}

}  // namespace fusebox::backend
