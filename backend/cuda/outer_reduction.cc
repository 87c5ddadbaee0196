#include "backend/cuda/outer_reduction.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "backend/c_printer.h"
#include "backend/code_writer.h"
#include "backend/cuda/cuda_cluster.h"
#include "backend/cuda/cuda_printer.h"

namespace fusebox::backend {
namespace {

// Row values held per thread, in 32-bit registers over all held loads: the
// layout adds lanes until a thread holds at most kTargetWords, and holds up
// to Knob::kOuterHeldWords, 32 (of the 64 registers a 1024-thread block leaves each thread;
// 33 spilled) rather than reload every pass.
constexpr int kTargetWords = 16;
// Enough blocks to fill the device: this many per SM before the cluster grows.
constexpr int kBlocksPerSm = 2;
// Each thread keeps at least this many elements of its column when the
// cluster grows to fill the device.
constexpr int kMinElementsPerThread = 4;

// The per-pass combine over a block's lanes (a tree in shared memory), then
// over the cluster's blocks through distributed shared memory.
constexpr char kOuterPrelude[] = R"(// Combines one value per thread over the lanes of its column (thread t:
// warp w = t / 32 of column group w / WG, column t % CW of the group's CW,
// lane t % 32 / CW of 32 / CW in the warp): shuffles inside the warp, then
// (WG > 1) the group's WG warp partials from shared memory `part`, then
// (C > 1) the C blocks of the cluster (in rank order) through `slot`, which
// the other blocks read until they pass the kernel's final barrier. Every
// thread gets its column's total; ops are commutative, so every lane of a
// butterfly computes the same value.
template <int CW, int WG, int C, typename T, typename F>
FB_INLINE T fb_outer_reduce(T v, F combine, T* part, T* slot) {
#pragma unroll
  for (int o = CW; o < 32; o <<= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int w = threadIdx.x / 32, col = threadIdx.x % CW;
  if constexpr (WG > 1) {
    if (threadIdx.x % 32 < CW) part[w * CW + col] = v;
    __syncthreads();
    const int first = w / WG * WG;
    v = part[first * CW + col];
#pragma unroll
    for (int i = 1; i < WG; ++i) v = combine(v, part[(first + i) * CW + col]);
  }
  if constexpr (C > 1) {
    const int s = w / WG * CW + col;
    if (w % WG == 0 && threadIdx.x % 32 < CW) slot[s] = v;
    fb_cluster_arrive();
    fb_cluster_wait();
    v = *fb_cluster_map(slot + s, 0);
#pragma unroll
    for (unsigned c = 1; c < C; ++c) v = combine(v, *fb_cluster_map(slot + s, c));
  }
  return v;
}
)";

std::string Temp(int t) { return absl::StrCat("t", t); }

bool Eligible(const Kernel& k, const CudaRowSpread& spread) {
  if (spread.strategy != RowStrategy::kThreadPerRow || spread.split > 1 || spread.column_tiles) return false;
  if (k.passes.size() < 2 && k.elementwise.empty()) return false;  // single-pass sums: column_tiles.h
  for (const Pass& pass : k.passes) {
    for (const Accumulator& a : pass.accumulators) {
      if (a.index_temp >= 0) return false;
    }
  }
  return true;
}

// Cached loads worth holding: those that move along the reduced dim (a
// value per column comes from L1 either way) and that more than one loop over
// the column reads (layer_norm's weights, read by the last loop only, stay
// loads).
absl::flat_hash_set<int> HeldSlots(const Kernel& k) {
  absl::flat_hash_map<int, int> loops;  // slot -> loops reading it
  for (size_t loop = 0; loop < k.NumRowLoops(); ++loop) {
    absl::flat_hash_set<int> here;
    for (const Stmt& s : k.RowLoop(loop)) {
      if (s.kind == StmtKind::kLoad && s.cache_slot >= 0 && here.insert(s.cache_slot).second) ++loops[s.cache_slot];
    }
  }
  absl::flat_hash_set<int> held;
  for (size_t c = 0; c < k.cached_loads.size(); ++c) {
    auto it = loops.find(static_cast<int>(c));
    if (k.cached_loads[c].index.DependsOn("j") && it != loops.end() && it->second > 1) held.insert(static_cast<int>(c));
  }
  return held;
}

class OuterPrinter : public CPrinter {
 public:
  OuterPrinter(const CudaOuterLayout& layout, const absl::flat_hash_set<int>& held, const TuningSnapshot& tuning)
      : l_(layout), held_(held), tuning_(tuning) {}

 protected:
  std::string Prelude() const override { return absl::StrCat(CudaPrelude(tuning_), CudaClusterPrelude(), kOuterPrelude); }
  const char* OpTemplate(graph::Op op) const override { return graph::Info(op).cuda_expr; }
  std::string IndexCheckPrelude() const override {
    return CudaIndexCheckPrelude();
  }

