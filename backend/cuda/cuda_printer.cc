#include "backend/cuda/cuda_printer.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "backend/c_printer.h"
#include "backend/cuda/cache_hints.h"
#include "backend/cuda/column_tiles.h"
#include "backend/cuda/cuda_cluster.h"
#include "backend/cuda/cuda_schedule.h"
#include "backend/kernel_passes.h"
#include "backend/cuda/outer_reduction.h"
#include "backend/cuda/row_printer.h"
#include "backend/cuda/split_printer.h"
#include "tensor/error.h"

namespace fusebox::backend {

void CudaWaitForPriorGrid(CodeWriter& w) {
  w.Directive("#if __CUDA_ARCH__ >= 900");
  w.Line("asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");");
  w.Directive("#endif");
}

std::string CudaSignature(const std::string& name, const std::string& params) {
  return absl::StrCat("extern \"C\" __global__ void __launch_bounds__(", kCudaBlockSize, ") ", name, "(", params, ")");
}

namespace {

// Per buffer, how a pointwise kernel whose V-element runs line up in every
// buffer reaches it: every store at `i` itself, every load at `i` too or at
// an aligned run of it (a broadcast bias, IsAlignedRunOf), or at one index
// over each run (`uniform`: a [1] weight, a value per row whose length V
// divides; IsUniformOverAlignedRunOf), one index per buffer. Null for any
// other kernel.
struct VectorAccess {
  std::string index;  // empty: the buffer is not accessed
  bool uniform = false;
};
std::optional<std::vector<VectorAccess>> VectorIndices(const Kernel& k, int v) {
  std::vector<VectorAccess> access(k.buffers.size());
  for (const Stmt& s : k.body) {
    // Indices differ per lane; a position (iota) is printed over `i`, which
    // the vector path does not define per lane.
    if (s.is_data_dependent() || s.kind == StmtKind::kPosition) return std::nullopt;
    if (s.kind != StmtKind::kLoad && s.kind != StmtKind::kStore) continue;
    const std::string index = s.index.ToString();
    bool uniform = false;
    if (s.kind == StmtKind::kStore) {
      if (index != "i") return std::nullopt;
    } else if (!s.index.IsAlignedRunOf("i", v)) {
      if (!s.index.IsUniformOverAlignedRunOf("i", v)) return std::nullopt;
      uniform = true;
    }
    VectorAccess& seen = access[static_cast<size_t>(s.buffer)];
    if (!seen.index.empty() && seen.index != index) return std::nullopt;
    seen = {index, uniform};
  }
  return access;
}

// float max/min that propagate NaN as fb_max/fb_min do, in one instruction
// on sm_80+. The common prelude's compare-and-select takes three, and in the
// softmax over 65536 their registers kept the kernel from fitting the 64 a
// 1024-thread block allows.
constexpr char kNanPropagatingMinMax[] = R"(#if __CUDA_ARCH__ >= 800
FB_INLINE float fb_max(float a, float b) { float r; asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }
FB_INLINE float fb_min(float a, float b) { float r; asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }
#endif
)";

class CudaPrinter : public CPrinter {
  friend std::string fusebox::backend::CudaPrelude(const TuningSnapshot& tuning);

 public:
  // `spread`: the kernel's schedule's (pointwise kernels and the prelude: {}).
  explicit CudaPrinter(const TuningSnapshot& tuning, const CudaRowSpread& spread = {}) : tuning_(tuning), spread_(spread) {}

