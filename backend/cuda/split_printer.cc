#include "backend/cuda/split_printer.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "backend/c_printer.h"
#include "backend/cuda/cache_hints.h"
#include "backend/cuda/column_tiles.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/cuda/online_exp_sum_source.h"
#include "tensor/error.h"

namespace fusebox::backend {
namespace {

// Partials a thread loads before folding them online (an exp per step):
// NVRTC unrolled the fold by 4 on its own, ~30 L2 round trips a thread for
// 121 chunks. 16 made f32 softmax and log_softmax over [16411, 1023] 5-8%
// faster on the H200; plain folds (sums, max) measured no faster.
constexpr int kCudaPartialUnroll = 16;


}  // namespace

// Split rows (CudaRowSpread::split): a partial kernel folds each (row, chunk) into
// one partial result per accumulator in scratch; the final kernel folds
// each row's partials and runs the per-row stores.
//  kBlockPerRow: a block per (row, chunk), combined across the block;
//    partial (r, p) at r * split + p; then a block per row.
//  kThreadPerRow (column reductions): 2-D tiles where CudaRowSpread::column_tiles
//    (column_tiles.h), else a block per (256 columns, chunk), a thread
//    walking its column's chunk kColumnUnroll rows at a time,
//    unrolled: the rows' loads are independent (only the fold is a chain),
//    so that many are in flight per thread; either way partial (r, p) at
//    p * num_rows + r, so neighbouring threads write and read neighbouring
//    addresses; then a thread per column.
std::string PrintCudaSplit(const Kernel& k, const CudaRowSpread& spread, const CudaRowHooks& hooks,
                           const TuningSnapshot& tuning) {
  auto op_template = [](graph::Op op) { return graph::Info(op).cuda_expr; };
  const bool columns = spread.strategy == RowStrategy::kThreadPerRow;
  const int64_t split = spread.split;
  const std::string idx = columns && !k.index64 ? "int" : "long long";
  const std::string sfx = idx == "int" ? "" : "LL";
  const std::string rows = absl::StrCat(k.num_rows, sfx), length = absl::StrCat(k.row_length, sfx);
  // Every pass's accumulators in order, numbered across passes: accumulator
  // c's partials are fb_part<c>.
  struct Partial {
    const Accumulator* acc;
    size_t pass;
  };
  std::vector<Partial> all;
  std::string partials;
  bool online = false;
  for (size_t p = 0; p < k.passes.size(); ++p) {
    for (const Accumulator& a : k.passes[p].accumulators) {
      online = online || a.online_max >= 0;
      absl::StrAppend(&partials, ", ", ComputeCType(a.dtype), "* __restrict__ fb_part", all.size());
      if (a.index_temp >= 0) absl::StrAppend(&partials, ", long long* __restrict__ fb_part_index", all.size());
      all.push_back({&a, p});
    }
  }
  const std::string params = CPrinter::ParamList(k, /*restrict_qualified=*/true) + partials;
  const std::string chunk = absl::StrCat(CudaSplitChunk(k, spread, tuning), sfx);
  // Column lanes (CudaRowSpread::column_lanes): `lanes` threads per column,
  // thread (fb_lane, fb_col) of a block walking rows [begin, end), the
  // fb_lane-th share of `lane_rows` of the chunk; lanes past the first hand
  // their folds to it through shared memory (fb_lanes<c>).
  const int lanes = columns ? spread.column_lanes : 1;
  const int64_t block_columns = kCudaBlockSize / lanes;
  const int unroll = tuning.GetInt(Knob::kColumnUnroll);
  const int64_t lane_rows = lanes == 1 ? CudaSplitChunk(k, spread, tuning)
                                       : (CudaSplitChunk(k, spread, tuning) / unroll + lanes - 1) / lanes * unroll;
  const int64_t tiles = CudaSplitColumnTiles(k, spread);
  // Several loops over each column (softmax over dim 0): a launch per pass,
  // each folding the earlier passes' partials first, and the per-element
  // stores in the final kernel over the same chunks.
  const bool multi = k.passes.size() > 1 || !k.elementwise.empty();
  // Each element of a single-pass kernel's rows is read once
  // (StreamEverywhere: streaming the column sum's partial measured 3%
  // slower on the H200, unlike a row sum's loads).
  auto streamed = [&](const Stmt& s) {
    if (multi || !TouchesEachElementOnce(s.index) || StreamEverywhere(tuning) == CacheHint::kNormal) return std::string();
    return HintedLoad(CacheHint::kStream, absl::StrCat(k.buffers[s.buffer].name, " + (", s.index.ToString(), ")"));
  };
  CodeWriter w;
  // Online sums (online_exp_sums.h): each folds as one running pair with
  // its max, the partner, whose own fold it does.
  auto partner_of = [&](const Accumulator& a) {
    for (size_t c = 0; c < all.size(); ++c) {
      if (all[c].acc->temp == a.online_max) return c;
    }
    FUSEBOX_CHECK(false, "online sum t", a.temp, " has no max t", a.online_max, " in ", k.name);
    return all.size();
  };
  auto is_partner = [&](const Accumulator& a) {
    for (const Partial& q : all) {
      if (q.acc->online_max == a.temp) return true;
    }
    return false;
  };
  // The running pair (m, s) takes in a pair (ym, ys): a partial's, or one
  // element's (ys 1; kCudaOnlineExpSum).
  auto online_step = [&](const std::string& m, const std::string& sum, const std::string& ym, const std::string& ys) {
    w.Line("fb_online_exp_sum(", m, ", ", sum, ", ", ym, ", ", ys.empty() ? "1.0f" : ys, ");");
  };
  // One element (at `j`) of pass `p`'s loop folded into its accumulators, or
  // of the per-element stores (p == passes.size()).
  auto element = [&](size_t p) {
    CPrinter::Statements(w, k, k.RowLoop(p), op_template, /*cached_loads=*/false, streamed);
    if (p == k.passes.size()) return;
    for (const Accumulator& a : k.passes[p].accumulators) {
      if (a.online_max >= 0) {
        online_step(absl::StrCat("t", a.online_max), absl::StrCat("t", a.temp), absl::StrCat("t", a.value), "");
      } else if (!is_partner(a)) {
        CPrinter::AccumulateStep(w, a, op_template(a.op), absl::StrCat("t", a.value), "(long long)j");
      }
    }
  };
  // Stores (or folds) the partial of every accumulator of the passes in
  // [first, last) at `slot` of `<name><c>` (fb_part: the partials in scratch;
  // fb_lanes: a block's column lanes in shared memory).
  auto partial_slots = [&](const std::string& slot, bool load, size_t first, size_t last,
                           const std::string& name = "fb_part") {
    for (size_t c = 0; c < all.size(); ++c) {
      if (all[c].pass < first || all[c].pass >= last) continue;
      const Accumulator& a = *all[c].acc;
      const std::string value = absl::StrCat(name, c, slot), index = absl::StrCat(name, "_index", c, slot);
      if (load) {
        if (a.online_max >= 0) {
          online_step(absl::StrCat("t", a.online_max), absl::StrCat("t", a.temp), absl::StrCat(name, partner_of(a), slot),
                      value);
        } else if (!is_partner(a)) {
          CPrinter::AccumulateStep(w, a, op_template(a.op), value, index);
        }
        continue;
      }
      w.Line(value, " = t", a.temp, ";");
      if (a.index_temp >= 0) w.Line(index, " = t", a.index_temp, ";");
    }
  };
  auto declare = [&](size_t first, size_t last) {
    for (size_t p = first; p < last; ++p) {
      for (const Accumulator& a : k.passes[p].accumulators) CPrinter::AccumulatorDecl(w, a);
    }
  };
  // The online pairs of the passes before `last` made final (an all -inf
  // column's sum NaN, as eager's; kCudaOnlineExpSum).
  auto online_ends = [&](size_t last) {
    for (const Partial& q : all) {
      if (q.pass < last && q.acc->online_max >= 0) {
        w.Line("fb_online_exp_sum_end(t", q.acc->online_max, ", t", q.acc->temp, ");");
      }
    }
  };
  // A column's totals of the passes before `last`, from their partials
  // (online ones kCudaPartialUnroll at a time).
  auto column_totals = [&](size_t last) {
    if (last == 0) return;
    declare(0, last);
    if (online) w.Directive(absl::StrCat("#pragma unroll ", kCudaPartialUnroll));
    {
      auto parts = w.Block("for (int p = 0; p < ", split, "; ++p)");
      partial_slots(absl::StrCat("[p * ", rows, " + r]"), /*load=*/true, 0, last);
    }
    online_ends(last);
  };
  // With column lanes, at kernel scope (it synchronizes the block): lane l
  // folds partials l, l + lanes, ...; the lanes' folds meet in shared memory
  // (fb_totals<c>), and each lane folds them all in the same order, so every
  // lane holds the same totals, having read 1 / lanes of the partials.
  auto column_totals_of_lanes = [&](size_t last) {
    if (last == 0) return;
    for (size_t c = 0; c < all.size(); ++c) {
      if (all[c].pass >= last) continue;
      w.Line("__shared__ ", ComputeCType(all[c].acc->dtype), " fb_totals", c, "[", lanes, "][", block_columns, "];");
    }
    declare(0, last);
    {
      auto row = w.Block("if (r < ", rows, ")");
      if (online) w.Directive(absl::StrCat("#pragma unroll ", kCudaPartialUnroll / lanes));
      auto parts = w.Block("for (int p = fb_lane; p < ", split, "; p += ", lanes, ")");
      partial_slots(absl::StrCat("[p * ", rows, " + r]"), /*load=*/true, 0, last);
    }
    partial_slots("[fb_lane][fb_col]", /*load=*/false, 0, last, "fb_totals");
    w.Line("__syncthreads();");
    for (size_t c = 0; c < all.size(); ++c) {
      if (all[c].pass < last) w.Line("t", all[c].acc->temp, " = ", CPrinter::IdentityLiteral(*all[c].acc), ";");
    }
    {
      auto others = w.Block("for (int l = 0; l < ", lanes, "; ++l)");
      partial_slots("[l][fb_col]", /*load=*/true, 0, last, "fb_totals");
    }
    online_ends(last);
  };
  // A column's chunk [begin, end) through loop `p`, kColumnUnroll rows at a
  // time: the rows' loads are independent (only the fold is a chain).
  auto column_chunk = [&](size_t p) {
    auto steps = [&](const std::string& bound) {
      auto step = w.Block("for (; j0 + ", unroll, " <= ", bound, "; j0 += ", unroll, ")");
      w.Directive("#pragma unroll");
      auto rows_of_step = w.Block("for (int u = 0; u < ", unroll, "; ++u)");
      w.Line("const ", idx, " j = j0 + u;");
      element(p);
    };
    w.Line(idx, " j0 = begin;");
    // Long chunks fold in runs of kCudaColumnRunSteps steps, each into
    // fresh (shadowing) sums and products then added to the chunk's, so
    // no rounding chain grows with the column (RoundsEachFold); an online
    // sum's run is a pair with its max's, combined as two partials are.
    const int64_t run = kCudaColumnRunSteps * unroll;
    std::vector<const Accumulator*> runs;
    if (p < k.passes.size() && lane_rows > run) {
      for (const Accumulator& a : k.passes[p].accumulators) {
        if (RoundsEachFold(a) || a.online_max >= 0 || is_partner(a)) runs.push_back(&a);
      }
    }
    if (runs.empty()) {
      steps("end");
    } else {
      auto run_loop = w.Block("for (", idx, " fb_run = begin; fb_run < end; fb_run += ", run, ")");
      w.Line("const ", idx, " fb_run_end = fb_run + ", run, " < end ? fb_run + ", run, " : end;");
      for (const Accumulator* a : runs) w.Line(ComputeCType(a->dtype), " fb_run_t", a->temp, ";");
      {
        auto fresh = w.Block();
        for (const Accumulator* a : runs) CPrinter::AccumulatorDecl(w, *a);
        steps("fb_run_end");
        for (const Accumulator* a : runs) w.Line("fb_run_t", a->temp, " = t", a->temp, ";");
      }
      for (const Accumulator* a : runs) {
        const std::string t = absl::StrCat("t", a->temp);
        if (a->online_max >= 0) {
          const std::string m = absl::StrCat("t", a->online_max);
          online_step(m, t, "fb_run_" + m, "fb_run_" + t);
        } else if (!is_partner(*a)) {
          w.Line(t, " = ", absl::Substitute(op_template(a->op), t, "fb_run_" + t), ";");
        }
      }
    }
    auto tail = w.Block("for (", idx, " j = j0; j < end; ++j)");
    element(p);
  };
  // The column and chunk of this thread: a block per (256 columns, chunk),
  // or per (256 / lanes columns, chunk) with column lanes.
  auto column_and_chunk = [&] {
    w.Line("const ", idx, " part = blockIdx.x / ", tiles, ";");
    if (lanes == 1) {
      w.Line("const ", idx, " r = (", idx, ")(blockIdx.x % ", tiles, ") * ", kCudaBlockSize, " + threadIdx.x;");
      w.Line("const ", idx, " begin = part * ", chunk, ", end = begin + ", chunk, " < ", length, " ? begin + ", chunk,
             " : ", length, ";");
      return;
    }
    w.Line("const int fb_col = threadIdx.x % ", block_columns, ", fb_lane = threadIdx.x / ", block_columns, ";");
    w.Line("const ", idx, " r = (", idx, ")(blockIdx.x % ", tiles, ") * ", block_columns, " + fb_col;");
    w.Line("const ", idx, " fb_chunk_end = part * ", chunk, " + ", chunk, " < ", length, " ? part * ", chunk, " + ", chunk,
           " : ", length, ";");
    w.Line("const ", idx, " begin = part * ", chunk, " + fb_lane * ", lane_rows, sfx, ", end = begin + ", lane_rows, sfx,
           " < fb_chunk_end ? begin + ", lane_rows, sfx, " : fb_chunk_end;");
  };
  auto combine = [&] {
    for (const Accumulator& a : k.passes.at(0).accumulators) {
      hooks.after_pass(w, a, CPrinter::CombineLambda(a, op_template(a.op)), 32);
    }
  };

  const bool tiled = UsesCudaColumnTiles(spread);
  w.Raw(hooks.prelude);
  if (online) w.Raw(kCudaOnlineExpSum);
  w.Line();
  w.Line("// ", k.name, ": ", k.num_rows, columns ? " columns" : " rows", " of ", k.row_length, ", each split over ", split,
         " chunks of ", CudaSplitChunk(k, spread, tuning),
         lanes > 1 ? absl::StrCat(", ", lanes, " lanes of ", lane_rows, " rows per column") : "",
         tiled ? absl::StrCat("; tiles of ", kCudaColumnTileThreadsX, " x ", kCudaColumnTileThreadsY, " threads, ",
                              kCudaColumnTileWidth, " columns and ", kCudaColumnTileSteps, " rows each (column_tiles.h)")
               : "",
         multi ? absl::StrCat("; a launch per pass (", k.passes.size(), "), then the stores") : "");
  if (tiled) {
    w.Raw(PrintCudaColumnTiles(k, params, tuning));
  } else if (columns) {
    // Each pass's partial kernel waits for the one before it (launched as its
    // programmatic dependent, as the final kernel is).
    for (size_t p = 0; p < k.passes.size(); ++p) {
      if (p > 0) w.Line();
      auto kernel = w.Block(CudaSignature(k.name + (p == 0 ? "_partial" : absl::StrCat("_partial", p)), params));
      if (p > 0) CudaWaitForPriorGrid(w);
      column_and_chunk();
      if (lanes == 1) {
        auto row = w.Block("if (r < ", rows, ")");
        column_totals(p);
        declare(p, p + 1);
        column_chunk(p);
        auto store = w.Block();
        partial_slots(absl::StrCat("[part * ", rows, " + r]"), /*load=*/false, p, p + 1);
        continue;
      }
      for (size_t c = 0; c < all.size(); ++c) {
        if (all[c].pass != p) continue;
        w.Line("__shared__ ", ComputeCType(all[c].acc->dtype), " fb_lanes", c, "[", lanes - 1, "][", block_columns, "];");
      }
      column_totals_of_lanes(p);
      declare(p, p + 1);
      {
        auto row = w.Block("if (r < ", rows, ")");
        column_chunk(p);
      }
      // Lanes past the first hand over their folds; the first combines them
      // and stores the chunk's partial.
      {
        auto hand = w.Block("if (r < ", rows, " && fb_lane > 0)");
        partial_slots("[fb_lane - 1][fb_col]", /*load=*/false, p, p + 1, "fb_lanes");
      }
      w.Line("__syncthreads();");
      auto first = w.Block("if (r < ", rows, " && fb_lane == 0)");
      {
        auto others = w.Block("for (int l = 0; l < ", lanes - 1, "; ++l)");
        partial_slots("[l][fb_col]", /*load=*/true, p, p + 1, "fb_lanes");
      }
      partial_slots(absl::StrCat("[part * ", rows, " + r]"), /*load=*/false, p, p + 1);
    }
  } else {
    auto kernel = w.Block(CudaSignature(k.name + "_partial", params));
    w.Line("const long long r = blockIdx.x / ", split, ", part = blockIdx.x % ", split, ";");
    w.Line("const ", idx, " begin = part * ", chunk, ", end = begin + ", chunk, " < ", length, " ? begin + ", chunk, " : ",
           length, ";");
    auto row = w.Block();
    declare(0, 1);
    {
      auto loop = w.Block("for (long long j = begin + threadIdx.x; j < end; j += ", kCudaBlockSize, ")");
      element(0);
    }
    combine();
    auto store = w.Block("if (threadIdx.x == 0)");
    partial_slots("[blockIdx.x]", /*load=*/false, 0, 1);
  }
  // The combine is launched as a programmatic dependent of the partial
  // kernel (Driver::Launch, LaunchDims::programmatic): its blocks may start
  // before the partial kernel ends and wait here for its results.
  w.Line();
  auto kernel = w.Block(CudaSignature(k.name, params));
  CudaWaitForPriorGrid(w);
  if (multi) {
    column_and_chunk();
    if (lanes > 1) column_totals_of_lanes(k.passes.size());
    auto row = w.Block("if (r < ", rows, ")");
    if (lanes == 1) column_totals(k.passes.size());
    if (!k.elementwise.empty()) {
      auto stores = w.Block();
      column_chunk(k.passes.size());
    }
    // The per-column stores: the first chunk's threads (its first lane's).
    if (!k.row_body.empty()) {
      auto first = w.Block(lanes == 1 ? "if (part == 0)" : "if (part == 0 && fb_lane == 0)");
      CPrinter::Statements(w, k, k.row_body, op_template);
    }
  } else {
    if (columns) {
      w.Line("const ", idx, " r = (", idx, ")blockIdx.x * ", kCudaBlockSize, " + threadIdx.x;");
    } else {
      w.Line("const long long r = blockIdx.x;");
    }
    auto row = w.Block(columns ? absl::StrCat("if (r < ", rows, ")") : "");
    if (columns) {
      column_totals(1);
    } else {
      declare(0, 1);
      auto parts = w.Block("for (int p = threadIdx.x; p < ", split, "; p += ", kCudaBlockSize, ")");
      partial_slots(absl::StrCat("[r * ", split, " + p]"), /*load=*/true, 0, 1);
    }
    combine();
    hooks.open_row_stores(w);
    CPrinter::Statements(w, k, k.row_body, op_template);
    w.Close();  // OpenRowStores' scope
  }
  kernel.End();
  return std::move(w).Release();
}

}  // namespace fusebox::backend