  void OpenRow(CodeWriter& w, const Kernel& k) const override {
    const char* idx = k.index64 ? "long long" : "int";
    const std::string extent = k.dynamic_extent ? "fb_n" : absl::StrCat(k.num_rows, k.index64 ? "LL" : "");
    const std::string tile = l_.blocks > 1 ? absl::StrCat("blockIdx.x / ", l_.blocks) : "blockIdx.x";
    w.Line("// warps of ", l_.columns, " columns x ", l_.lanes_per_warp(), " lanes, ", l_.warps, " warps per column, ",
           l_.groups, " column groups per block",
           l_.blocks > 1 ? absl::StrCat(", a cluster of ", l_.blocks, " blocks per tile") : "",
           l_.slots > 0 ? absl::StrCat(", ", l_.slots, " elements per thread held in registers")
                        : ", each pass reloading its elements",
           " (outer_reduction.h)");
    w.Open("extern \"C\" __global__ void ", l_.blocks > 1 ? absl::StrCat("__cluster_dims__(", l_.blocks, ", 1, 1) ") : "",
           "__launch_bounds__(", l_.threads(), ") ", k.name, "(", ParamList(k, /*restrict_qualified=*/true),
           k.dynamic_extent ? ", long long fb_n" : "", SizeParams(k), ")");
    w.Line("const int fb_w = threadIdx.x / 32, fb_t = threadIdx.x % 32;");
    w.Line("const ", idx, " r = (", idx, ")(", tile, ") * ", l_.block_columns(), " + fb_w / ", l_.warps, " * ", l_.columns,
           " + fb_t % ", l_.columns, ";");
    w.Line("const int fb_lane = ", l_.blocks > 1 ? absl::StrCat("(int)(blockIdx.x % ", l_.blocks, ") * ", l_.lanes(), " + ") : "",
           "fb_w % ", l_.warps, " * ", l_.lanes_per_warp(), " + fb_t / ", l_.columns, ";");
    w.Line("const bool fb_live = r < ", extent, ";");
    for (const Pass& pass : k.passes) {
      for (const Accumulator& a : pass.accumulators) {
        const char* type = ComputeCType(a.dtype);
        if (l_.warps > 1) w.Line("__shared__ ", type, " fb_part_", Temp(a.temp), "[", l_.threads() / 32 * l_.columns, "];");
        if (l_.blocks > 1) w.Line("__shared__ ", type, " fb_slot_", Temp(a.temp), "[", l_.block_columns(), "];");
      }
    }
    w.Open();
  }
  // With a cluster, every block waits at the end until the whole cluster has
  // read its partials.
  void CloseRow(CodeWriter& w) const override {
    w.Close();
    if (l_.blocks > 1) w.Line("fb_cluster_wait();");
    w.Close();
  }

  bool ReadsCachedLoads(const Kernel&) const override { return l_.slots > 0; }
  void Preload(CodeWriter& w, const Kernel& k) const override {
    if (l_.slots == 0) return;
    for (size_t c = 0; c < k.cached_loads.size(); ++c) {
      if (held_.contains(static_cast<int>(c))) w.Line(ComputeCType(k.cached_loads[c].dtype), " c", c, "[", l_.slots, "];");
    }
    RowLoop(w, k, [&] {
      auto guarded = w.Indented();  // RowLoop's body is a level short of its check
      for (size_t c = 0; c < k.cached_loads.size(); ++c) {
        if (held_.contains(static_cast<int>(c))) PreloadSlot(w, k, c);
      }
    });
  }
  // Two scopes: the loop over the thread's elements and its bound check,
  // closed together (`}}`). The passes' lines are printed at the loop's
  // depth, a level short of the check's, as the kernel snapshot holds them.
  void RowLoop(CodeWriter& w, const Kernel& k, const std::function<void()>& body) const override {
    const char* idx = k.index64 ? "long long" : "int";
    const std::string length = absl::StrCat(k.row_length, k.index64 ? "LL" : "");
    const int64_t all_lanes = int64_t{l_.lanes()} * l_.blocks;
    if (l_.slots > 0) {
      w.Directive("#pragma unroll");
      w.Open("for (int k = 0; k < ", l_.slots, "; ++k)");
      w.Line("const ", idx, " j = fb_lane + k * ", all_lanes, ";");
      w.Open("if (fb_live && j < ", length, ")");
    } else {
      w.Directive("#pragma unroll 4");
      w.Open("for (", idx, " j = fb_lane; j < ", length, "; j += ", all_lanes, ")");
      w.Open("if (fb_live)");
    }
    {
      auto at_loop_depth = w.Indented(-1);
      body();
    }
    w.Close(2);
  }