 protected:
  std::string Prelude() const override {
    return absl::StrCat(R"(#define FB_INLINE __device__ __forceinline__
FB_INLINE float fb_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
FB_INLINE unsigned short fb_f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
FB_INLINE float fb_bf2f(unsigned short b) { return __uint_as_float(((unsigned int)b) << 16); }
FB_INLINE unsigned short fb_f2bf(float f) { unsigned short b; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f)); return b; }
FB_INLINE float fb_inf() { return __int_as_float(0x7f800000); }
FB_INLINE float fb_nan() { return __int_as_float(0x7fc00000); }
FB_INLINE float fb_fabs(float x) { return fabsf(x); }
FB_INLINE float fb_powf(float a, float b) { return powf(a, b); }
FB_INLINE float fb_sqrtf(float x) { return sqrtf(x); }
FB_INLINE float fb_logf(float x) { return logf(x); }
FB_INLINE float fb_cosf(float x) { return cosf(x); }
// 1 / (1 + e^-x) in 4 instructions (expf and an IEEE division take ~14):
// e^-x as ex2.approx of x * -log2(e), as Triton's exp, then rcp.approx.
// Relative error under 1e-6 for |x| <= 16, growing as |x| * 5e-8 beyond
// (the rounding of x * log2(e)); results under 2^-126 flush to 0.
FB_INLINE float fb_sigmoid(float x) {
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x * -1.44269504f));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.0f + e));
  return r;
}
// Combines one value per lane across each aligned run of L lanes (L a power
// of two up to 32: a row of L lanes, 32 / L rows per warp); every lane of a
// run gets its run's result. `mask` names the caller's run (all 32 lanes for
// L = 32): a run's lanes reach the call together or not at all, so the rows
// of a warp past the last row may skip it.
template <int L, typename T, typename F>
FB_INLINE T fb_lanes_reduce(T v, F combine, unsigned mask) {
  for (int o = L / 2; o > 0; o >>= 1) v = combine(v, __shfl_xor_sync(mask, v, o));
  return v;
}
// Combines one value per lane across the warp; every lane gets the result.
template <typename T, typename F>
FB_INLINE T fb_warp_reduce(T v, F combine, T) { return fb_lanes_reduce<32>(v, combine, 0xffffffffu); }
// argmax/argmin: combines (value, index) pairs across L lanes / the warp / the block.
template <int L, typename T, typename F>
FB_INLINE void fb_lanes_argreduce(T& v, long long& i, F better, unsigned mask) {
  for (int o = L / 2; o > 0; o >>= 1) {
    const T ov = __shfl_xor_sync(mask, v, o);
    const long long oi = __shfl_xor_sync(mask, i, o);
    if (better(ov, oi, v, i)) { v = ov; i = oi; }
  }
}
template <typename T, typename F>
FB_INLINE void fb_warp_argreduce(T& v, long long& i, F better, T) { fb_lanes_argreduce<32>(v, i, better, 0xffffffffu); }
template <typename T, typename F>
FB_INLINE void fb_block_argreduce(T& v, long long& i, F better, T identity) {
  __shared__ T values[32];
  __shared__ long long indices[32];
  fb_warp_argreduce(v, i, better, identity);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) { values[warp] = v; indices[warp] = i; }
  __syncthreads();
  const bool live = lane < (int)(blockDim.x >> 5);
  v = live ? values[lane] : identity;
  i = live ? indices[lane] : 9223372036854775807LL;
  fb_warp_argreduce(v, i, better, identity);
}
// Combines one value per thread across the block; every thread gets the result.
template <typename T, typename F>
FB_INLINE T fb_block_reduce(T v, F combine, T identity) {
  __shared__ T partials[32];
  for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the previous reduction may still be reading `partials`
  if (lane == 0) partials[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? partials[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
)",
                        CommonPrelude(), kNanPropagatingMinMax, CacheHintPrelude(tuning_));
  }

  // The iteration count: a literal, or the run-time argument `fb_n`.
  static std::string Extent(const Kernel& k) {
    if (k.dynamic_extent) return "fb_n";
    return absl::StrCat(k.is_reduction() ? k.num_rows : k.numel, k.index64 ? "LL" : "");
  }
  static std::string Params(const Kernel& k) {
    return absl::StrCat(ParamList(k, /*restrict_qualified=*/true), k.dynamic_extent ? ", long long fb_n" : "",
                        SizeParams(k));
  }

  // Reductions reach Print only as unsplit thread-per-row (column) kernels:
  // warp and block rows are printed by PrintRows, splits by PrintSplit.
  void OpenRow(CodeWriter& w, const Kernel& k) const override {
    FUSEBOX_CHECK(spread_.strategy == RowStrategy::kThreadPerRow, "kernel ", k.name, ": rows of a warp or block go to PrintRows");
    const char* idx = k.index64 ? "long long" : "int";
    w.Open(CudaSignature(k.name, Params(k)));
    w.Line("const ", idx, " r = (", idx, ")blockIdx.x * ", kCudaBlockSize, " + threadIdx.x;");
    w.Open("if (r < ", Extent(k), ")");
  }
  // Unrolled: several rows' loads in flight per thread.
  void RowLoop(CodeWriter& w, const Kernel& k, const std::function<void()>& body) const override {
    const char* idx = k.index64 ? "long long" : "int";
    w.Directive("#pragma unroll ", tuning_.GetInt(Knob::kColumnUnroll));
    auto loop = w.Block("for (", idx, " j = 0; j < ", k.row_length, k.index64 ? "LL" : "", "; ++j)");
    body();
  }
  void AfterPass(CodeWriter& w, const Kernel&, const Accumulator& a, const std::string& lambda) const override {
    AfterPass(w, a, lambda, 32);
  }
  // `lanes`: warp rows' lanes per row (CudaRowLayout::threads_per_row); under
  // 32, shuffles of that width among the row's lanes (`fb_mask`), none for 1.
  void AfterPass(CodeWriter& w, const Accumulator& a, const std::string& lambda, int lanes) const {
    if (spread_.strategy == RowStrategy::kWarpPerRow && lanes < 32) {
      if (lanes == 1) return;
      if (a.index_temp >= 0) {
        w.Line("fb_lanes_argreduce<", lanes, ">(t", a.temp, ", t", a.index_temp, ", ", lambda, ", fb_mask);");
      } else {
        w.Line("t", a.temp, " = fb_lanes_reduce<", lanes, ">(t", a.temp, ", ", lambda, ", fb_mask);");
      }
      return;
    }
    const char* fn = spread_.strategy == RowStrategy::kBlockPerRow ? "fb_block_reduce" : "fb_warp_reduce";
    if (spread_.strategy == RowStrategy::kThreadPerRow) return;
    if (a.index_temp >= 0) {
      w.Line(spread_.strategy == RowStrategy::kBlockPerRow ? "fb_block_argreduce" : "fb_warp_argreduce", "(t", a.temp, ", t",
             a.index_temp, ", ", lambda, ", ", CPrinter::IdentityLiteral(a), ");");
      return;
    }
    w.Line("t", a.temp, " = ", fn, "(t", a.temp, ", ", lambda, ", ", CPrinter::IdentityLiteral(a), ");");
  }
 public:
  // Rows along the innermost dims, a warp or a block each (row_printer.h).
  std::string PrintRows(const Kernel& k, const CudaRowLayout& layout) const {
    return PrintCudaRows(k, spread_, layout, RowHooks(k), tuning_);
  }
  // What the row and split printers take from this one: the prelude, the
  // per-pass combine and the per-row stores' scope.
  CudaRowHooks RowHooks(const Kernel& k) const {
    return {.prelude = KernelPrelude(k),
            .after_pass = [this](CodeWriter& w, const Accumulator& a, const std::string& lambda,
                                 int lanes) { AfterPass(w, a, lambda, lanes); },
            .open_row_stores = [this, &k](CodeWriter& w) { OpenRowStores(w, k); }};
  }

  // Split rows (CudaRowSpread::split > 1): split_printer.h.
  std::string PrintSplit(const Kernel& k) const {
    return PrintCudaSplit(k, spread_, RowHooks(k), tuning_);
  }

  // Other pointwise kernels: each thread takes `per_thread` elements one
  // block-width apart. A thread whose elements are all in bounds runs them
  // with no bound check between, so all its loads are in flight before the
  // first store (a `break` between them kept them one at a time); the grid's
  // last threads take the checked loop.
  std::string PrintPointwise(const Kernel& k, int per_thread) const {
    auto op_template = [](graph::Op op) { return graph::Info(op).cuda_expr; };
    const char* idx = k.index64 ? "long long" : "int";
    CodeWriter w;
    w.Raw(Prelude());
    if (k.checks_indices) w.Raw(IndexCheckPrelude());
    w.Line();
    w.Line("// ", k.name, ": ", k.dynamic_extent ? "fb_n (run-time)" : absl::StrCat(k.numel), " elements, ", per_thread,
           " per thread");
    auto kernel = w.Block(CudaSignature(k.name, Params(k)));
    w.Line("const ", idx, " base = (", idx, ")blockIdx.x * ", int64_t{kCudaBlockSize} * per_thread, " + threadIdx.x;");
    auto each = [&](bool checked) {
      w.Directive("#pragma unroll");
      auto loop = w.Block("for (int k = 0; k < ", per_thread, "; ++k)");
      w.Line("const ", idx, " i = base + k * ", kCudaBlockSize, ";");
      if (checked) w.Line("if (i >= ", Extent(k), ") break;");
      Statements(w, k, k.body, op_template);
    };
    auto path = w.Block("if (base + ", int64_t{kCudaBlockSize} * (per_thread - 1), " < ", Extent(k), ")");
    each(false);
    path.Else();
    each(true);
    path.End();
    kernel.End();
    return std::move(w).Release();
  }

  // Dense pointwise kernels (CudaVectorWidth > 1): each thread takes V
  // consecutive elements and moves each buffer's V elements as one 16-byte
  // access (ld.global.v4), when they are in bounds and every pointer is
  // 16-byte aligned; otherwise (the tail, an offset view) it falls back to
  // V scalar iterations. The body is printed once per path, over registers
  // `<buffer>_v[k]` in the vector path. A broadcast operand (a bias, read at
  // `i % n`) is read at its index of the first element, `base`.
  std::string PrintVectorized(const Kernel& k, int v) const {
    auto op_template = [](graph::Op op) { return graph::Info(op).cuda_expr; };
    const char* idx = k.index64 ? "long long" : "int";
    const std::vector<VectorAccess> access = *VectorIndices(k, v);  // CudaVectorWidth checked it
    std::string aligned;
    CodeWriter loads(2), stores(2);  // the aligned path's, before and after its body
    Kernel lanes = k;  // the body over register arrays, lane `k`
    for (size_t n = 0; n < lanes.buffers.size(); ++n) {
      BufferParam& b = lanes.buffers[n];
      const std::string type = StorageCType(b.dtype);
      const std::string& index = access[n].index;
      std::string first = "base";
      auto index_at_base = [&] {  // its index at i = base, in a scope of its own
        first = b.name + "_first";
        loads.Line(idx, " ", first, ";");
        auto scope = loads.Block();
        loads.Line("const ", idx, " i = base;");
        loads.Line(first, " = ", index, ";");
      };
      if (access[n].uniform) {  // one element for the whole run, read by other threads too
        index_at_base();
        loads.Line(type, " ", b.name, "_v[1];");
        loads.Line(b.name, "_v[0] = ", b.name, "[", first, "];");
        b.name += "_v";
        continue;
      }
      absl::StrAppend(&aligned, aligned.empty() ? "" : " | ", "(unsigned long long)", b.name);
      loads.Line(type, " ", b.name, "_v[", v, "];");
      if (!index.empty() && index != "i") index_at_base();
      // Every element is read or written once (StreamEverywhere).
      const std::string vec =
          absl::StrCat("reinterpret_cast<", b.is_output ? "" : "const ", "uint4*>(", b.name, " + ", first, ")");
      if (!b.is_output) {
        // A broadcast operand is read again by other threads: never streamed.
        const CacheHint hint = first == "base" ? StreamEverywhere(tuning_) : CacheHint::kNormal;
        loads.Line("*reinterpret_cast<uint4*>(", b.name, "_v) = ", HintedLoad(hint, vec), ";");
      } else {
        stores.Line(HintedStore(StreamEverywhere(tuning_), vec, absl::StrCat("*reinterpret_cast<const uint4*>(", b.name, "_v)")),
                    ";");
      }
      b.name += "_v";
    }
    for (Stmt& st : lanes.body) {
      if (st.is_access()) st.index = access[static_cast<size_t>(st.buffer)].uniform ? IndexExpr::Const(0) : IndexExpr::Var("k", v);
    }
    CodeWriter w;
    w.Raw(Prelude());
    w.Line();
    w.Line("// ", k.name, ": ", k.dynamic_extent ? "fb_n (run-time)" : absl::StrCat(k.numel), " elements, ", v,
           " per thread in 16-byte accesses");
    {
      auto kernel = w.Block(CudaSignature(k.name, Params(k)));
      w.Line("const ", idx, " base = ((", idx, ")blockIdx.x * ", kCudaBlockSize, " + threadIdx.x) * ", v, ";");
      auto path = w.Block("if (base + ", v, " <= ", Extent(k), " && ((", aligned, ") & 15) == 0)");
      w.Raw(loads.text());
      w.Directive("#pragma unroll");
      {
        auto each = w.Block("for (int k = 0; k < ", v, "; ++k)");
        Statements(w, lanes, lanes.body, op_template);
      }
      w.Raw(stores.text());
      path.Else();
      auto each = w.Block("for (int k = 0; k < ", v, "; ++k)");
      w.Line("const ", idx, " i = base + k;");
      w.Line("if (i >= ", Extent(k), ") break;");
      Statements(w, k, k.body, op_template);
    }
    return std::move(w).Release();
  }

 protected:
  void OpenRowStores(CodeWriter& w, const Kernel&) const override {
    switch (spread_.strategy) {
      case RowStrategy::kBlockPerRow: w.Open("if (threadIdx.x == 0)"); break;
      case RowStrategy::kWarpPerRow: w.Open("if ((threadIdx.x & 31) == 0)"); break;
      case RowStrategy::kThreadPerRow: w.Open(); break;
    }
  }

  const char* OpTemplate(graph::Op op) const override { return graph::Info(op).cuda_expr; }
  // The prelude of a kernel printed outside CPrinter::Print (rows, splits):
  // with the index-check helpers where it gathers.
  std::string KernelPrelude(const Kernel& k) const { return k.checks_indices ? Prelude() + IndexCheckPrelude() : Prelude(); }
  std::string IndexCheckPrelude() const override {
    return CudaIndexCheckPrelude();
  }

 private:
  const TuningSnapshot& tuning_;
  const CudaRowSpread spread_;
};

}  // namespace

