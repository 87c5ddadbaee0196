#include "backend/cuda/cuda_cluster.h"


#include "absl/strings/str_cat.h"
#include "backend/c_printer.h"
#include "backend/code_writer.h"
#include "backend/cuda/cuda_printer.h"

namespace fusebox::backend {
namespace {

constexpr int kClusterThreads = 512;
constexpr int kLoopedClusterThreads = 1024;  // looped shares: the most loads in flight
// 32-bit registers of row values per thread: the layout aims for at most
// kTargetWords (the persistent kernels' 16 per input), and takes up to
// kMaxWords with the largest cluster rather than loop.
constexpr int kTargetWords = 16;
constexpr int kMaxWords = 32;

// Helpers of cluster kernels, after the common prelude. The barrier is split:
// arrive (release) and wait (acquire) over every thread of the cluster.
constexpr char kClusterPrelude[] = R"(FB_INLINE void fb_cluster_arrive() { asm volatile("barrier.cluster.arrive;" ::: "memory"); }
FB_INLINE void fb_cluster_wait() { asm volatile("barrier.cluster.wait;" ::: "memory"); }
// The address of shared variable `p` in the cluster's block `rank`.
template <typename T>
FB_INLINE const T* fb_cluster_map(const T* p, unsigned rank) {
  unsigned long long remote;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(remote) : "l"((unsigned long long)p), "r"(rank));
  return (const T*)remote;
}
// Combines one value per thread across the C blocks of the cluster; every
// thread of every block gets the same result (blocks combined in rank order).
// `slot`: this reduction's own shared variable, read by the other blocks
// until they pass the kernel's final barrier.
template <int C, typename T, typename F>
FB_INLINE T fb_cluster_reduce(T v, F combine, T identity, T* slot) {
  v = fb_block_reduce(v, combine, identity);
  if (threadIdx.x == 0) *slot = v;
  fb_cluster_arrive();
  fb_cluster_wait();
  T total = *fb_cluster_map(slot, 0);
#pragma unroll
  for (int c = 1; c < C; ++c) total = combine(total, *fb_cluster_map(slot, c));
  return total;
}
)";

std::string Temp(int t) { return absl::StrCat("t", t); }

// Block b of a row's cluster holds row elements [b * span, (b + 1) * span),
// span = slots * threads; thread t of it elements t, t + threads, ...
class ClusterPrinter : public CPrinter {
 public:
  ClusterPrinter(const ClusterLayout& cluster, const TuningSnapshot& tuning) : c_(cluster), tuning_(tuning) {}

 protected:
  std::string Prelude() const override { return absl::StrCat(CudaPrelude(tuning_), kClusterPrelude); }
  std::string IndexCheckPrelude() const override { return CudaIndexCheckPrelude(); }
  const char* OpTemplate(graph::Op op) const override { return graph::Info(op).cuda_expr; }

  void OpenRow(CodeWriter& w, const Kernel& k) const override {
    const ClusterLayout& c = c_;
    const char* idx = k.index64 ? "long long" : "int";
    const int64_t span = Span(k);
    w.Line("// each row over a cluster of ", c.blocks, " blocks of ", c.threads, " threads, ",
           c.slots > 0 ? absl::StrCat(c.slots, " elements per thread and cached load")
                       : absl::StrCat("each block looping over its ", span, " elements"));
    w.Open("extern \"C\" __global__ void __cluster_dims__(", c.blocks, ", 1, 1) __launch_bounds__(", c.threads, ") ", k.name,
           "(", ParamList(k, /*restrict_qualified=*/true), ")");
    w.Line("const ", idx, " r = blockIdx.x / ", c.blocks, ";");
    w.Line("const ", idx, " fb_begin = (", idx, ")(blockIdx.x % ", c.blocks, ") * ", span, ";");
    if (c.slots == 0) {
      w.Line("const ", idx, " fb_end = fb_begin + ", span, " < ", k.row_length, " ? fb_begin + ", span, " : ", k.row_length,
             ";");
    }
    for (const Pass& pass : k.passes) {
      for (const Accumulator& a : pass.accumulators) w.Line("__shared__ ", ComputeCType(a.dtype), " fb_slot_", Temp(a.temp), ";");
    }
    w.Open();
  }
  // Every block waits at the end until the whole cluster has read its slots.
  void CloseRow(CodeWriter& w) const override {
    w.Close();
    w.Line("fb_cluster_wait();");
    w.Close();
  }

