#include "backend/cuda/row_printer.h"

#include <algorithm>
#include <functional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "backend/c_printer.h"
#include "backend/code_writer.h"
#include "backend/cuda/cache_hints.h"
#include "backend/cuda/held_row_values.h"
#include "backend/cuda/row_access_plan.h"
#include "backend/row_invariants.h"
#include "backend/cuda/online_exp_sum_source.h"

namespace fusebox::backend {

namespace {

// `bytes` (4, 8, or a multiple of 16) from `src` to `dst`, both pointers, in
// accesses of up to 16 bytes; a load from global `src` with `load`, or a store
// to global `dst` with `store`.
void VectorCopy(CodeWriter& w, const std::string& dst, const std::string& src, int bytes, CacheHint load, CacheHint store) {
  const int chunk = std::min(bytes, 16);
  const char* type = chunk == 16 ? "uint4" : chunk == 8 ? "uint2" : "unsigned int";
  for (int c = 0; c < bytes / chunk; ++c) {
    const std::string to = absl::StrCat("reinterpret_cast<", type, "*>(", dst, ")");
    const std::string from = absl::StrCat("reinterpret_cast<const ", type, "*>(", src, ")");
    if (load != CacheHint::kNormal) {
      w.Line(to, "[", c, "] = ", HintedLoad(load, absl::StrCat(from, " + ", c)), ";");
    } else if (store != CacheHint::kNormal) {
      w.Line(HintedStore(store, absl::StrCat(to, " + ", c), absl::StrCat(from, "[", c, "]")), ";");
    } else {
      w.Line(to, "[", c, "] = ", from, "[", c, "];");
    }
  }
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

class RowPrinter {
 public:
  // `spread`, `layout`: the schedule's (ChooseCudaRowLayout's), of `k` as
  // lowered (held row values leave them unchanged).
  RowPrinter(const Kernel& k, const CudaRowSpread& spread, const CudaRowLayout& layout, const CudaRowHooks& hooks,
             const TuningSnapshot& tuning)
      : k_(k), spread_(spread), hooks_(hooks), tuning_(tuning), layout_(layout), v_(layout_.vector_width),
        idx_(k.index64 ? "long long" : "int"), n_(absl::StrCat(k.row_length, k.index64 ? "LL" : "")),
        planner_(k, layout, tuning), preloaded_(planner_.preloaded()), lead_(planner_.lead()) {}

  std::string Print() const {
    const bool warp = spread_.strategy == RowStrategy::kWarpPerRow;
    const std::string extent = k_.dynamic_extent ? "fb_n" : absl::StrCat(k_.num_rows, k_.index64 ? "LL" : "");
    CodeWriter w;
    w.Raw(hooks_.prelude);
    if (layout_.shared_groups > 0) w.Raw(kRowCachePrelude);
    if (FoldsOnline()) {
      w.Raw(kCudaOnlineExpSum);
      w.Raw(kCudaOnlineExpSumCombine);
    }
    w.Line();
    const int lanes = layout_.threads_per_row;  // warp rows: L lanes each, 32 / L rows per warp
    const bool short_rows = warp && lanes < 32;
    w.Line("// ", k_.name, ": ",
           k_.dynamic_extent ? absl::StrCat("fb_n (run-time) rows of ", k_.row_length)
                             : absl::StrCat(k_.numel, " elements, ", k_.num_rows, " rows of ", k_.row_length),
           "; ", lanes, " threads per row", short_rows ? absl::StrCat(" (", 32 / lanes, " rows per warp)") : "",
           ", groups of ", v_, layout_.aligned_groups ? " aligned to 16 bytes of memory (the row's ends masked)" : "",
           !PersistentRows(k_) || layout_.on_chip ? ""
           : LoopsReadingTwice(k_, spread_)            ? ", looped (read twice, the second time from the L2)"
           : LoopsOneGroupPerStep(k_, spread_, tuning_) ? ", looped (one group per step, the row kept in the L2)"
                                              : ", looped (over the register budget)",
           layout_.shared_groups > 0
               ? absl::StrCat(", on chip: the last ", layout_.shared_groups, " groups of each thread in shared memory")
               : "");
    if (layout_.shared_groups > 0) w.Line("extern __shared__ __align__(16) unsigned char fb_smem[];");
    // A warp-per-row block holds rows_per_block rows, one per L lanes.
    int lane_bits = 0;
    while ((1 << lane_bits) < lanes) ++lane_bits;
    const std::string row = warp && layout_.rows_per_block > 1
        ? absl::StrCat("(", idx_, ")blockIdx.x * ", layout_.rows_per_block, " + ",
                       lane_bits > 0 ? absl::StrCat("(threadIdx.x >> ", lane_bits, ")") : "threadIdx.x")
        : absl::StrCat("(", idx_, ")blockIdx.x");
    const std::string params =
        absl::StrCat(CPrinter::ParamList(k_, /*restrict_qualified=*/true), k_.dynamic_extent ? ", long long fb_n" : "",
                     CPrinter::SizeParams(k_));
    const std::string aligned = planner_.AlignedPointers();
    // Rows held on chip with vectorized accesses are a function template on
    // whether the pointers are aligned (`fb_vec`), which the kernel picks
    // once: each instance is straight-line code without the other's path
    // (the shared branches cost the softmax over 65536 7% on the H200, in
    // registers). Looped rows test `fb_vec` inline: picked once, rms_norm
    // over 16384 x 4096 measured 5.5% slower.
    const bool instances = !aligned.empty() && aligned != "true" && layout_.on_chip;
    const std::string kernel =
        absl::StrCat("extern \"C\" __global__ void __launch_bounds__(", layout_.block_size,
                     layout_.min_blocks > 0 ? absl::StrCat(", ", layout_.min_blocks) : "", ") ", k_.name, "(", params, ")");
    if (instances) {
      const std::string rows = absl::StrCat("FB_INLINE void ", k_.name, "_rows(", params, ")");
      std::string args;
      for (const BufferParam& b : k_.buffers) absl::StrAppend(&args, args.empty() ? "" : ", ", b.name);
      if (k_.checks_indices) absl::StrAppend(&args, ", fb_err");
      if (k_.dynamic_extent) absl::StrAppend(&args, ", fb_n");
      absl::StrAppend(&args, CPrinter::SizeArgs(k_));
      w.Line("template <bool fb_vec>");
      w.Line(rows, ";");
      {
        auto entry = w.Block(kernel);
        auto pick = w.Block("if (", aligned, ")");
        w.Line(k_.name, "_rows<true>(", args, ");");
        pick.Else();
        w.Line(k_.name, "_rows<false>(", args, ");");
      }
      w.Line("template <bool fb_vec>");
      w.Open(rows);
    } else {
      w.Open(kernel);
    }
    // One block per SM walks the rows (CudaRowLayout::grid_stride), or one row per block / warp.
    if (layout_.grid_stride) {
      w.Open("for (", idx_, " r = blockIdx.x; r < ", extent, "; r += gridDim.x)");
    } else {
      w.Line("const ", idx_, " r = ", row, ";");
      w.Open("if (r < ", extent, ")");
    }
    // Rows of a warp past the last row skip the whole row (r < extent), so
    // shuffles name the row's own lanes (fb_mask), never the whole warp.
    w.Line("const int fb_lane = ", !warp ? "threadIdx.x" : lanes == 1 ? "0" : absl::StrCat("threadIdx.x & ", lanes - 1), ";");
    if (short_rows && lanes > 1) {
      w.Line("const unsigned fb_mask = 0x", absl::Hex((uint64_t{1} << lanes) - 1), "u << (threadIdx.x & ", 32 - lanes, ");");
    }
    if (!aligned.empty() && !instances) w.Line("const bool fb_vec = ", aligned, ";");
    // Aligned groups: the row's misalignment in elements, from its lead
    // access at j = 0 (0 where the pointers disagree and groups go scalar).
    if (layout_.aligned_groups) {
      w.Line("int fb_head = 0;");
      auto head = w.Block("if (fb_vec)");
      w.Line("const ", idx_, " j = 0;");
      w.Line("fb_head = (int)(((unsigned long long)(", k_.buffers[lead_.buffer].name, " + (", lead_.index.ToString(),
             ")) & 15) / ", lead_.element_size, ");");
    }

    if (layout_.on_chip) {
      int64_t shared_offset = 0;  // elements of fb_smem before this slot's
      for (size_t c = 0; c < k_.cached_loads.size(); ++c) {
        const char* type = ComputeCType(k_.cached_loads[c].dtype);
        if (layout_.shared_groups == 0 || !preloaded_.contains(static_cast<int>(c))) {
          w.Line(type, " c", c, "[", layout_.groups * v_, "];");
          continue;
        }
        const int64_t registers = (layout_.groups - layout_.shared_groups) * v_;
        w.Line("fb_row_cache<", type, ", ", registers, ", ", layout_.block_size, ", ", v_, "> c", c, ";");
        w.Line("c", c, ".s = reinterpret_cast<", type, "*>(fb_smem) + ", shared_offset, " + threadIdx.x * ", v_, ";");
        shared_offset += layout_.shared_groups * v_ * layout_.block_size;
      }
      RowLoopPlan plan{.lanes = k_};
      std::vector<Stmt> index_defs;  // gathered rows' indices (the token id), in a scope of the preload's own
      std::set<int> defined;
      for (int slot : preloaded_) {
        plan.loads.push_back(planner_.CachedAccess(slot, /*next_loop=*/0));
        for (const Stmt& s : k_.cached_loads[slot].index_defs) {
          if (defined.insert(s.result).second) index_defs.push_back(s);
        }
      }
      {
        auto scope = index_defs.empty() ? w.Indented(0) : w.Block();
        CPrinter::Statements(w, k_, index_defs, OpTemplate);
        if (!plan.loads.empty()) Loop(w, plan, nullptr, /*preload=*/true);
      }
      if (planner_.AsyncPreload(plan)) w.Line("fb_cp_async_wait();");
    }
    for (size_t p = 0; p < k_.passes.size(); ++p) {
      const Pass& pass = k_.passes[p];
      for (const Accumulator& a : pass.accumulators) CPrinter::AccumulatorDecl(w, a);
      Loop(w, planner_.Plan(p), &pass);
      for (const Accumulator& a : pass.accumulators) {
        if (a.online_max >= 0) {
          CombineOnline(w, a, lanes);
        } else if (!IsOnlineMax(pass, a)) {
          hooks_.after_pass(w, a, CPrinter::CombineLambda(a, OpTemplate(a.op)), lanes);
        }
      }
    }
    if (!k_.elementwise.empty()) Loop(w, planner_.Plan(k_.passes.size()), nullptr);
    if (!k_.row_body.empty()) {
      if (short_rows) {
        w.Open("if (fb_lane == 0)");
      } else {
        hooks_.open_row_stores(w);
      }
      CPrinter::Statements(w, k_, k_.row_body, OpTemplate);
      w.Close();  // the stores' scope
    }
    w.Close();  // the row
    w.Close();  // the function
    return std::move(w).Release();
  }

 private:
  static const char* OpTemplate(graph::Op op) { return graph::Info(op).cuda_expr; }

  // Online exp sums (online_exp_sums.h): a sum folds as one running pair
  // with its max (the partner), which it folds too.
  bool FoldsOnline() const {
    for (const Pass& p : k_.passes) {
      for (const Accumulator& a : p.accumulators) {
        if (a.online_max >= 0) return true;
      }
    }
    return false;
  }
  static bool IsOnlineMax(const Pass& pass, const Accumulator& a) {
    return std::any_of(pass.accumulators.begin(), pass.accumulators.end(),
                       [&](const Accumulator& b) { return b.online_max == a.temp; });
  }
  // One element's value folded into the pass's accumulators (`grouped`:
  // online sums keep it in fb_y<temp>[e] for fb_online_exp_sum_group).
  static void Accumulate(CodeWriter& w, const Pass& pass, bool grouped) {
    for (const Accumulator& a : pass.accumulators) {
      if (a.online_max >= 0 && grouped) {
        w.Line("fb_y", a.temp, "[e] = t", a.value, ";");
      } else if (a.online_max >= 0) {
        w.Line("fb_online_exp_sum(t", a.online_max, ", t", a.temp, ", t", a.value, ", 1.0f);");
      } else if (!IsOnlineMax(pass, a)) {
        CPrinter::AccumulateStep(w, a, OpTemplate(a.op), absl::StrCat("t", a.value), "(long long)j");
      }
    }
  }
  // The row's pairs (max, sum) combined across its lanes or block, final.
  void CombineOnline(CodeWriter& w, const Accumulator& a, int lanes) const {
    const std::string pair = absl::StrCat("t", a.online_max, ", t", a.temp);
    if (spread_.strategy == RowStrategy::kBlockPerRow) {
      w.Line("fb_block_online_exp_sum(", pair, ");");
    } else if (lanes > 1) {
      w.Line("fb_lanes_online_exp_sum<", lanes, ">(", pair, ", ", lanes < 32 ? "fb_mask" : "0xffffffffu", ");");
    }
    w.Line("fb_online_exp_sum_end(", pair, ");");
  }

  // The loop over the row's groups. Persistent rows: one unrolled step of
  // `groups` per thread over the registers c<slot> (`preload`: only filling
  // them). Looped rows: steps of kCudaLoopGroups groups, each step loading all
  // its groups into c<array> before using any, so the loads are in flight
  // together.
  void Loop(CodeWriter& w, const RowLoopPlan& plan, const Pass* pass, bool preload = false) const {
    const std::vector<Accumulator>* accumulators = pass != nullptr ? &pass->accumulators : nullptr;
    // Online sums of whole groups fold each group once (its max, then its
    // exp sum): per element a max, an exp and an add, as the two passes
    // (one element at a time takes an exp and the rescaling's arithmetic
    // each). Groups aligned to memory hold -inf where they pass the row's
    // ends, which the fold rescales away (or counts, then ends NaN, in a row
    // of -inf alone, whose sum is NaN anyway).
    const bool grouped = pass != nullptr && v_ > 1 && FoldsOnline();
    const int64_t width = int64_t{layout_.threads_per_row} * v_;  // elements per group of all the row's threads
    const int64_t step = width * layout_.groups;                      // elements per step of a looped row
    const bool persistent = layout_.on_chip;
    // Looped rows count their steps (a constant trip count, which the
    // compiler unrolls without remainder code) and skip the group guards
    // where the steps tile the row: a looped layer_norm's PTX 609 -> 390
    // lines, 39 -> 34 registers. Knob::kCountedLoop off (A/B runs) tests
    // `jc < n` instead.
    const bool counted = tuning_.On(Knob::kCountedLoop);
    // Aligned groups start up to V - 1 elements before the row (fb_head).
    const int64_t span = k_.row_length + (layout_.aligned_groups ? v_ - 1 : 0);
    const int64_t steps = (span + step - 1) / step;
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
    if (!preload) CPrinter::Statements(w, plan.lanes, plan.once, OpTemplate, /*cached_loads=*/true);
    auto run_loop = runs.empty() ? w.Indented(0) : w.Block("for (int fb_run = 0; fb_run < ", steps, "; fb_run += ", run, ")");
    for (const Accumulator* a : runs) w.Line(ComputeCType(a->dtype), " fb_run_t", a->temp, ";");
    auto fresh = runs.empty() ? w.Indented(0) : w.Block();
    for (const Accumulator* a : runs) CPrinter::AccumulatorDecl(w, *a);
    auto open_steps = [&] {
      const std::string first = runs.empty() ? "0" : "fb_run";
      const std::string bound =
          runs.empty() ? absl::StrCat(steps)
                       : absl::StrCat("(fb_run + ", run, " < ", steps, " ? fb_run + ", run, " : ", steps, ")");
      return counted ? w.Block("for (int fb_step = ", first, "; fb_step < ", bound, "; ++fb_step)")
                     : w.Block("for (", idx_, " jc = (", idx_, ")fb_lane * ", v_, head_, "; jc < ", n_, "; jc += ", step, ")");
    };
    auto step_loop = persistent ? w.Indented(0) : open_steps();
    if (!persistent) {
      if (counted) w.Line("const ", idx_, " jc = (", idx_, ")fb_lane * ", v_, " + (", idx_, ")fb_step * ", step, head_, ";");
      for (const RowAccess& a : plan.loads) {
        w.Line(ComputeCType(k_.buffers[a.buffer].dtype), " c", a.array, "[", layout_.groups * v_, "];");
      }
    }
    const bool guard = persistent ? span % width != 0 || layout_.aligned_groups
                                  : !counted || span % step != 0 || layout_.aligned_groups;
    // The loop over the thread's groups (q), `body` for each group within the row.
    auto groups = [&](const std::function<void()>& body) {
      w.Line("#pragma unroll");
      auto loop = w.Block("for (int q = 0; q < ", layout_.groups, "; ++q)");
      w.Line("const ", idx_, " jv = ",
             persistent ? absl::StrCat("((", idx_, ")fb_lane + q * ", layout_.threads_per_row, ") * ", v_, head_)
                        : absl::StrCat("jc + q * ", width),
             ";");
      auto in_row = guard ? w.Block("if (jv < ", n_, ")") : w.Indented(0);
      body();
    };
    if (preload) {
      if (!planner_.AsyncPreload(plan)) return groups([&] { LoadGroup(w, plan); });
      // The groups held in shared memory are copied there by cp.async.
      return groups([&] {
        auto copy = w.Block("if (q >= ", layout_.groups - layout_.shared_groups, " && fb_vec)");
        w.Line("const ", idx_, " j = jv;");
        for (const RowAccess& a : plan.loads) {
          w.Line("fb_cp_async16(&c", a.array, "[q * ", v_, "], ", k_.buffers[a.buffer].name, " + (", a.index.ToString(), "));");
        }
        copy.Else();
        LoadGroup(w, plan);
      });
    }
    if (!persistent && !plan.loads.empty()) groups([&] { LoadGroup(w, plan); });
    groups([&] {
      if (persistent) LoadGroup(w, plan);
      for (const RowAccess& a : plan.stores) w.Line(StorageCType(k_.buffers[a.buffer].dtype), " s", a.array, "[", v_, "];");
      if (grouped) {
        for (const Accumulator& a : pass->accumulators) {
          if (a.online_max < 0) continue;
          w.Line("float fb_y", a.temp, "[", v_, "];");
          if (layout_.aligned_groups) {
            w.Line("#pragma unroll");
            w.Line("for (int e = 0; e < ", v_, "; ++e) fb_y", a.temp, "[e] = -fb_inf();");
          }
        }
      }
      {
        if (v_ > 1) w.Line("#pragma unroll");
        auto element = v_ > 1 ? w.Block("for (int e = 0; e < ", v_, "; ++e)") : w.Block();
        if (v_ > 1) {
          w.Line("const int k = q * ", v_, " + e;");
          w.Line("const ", idx_, " j = jv + e;");
          if (layout_.aligned_groups) w.Line("if (", OutsideRow(), ") continue;");
        } else {
          w.Line("const int k = q;");
          w.Line("const ", idx_, " j = jv;");
        }
        CPrinter::Statements(w, plan.lanes, plan.body, OpTemplate, /*cached_loads=*/true);
        if (pass != nullptr) Accumulate(w, *pass, grouped);
      }
      if (grouped) {
        for (const Accumulator& a : pass->accumulators) {
          if (a.online_max >= 0) w.Line("fb_online_exp_sum_group(t", a.online_max, ", t", a.temp, ", fb_y", a.temp, ");");
        }
      }
      StoreGroup(w, plan);
    });
    step_loop.End();
    for (const Accumulator* a : runs) w.Line("fb_run_t", a->temp, " = t", a->temp, ";");
    fresh.End();
    for (const Accumulator* a : runs) {
      const std::string t = absl::StrCat("t", a->temp);
      w.Line(t, " = ", absl::Substitute(OpTemplate(a->op), t, "fb_run_" + t), ";");
    }
  }

  // `line` for each element e of the group, j its position in the row.
  // Aligned groups mask the elements outside the row.
  void EachElement(CodeWriter& w, const std::string& line) const {
    w.Line("#pragma unroll");
    auto element = w.Block("for (int e = 0; e < ", v_, "; ++e)");
    w.Line("const ", idx_, " j = jv + e;");
    w.Line(layout_.aligned_groups ? absl::StrCat("if (!(", OutsideRow(), ")) ") : "", line);
  }
  // Aligned groups: the condition that element j lies outside the row.
  std::string OutsideRow() const { return absl::StrCat("j < 0 || j >= ", n_); }
  // The group's 16-byte accesses where the pointers are aligned (`vector`,
  // j at the group's first element), else `scalar`.
  // `whole`: only groups wholly inside the row take the vector path (aligned
  // groups' stores).
  void AlignedOrScalar(CodeWriter& w, const std::function<void()>& vector, const std::function<void()>& scalar,
                       bool whole = false) const {
    auto branch = whole && layout_.aligned_groups
        ? w.Block("if (fb_vec && jv >= 0 && jv + ", v_, " <= ", n_, ")")
        : w.Block("if (fb_vec)");
    w.Line("const ", idx_, " j = jv;");
    vector();
    branch.Else();
    scalar();
  }

  // Loads one group (jv, q in scope) of each staged load into c<array>[q * V + e].
  void LoadGroup(CodeWriter& w, const RowLoopPlan& plan) const {
    auto staged = [](const RowAccess& a) { return absl::StrCat("fb_t", a.array); };
    bool vector = false;
    for (const RowAccess& a : plan.loads) {
      const BufferParam& b = k_.buffers[a.buffer];
      const std::string load = CPrinter::LoadExpression(k_, a.buffer, a.index);
      if (v_ == 1) {
        auto element = w.Block();
        w.Line("const ", idx_, " j = jv;");
        w.Line("c", a.array, "[q] = ", load, ";");
      } else if (!a.vector) {
        EachElement(w, absl::StrCat("c", a.array, "[q * ", v_, " + e] = ", load, ";"));
      } else {
        w.Line(StorageCType(b.dtype), " ", staged(a), "[", v_, "];");
        vector = true;
      }
    }
    if (!vector) return;
    AlignedOrScalar(
        w,
        [&] {
          for (const RowAccess& a : plan.loads) {
            const BufferParam& b = k_.buffers[a.buffer];
            if (a.vector) {
              VectorCopy(w, staged(a), absl::StrCat(b.name, " + (", a.index.ToString(), ")"), v_ * DTypeSize(b.dtype), a.hint,
                         CacheHint::kNormal);
            }
          }
        },
        [&] {
          for (const RowAccess& a : plan.loads) {
            const BufferParam& b = k_.buffers[a.buffer];
            if (a.vector) EachElement(w, absl::StrCat(staged(a), "[e] = ", b.name, "[", a.index.ToString(), "];"));
          }
          // Rows in registers and shared memory: the scalar path's loads of all
          // groups, hoisted ahead together, would spill; one group at a time.
          if (layout_.shared_groups > 0) w.Line("asm volatile(\"\" ::: \"memory\");");
        });
    for (const RowAccess& a : plan.loads) {
      if (!a.vector) continue;
      Kernel regs;
      regs.buffers.push_back({staged(a), k_.buffers[a.buffer].dtype});
      w.Line("#pragma unroll");
      w.Line("for (int e = 0; e < ", v_, "; ++e) c", a.array, "[q * ", v_,
             " + e] = ", CPrinter::LoadExpression(regs, 0, IndexExpr::Var("e", v_)), ";");
    }
  }

  // Writes one group of each staged store from s<array>.
  void StoreGroup(CodeWriter& w, const RowLoopPlan& plan) const {
    if (plan.stores.empty()) return;
    AlignedOrScalar(
        w,
        [&] {
          for (const RowAccess& a : plan.stores) {
            const BufferParam& b = k_.buffers[a.buffer];
            VectorCopy(w, absl::StrCat(b.name, " + (", a.index.ToString(), ")"), absl::StrCat("s", a.array),
                       v_ * DTypeSize(b.dtype), CacheHint::kNormal, a.hint);
          }
        },
        [&] {
          for (const RowAccess& a : plan.stores) {
            const BufferParam& b = k_.buffers[a.buffer];
            EachElement(w, absl::StrCat(b.name, "[", a.index.ToString(), "] = s", a.array, "[e];"));
          }
        },
        /*whole=*/true);
  }

  const Kernel& k_;
  const CudaRowSpread spread_;
  const CudaRowHooks& hooks_;
  const TuningSnapshot& tuning_;
  const CudaRowLayout layout_;
  const int v_;
  const char* idx_;
  const std::string n_;
  const std::string head_ = layout_.aligned_groups ? " - fb_head" : "";  // a group start's shift
  const RowAccessPlanner planner_;  // which accesses are staged, hinted, vectors (row_access_plan.h)
  const std::set<int>& preloaded_;  // on-chip rows: the cache slots loaded before the passes
  const AlignedGroupLead& lead_;    // aligned groups: the access that places them
};

}  // namespace

std::string PrintCudaRows(const Kernel& kernel, const CudaRowSpread& spread, const CudaRowLayout& layout,
                          const CudaRowHooks& hooks, const TuningSnapshot& tuning) {
  return RowPrinter(kernel, spread, layout, hooks, tuning).Print();
}

}  // namespace fusebox::backend