std::string CudaPrelude(const TuningSnapshot& tuning) { return CudaPrinter(tuning).Prelude(); }

std::string CudaIndexCheckPrelude() {
  return CPrinter::IndexCheckHelpers("atomicExch((unsigned long long*)&err[0], 1ull) == 0ull");
}

int CudaVectorWidth(const Kernel& k) {
  if (k.is_reduction()) return 1;
  // 16 bytes of 4- or 2-byte elements; operands read once per run (uniform)
  // are scalars and may be of any type.
  for (const int v : {4, 8}) {
    const std::optional<std::vector<VectorAccess>> access = VectorIndices(k, v);
    if (!access) continue;
    bool fits = true;
    for (size_t n = 0; n < k.buffers.size(); ++n) {
      if (!(*access)[n].uniform && DTypeSize(k.buffers[n].dtype) != 16 / v) fits = false;
    }
    if (fits) return v;
  }
  return 1;
}

int CudaPointwiseElementsPerThread(const Kernel& k, const TuningSnapshot& tuning) {
  int narrowest = 8;
  for (const BufferParam& b : k.buffers) narrowest = std::min(narrowest, DTypeSize(b.dtype));
  return static_cast<int>(std::clamp<int64_t>(tuning.GetInt(Knob::kPointwiseThreadBytes) / narrowest, 4, 8));
}