  bool ReadsCachedLoads(const Kernel&) const override { return c_.slots > 0; }
  void Preload(CodeWriter& w, const Kernel& k) const override {
    if (c_.slots == 0) return;
    for (size_t c = 0; c < k.cached_loads.size(); ++c) w.Line(ComputeCType(k.cached_loads[c].dtype), " c", c, "[", c_.slots, "];");
    RowLoop(w, k, [&] {
      auto guarded = w.Indented();  // RowLoop's body is a level short of its guard
      for (size_t c = 0; c < k.cached_loads.size(); ++c) PreloadSlot(w, k, c);
    });
  }
  // Two scopes, closed on one line (`}}`): the loop and its guard. The
  // passes' lines are printed at the loop's depth, a level short of the
  // guard's, as the kernel snapshot holds them.
  void RowLoop(CodeWriter& w, const Kernel& k, const std::function<void()>& body) const override {
    const char* idx = k.index64 ? "long long" : "int";
    if (c_.slots == 0) {
      w.Directive("#pragma unroll 4");
      w.Open("for (", idx, " j = fb_begin + threadIdx.x; j < fb_end; j += ", c_.threads, ")");
      w.Open();
    } else {
      w.Directive("#pragma unroll");
      w.Open("for (int k = 0; k < ", c_.slots, "; ++k)");
      w.Line("const ", idx, " j = fb_begin + threadIdx.x + k * ", c_.threads, ";");
      w.Open("if (j < ", k.row_length, k.index64 ? "LL" : "", ")");
    }
    {
      auto at_loop_depth = w.Indented(-1);
      body();
    }
    w.Close(2);
  }

  void AfterPass(CodeWriter& w, const Kernel& k, const Accumulator& a, const std::string& lambda) const override {
    w.Line(Temp(a.temp), " = fb_cluster_reduce<", c_.blocks, ">(", Temp(a.temp), ", ", lambda, ", ", IdentityLiteral(a),
           ", &fb_slot_", Temp(a.temp), ");");
    // After the last read of other blocks' slots: the kernel's final barrier
    // opens here and closes at its end, past the stores.
    if (&a == &k.passes.back().accumulators.back()) w.Line("fb_cluster_arrive();");
  }
  // Per-row values are stored by the row's first block.
  void OpenRowStores(CodeWriter& w, const Kernel& k) const override {
    w.Open("if (blockIdx.x % ", c_.blocks, " == 0 && threadIdx.x == 0)");
  }

 private:
  // Row elements each block of the cluster covers (the last block's may run
  // past the row's end).
  int64_t Span(const Kernel& k) const {
    return c_.slots > 0 ? int64_t{c_.slots} * c_.threads : (k.row_length + c_.blocks - 1) / c_.blocks;
  }
  const ClusterLayout& c_;
  const TuningSnapshot& tuning_;
};

}  // namespace

ClusterLayout CudaClusterLayout(const Kernel& k, const CudaRowSpread& spread, int arch) {
  // Cached loads are recorded only for rows ending in the innermost dim.
  if (arch < kCudaMinClusterArch || k.kind != fusion::KernelKind::kReduction || spread.strategy != RowStrategy::kBlockPerRow ||
      spread.split > 1 || k.dynamic_extent || k.cached_loads.empty() || k.passes.empty()) {
    return {};
  }
  for (const Pass& pass : k.passes) {
    for (const Accumulator& a : pass.accumulators) {
      if (a.index_temp >= 0) return {};  // argmax/argmin keep their (value, index) combine
    }
  }
  int words = 0;  // registers per row element, over all cached loads
  for (const CachedLoad& c : k.cached_loads) words += DTypeSize(ComputeDType(c.dtype)) > 4 ? 2 : 1;
  auto slots = [&](int blocks) { return (k.row_length + int64_t{blocks} * kClusterThreads - 1) / (int64_t{blocks} * kClusterThreads); };
  for (int blocks = 2; blocks <= kCudaMaxClusterBlocks; ++blocks) {
    if (slots(blocks) * words <= kTargetWords) return {blocks, kClusterThreads, static_cast<int>(slots(blocks))};
  }
  if (slots(kCudaMaxClusterBlocks) * words <= kMaxWords) {
    return {kCudaMaxClusterBlocks, kClusterThreads, static_cast<int>(slots(kCudaMaxClusterBlocks))};
  }
  // Too long to hold, and too few rows for a block per SM: each block of a
  // cluster loops over its share of the row (slots 0), so every SM works.
  if (k.num_rows < CudaSmCount(k)) return {kCudaMaxClusterBlocks, kLoopedClusterThreads, 0};
  return {};
}

const char* CudaClusterPrelude() { return kClusterPrelude; }

std::string PrintCudaCluster(const Kernel& kernel, const ClusterLayout& cluster, const TuningSnapshot& tuning) {
  return ClusterPrinter(cluster, tuning).Print(kernel);
}

}  // namespace fusebox::backend