  void AfterPass(CodeWriter& w, const Kernel& k, const Accumulator& a, const std::string& lambda) const override {
    const std::string t = Temp(a.temp), none = absl::StrCat("(", ComputeCType(a.dtype), "*)nullptr");
    w.Line(t, " = fb_outer_reduce<", l_.columns, ", ", l_.warps, ", ", l_.blocks, ">(", t, ", ", lambda, ", ",
           l_.warps > 1 ? "fb_part_" + t : none, ", ", l_.blocks > 1 ? "fb_slot_" + t : none, ");");
    // After the last read of other blocks' partials: the kernel's final
    // barrier opens here and closes at its end, past the stores.
    if (l_.blocks > 1 && &a == &k.passes.back().accumulators.back()) w.Line("fb_cluster_arrive();");
  }
  // Per-column values are stored by the column's first lane.
  void OpenRowStores(CodeWriter& w, const Kernel&) const override { w.Open("if (fb_live && fb_lane == 0)"); }

 private:
  const CudaOuterLayout& l_;
  const absl::flat_hash_set<int>& held_;
  const TuningSnapshot& tuning_;
};

}  // namespace

std::optional<CudaOuterLayout> ChooseCudaOuterLayout(const Kernel& k, const CudaRowSpread& spread,
                                                     const TuningSnapshot& tuning) {
  if (!Eligible(k, spread)) return std::nullopt;
  const int arch = k.cuda_arch == 0 ? 90 : k.cuda_arch;
  const int sms = CudaSmCount(k);
  int element = 1;
  for (const BufferParam& b : k.buffers) element = std::max(element, DTypeSize(b.dtype));
  const int max_blocks = arch >= kCudaMinClusterArch && !k.dynamic_extent ? kCudaMaxClusterBlocks : 1;
  int words = 0;  // registers per element of the column, over the held loads
  for (int c : HeldSlots(k)) words += DTypeSize(ComputeDType(k.cached_loads[c].dtype)) > 4 ? 2 : 1;
  const int max_threads = tuning.GetInt(Knob::kOuterThreads), min_threads = tuning.GetInt(Knob::kOuterMinThreads);
  const int64_t length = k.row_length;
  auto slots = [&](int64_t lanes) { return (length + lanes - 1) / lanes; };
  // A warp row covers Knob::kOuterWarpColumns columns (16), at least a 32-byte
  // sector: the scalar loads of odd strides are bound by the load/store
  // unit's queue (ncu: lg_throttle the top stall), so fewer rows per warp
  // access is faster, up to 64 bytes of f32. Where the column does not fit
  // the lanes of that width, half as many columns (twice the lanes) may hold
  // it: reading HBM once beats whole sectors.
  const int sector = std::clamp(std::max(tuning.GetInt(Knob::kOuterWarpColumns), 32 / element), 4, 32);
  CudaOuterLayout l;
  l.columns = sector;
  bool held = false;
  for (int columns = sector; columns >= sector / 2 && words > 0; columns /= 2) {
    if (slots(int64_t{max_threads / columns} * max_blocks) * words <= tuning.GetInt(Knob::kOuterHeldWords)) {
      l.columns = columns;
      held = true;
      break;
    }
  }
  const int block_lanes = max_threads / l.columns;  // a 1024-thread block on one column group
  // All lanes of a column: the fewest whose held values fit the target (a
  // warp's at least); reloaded columns take a block per column group, and
  // the cluster below grows to fill the device.
  int64_t lanes = block_lanes;
  if (held) {
    lanes = l.lanes_per_warp();
    while (lanes < int64_t{block_lanes} * max_blocks && slots(lanes) * words > kTargetWords) lanes *= 2;
  }
  l.warps = static_cast<int>(std::min<int64_t>(lanes, block_lanes) / l.lanes_per_warp());
  l.blocks = static_cast<int>(lanes / l.lanes());
  // At least Knob::kOuterMinThreads per block: more column groups side by side, while
  // the tiles still fill the device.
  auto tiles = [&](int groups) { return (k.num_rows + int64_t{l.columns} * groups - 1) / (int64_t{l.columns} * groups); };
  const int64_t fill = int64_t{kBlocksPerSm} * sms;
  while (l.threads() < min_threads && tiles(l.groups * 2) * l.blocks >= fill) l.groups *= 2;
  // Too few tiles to fill the device: the cluster grows while each thread
  // keeps a few elements.
  while (l.blocks < max_blocks && tiles(l.groups) * l.blocks < fill &&
         length >= int64_t{2} * l.lanes() * l.blocks * kMinElementsPerThread) {
    l.blocks *= 2;
  }
  l.slots = held ? static_cast<int>(slots(int64_t{l.lanes()} * l.blocks)) : 0;
  return l;
}

std::string PrintCudaOuter(const Kernel& kernel, const CudaOuterLayout& layout, const TuningSnapshot& tuning) {
  // Only loads that move along the reduced dim read held values; the rest
  // stay loads.
  const absl::flat_hash_set<int> held = layout.slots > 0 ? HeldSlots(kernel) : absl::flat_hash_set<int>();
  Kernel k = kernel;
  for (size_t loop = 0; loop < k.NumRowLoops(); ++loop) {
    for (Stmt& s : k.RowLoop(loop)) {
      if (s.kind == StmtKind::kLoad && !held.contains(s.cache_slot)) s.cache_slot = -1;
    }
  }
  return OuterPrinter(layout, held, tuning).Print(k);
}

}  // namespace fusebox::backend