std::string PrintCuda(const Kernel& lowered, const CudaSchedule& schedule, const TuningSnapshot& tuning) {
  // The CUDA passes that follow from the schedule (kernel_passes.h).
  const Kernel kernel = RunKernelPasses(lowered, CudaKernelPasses(), &schedule, tuning);
  // Split and cluster layouts never take dynamic kernels, so no run-time
  // sizes (Kernel::size_args) either.
  FUSEBOX_CHECK(kernel.size_args.empty() || (schedule.spread.split <= 1 && schedule.kind != CudaScheduleKind::kCluster),
                "kernel ", kernel.name, " divides by run-time sizes in a split or cluster layout");
  if (schedule.kind == CudaScheduleKind::kCluster) return PrintCudaCluster(kernel, schedule.cluster, tuning);
  const CudaPrinter printer(tuning, schedule.spread);
  if (schedule.spread.split > 1) return printer.PrintSplit(kernel);
  if (schedule.outer) return PrintCudaOuter(kernel, *schedule.outer, tuning);
  if (schedule.kind == CudaScheduleKind::kPointwiseVector) return printer.PrintVectorized(kernel, schedule.vector_width);
  if (schedule.row_printer()) return printer.PrintRows(kernel, *schedule.rows);
  if (schedule.kind == CudaScheduleKind::kPointwise) return printer.PrintPointwise(kernel, schedule.per_block / schedule.block);
  return printer.Print(kernel);
}

std::string PrintCuda(const Kernel& kernel, const TuningSnapshot& tuning) {
  return PrintCuda(kernel, ChooseCudaSchedule(kernel, tuning), tuning);
}

int CudaBlockSize(const Kernel& k, const CudaRowSpread& spread, const TuningSnapshot& tuning) {
  if (const std::optional<CudaOuterLayout> outer = ChooseCudaOuterLayout(k, spread, tuning)) return outer->threads();
  return UsesCudaRowLayout(k, spread) ? CudaRowBlockSize(k, spread, tuning) : kCudaBlockSize;
}

int CudaPartialBlockSize(const Kernel& k, const CudaRowSpread& spread, const TuningSnapshot& tuning) {
  return UsesCudaColumnTiles(spread) ? kCudaColumnTileBlock : CudaBlockSize(k, spread, tuning);
}

int64_t CudaCombineGridSize(const Kernel& k, const CudaRowSpread& spread) {
  if (spread.strategy != RowStrategy::kThreadPerRow) return k.num_rows;
  const int64_t tiles = CudaSplitColumnTiles(k, spread);
  // Per-element stores run over the partial kernels' chunks.
  return k.elementwise.empty() ? tiles : tiles * spread.split;
}

int64_t CudaColumnChunk(int64_t rows, int64_t split, const TuningSnapshot& tuning) {
  const int64_t chunk = (rows + split - 1) / split;
  const int64_t unroll = tuning.Get(Knob::kColumnUnroll);
  return (chunk + unroll - 1) / unroll * unroll;
}

int64_t CudaSplitChunk(const Kernel& k, const CudaRowSpread& spread, const TuningSnapshot& tuning) {
  if (UsesCudaColumnTiles(spread)) return int64_t{kCudaColumnTileRows} * CudaColumnTileStepsPerGroup(k);
  if (spread.strategy == RowStrategy::kThreadPerRow) return CudaColumnChunk(k.row_length, spread.split, tuning);
  return (k.row_length + spread.split - 1) / spread.split;
}

}  // namespace fusebox::backend
