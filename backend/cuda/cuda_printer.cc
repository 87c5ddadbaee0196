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
#include "tensor/error.h"

namespace fusebox::backend {
namespace {

// The top of a kernel launched as a programmatic dependent of the one before
// it (LaunchDims::programmatic): wait for that grid's results. A no-op when
// launched plainly; sm_90 and later only.
constexpr char kWaitForPriorGrid[] =
    "#if __CUDA_ARCH__ >= 900\n  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n#endif\n";

// Per buffer, the index its loads or stores use in a pointwise kernel whose
// V-element runs line up in every buffer: every store at `i` itself, every
// load at `i` too or at an aligned run of it (a broadcast bias,
// IsAlignedRunOf), one index per buffer. Null for any other kernel.
std::optional<std::vector<std::string>> VectorIndices(const Kernel& k, int v) {
  std::vector<std::string> index_of(k.buffers.size());
  for (const Stmt& s : k.body) {
    if (s.is_data_dependent()) return std::nullopt;  // indices differ per lane
    if (s.kind != StmtKind::kLoad && s.kind != StmtKind::kStore) continue;
    const std::string index = s.index.ToString();
    if (s.kind == StmtKind::kStore ? index != "i" : !s.index.IsAlignedRunOf("i", v)) return std::nullopt;
    std::string& seen = index_of[static_cast<size_t>(s.buffer)];
    if (!seen.empty() && seen != index) return std::nullopt;
    seen = index;
  }
  return index_of;
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
  explicit CudaPrinter(const TuningSnapshot& tuning) : tuning_(tuning) {}

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

  std::string Open(const Kernel& k) const override {
    const char* idx = k.index64 ? "long long" : "int";
    return absl::StrCat("extern \"C\" __global__ void __launch_bounds__(", kCudaBlockSize, ") ", k.name, "(",
                        Params(k), ") {\n", "  const ", idx, " base = (", idx,
                        ")blockIdx.x * ", kCudaElementsPerBlock, " + threadIdx.x;\n", "#pragma unroll\n",
                        "  for (int k = 0; k < ", kCudaElementsPerThread, "; ++k) {\n", "    const ", idx,
                        " i = base + k * ", kCudaBlockSize, ";\n", "    if (i >= ", Extent(k), ") break;\n");
  }

  std::string Close() const override { return "  }\n}\n"; }

  // The iteration count: a literal, or the run-time argument `fb_n`.
  static std::string Extent(const Kernel& k) {
    if (k.dynamic_extent) return "fb_n";
    return absl::StrCat(k.is_reduction() ? k.num_rows : k.numel, k.index64 ? "LL" : "");
  }
  static std::string Params(const Kernel& k) {
    return absl::StrCat(ParamList(k, /*restrict_qualified=*/true), k.dynamic_extent ? ", long long fb_n" : "");
  }

  // Reductions reach Print only as unsplit thread-per-row (column) kernels:
  // warp and block rows are printed by PrintRows, splits by PrintSplit.
  std::string OpenRow(const Kernel& k) const override {
    FUSEBOX_CHECK(k.strategy == RowStrategy::kThreadPerRow, "kernel ", k.name, ": rows of a warp or block go to PrintRows");
    const char* idx = k.index64 ? "long long" : "int";
    return absl::StrCat("extern \"C\" __global__ void __launch_bounds__(", kCudaBlockSize, ") ", k.name, "(",
                        Params(k), ") {\n", "  const ", idx, " r = (", idx, ")blockIdx.x * ", kCudaBlockSize,
                        " + threadIdx.x;\n", "  if (r < ", Extent(k), ") {\n");
  }
  std::string CloseRow() const override { return "  }\n}\n"; }
  // Unrolled: several rows' loads in flight per thread.
  std::string OpenRowLoop(const Kernel& k) const override {
    const char* idx = k.index64 ? "long long" : "int";
    return absl::StrCat("#pragma unroll ", tuning_.GetInt(Knob::kColumnUnroll), "\n    for (", idx, " j = 0; j < ", k.row_length,
                        k.index64 ? "LL" : "", "; ++j) {\n");
  }
  std::string AfterPass(const Kernel& k, const Accumulator& a, const std::string& lambda) const override {
    return AfterPass(k, a, lambda, 32);
  }
  // `lanes`: warp rows' lanes per row (CudaRowLayout::threads_per_row); under
  // 32, shuffles of that width among the row's lanes (`fb_mask`), none for 1.
  std::string AfterPass(const Kernel& k, const Accumulator& a, const std::string& lambda, int lanes) const {
    if (k.strategy == RowStrategy::kWarpPerRow && lanes < 32) {
      if (lanes == 1) return "";
      return a.index_temp >= 0
          ? absl::StrCat("    fb_lanes_argreduce<", lanes, ">(t", a.temp, ", t", a.index_temp, ", ", lambda, ", fb_mask);\n")
          : absl::StrCat("    t", a.temp, " = fb_lanes_reduce<", lanes, ">(t", a.temp, ", ", lambda, ", fb_mask);\n");
    }
    const char* fn = k.strategy == RowStrategy::kBlockPerRow ? "fb_block_reduce" : "fb_warp_reduce";
    if (k.strategy == RowStrategy::kThreadPerRow) return "";
    if (a.index_temp >= 0) {
      return absl::StrCat("    ", k.strategy == RowStrategy::kBlockPerRow ? "fb_block_argreduce" : "fb_warp_argreduce",
                          "(t", a.temp, ", t", a.index_temp, ", ", lambda, ", ", CPrinter::IdentityLiteral(a), ");\n");
    }
    return absl::StrCat("    t", a.temp, " = ", fn, "(t", a.temp, ", ", lambda, ", ", CPrinter::IdentityLiteral(a), ");\n");
  }
 public:
  // Rows along the innermost dims, a warp or a block each (row_printer.h).
  std::string PrintRows(const Kernel& k, const CudaRowLayout& layout) const {
    return PrintCudaRows(k, layout, {.prelude = KernelPrelude(k),
                             .after_pass = [&](const Accumulator& a, const std::string& lambda,
                                               int lanes) { return AfterPass(k, a, lambda, lanes); },
                             .open_row_stores = OpenRowStores(k)},
                         tuning_);
  }

  // Split rows (Kernel::split): a partial kernel folds each (row, chunk) into
  // one partial result per accumulator in scratch; the final kernel folds
  // each row's partials and runs the per-row stores.
  //  kBlockPerRow: a block per (row, chunk), combined across the block;
  //    partial (r, p) at r * split + p; then a block per row.
  //  kThreadPerRow (column reductions): 2-D tiles where Kernel::column_tiles
  //    (column_tiles.h), else a block per (256 columns, chunk), a thread
  //    walking its column's chunk kColumnUnroll rows at a time,
  //    unrolled: the rows' loads are independent (only the fold is a chain),
  //    so that many are in flight per thread; either way partial (r, p) at
  //    p * num_rows + r, so neighbouring threads write and read neighbouring
  //    addresses; then a thread per column.
  std::string PrintSplit(const Kernel& k) const {
    auto op_template = [](graph::Op op) { return graph::Info(op).cuda_expr; };
    const Pass& pass = k.passes.at(0);
    const bool columns = k.strategy == RowStrategy::kThreadPerRow;
    const std::string idx = columns && !k.index64 ? "int" : "long long";
    const std::string sfx = idx == "int" ? "" : "LL";
    const std::string rows = absl::StrCat(k.num_rows, sfx), length = absl::StrCat(k.row_length, sfx);
    std::string partials;
    for (size_t c = 0; c < pass.accumulators.size(); ++c) {
      const Accumulator& a = pass.accumulators[c];
      absl::StrAppend(&partials, ", ", ComputeCType(a.dtype), "* __restrict__ fb_part", c);
      if (a.index_temp >= 0) absl::StrAppend(&partials, ", long long* __restrict__ fb_part_index", c);
    }
    const std::string params = ParamList(k, /*restrict_qualified=*/true) + partials;
    const std::string chunk = absl::StrCat(CudaSplitChunk(k, tuning_), sfx);
    const int64_t tiles = CudaCombineGridSize(k);
    // Each element of the partial kernel's rows is read once
    // (StreamEverywhere: streaming the column sum's partial measured 3%
    // slower on the H200, unlike a row sum's loads).
    auto streamed = [&](const Stmt& s) {
      if (!TouchesEachElementOnce(s.index) || StreamEverywhere(tuning_) == CacheHint::kNormal) return std::string();
      return HintedLoad(CacheHint::kStream, absl::StrCat(k.buffers[s.buffer].name, " + (", s.index.ToString(), ")"));
    };
    // One element of the chunk (at `j`) folded into the accumulators.
    auto fold = [&](const std::string& indent) {
      std::string out = Statements(k, pass.body, op_template, indent, /*cached_loads=*/false, streamed);
      for (const Accumulator& a : pass.accumulators) {
        absl::StrAppend(&out, AccumulateStep(a, op_template(a.op), absl::StrCat("t", a.value), "(long long)j", indent));
      }
      return out;
    };
    // Stores (or folds) every accumulator's partial at `slot`.
    auto partial_slots = [&](const std::string& slot, bool load) {
      std::string out;
      for (size_t c = 0; c < pass.accumulators.size(); ++c) {
        const Accumulator& a = pass.accumulators[c];
        const std::string value = absl::StrCat("fb_part", c, slot), index = absl::StrCat("fb_part_index", c, slot);
        if (load) {
          absl::StrAppend(&out, AccumulateStep(a, op_template(a.op), value, index, "      "));
          continue;
        }
        absl::StrAppend(&out, "      ", value, " = t", a.temp, ";\n");
        if (a.index_temp >= 0) absl::StrAppend(&out, "      ", index, " = t", a.index_temp, ";\n");
      }
      return out;
    };
    auto combine = [&] {
      std::string out;
      for (const Accumulator& a : pass.accumulators) absl::StrAppend(&out, AfterPass(k, a, CombineLambda(a, op_template(a.op))));
      return out;
    };
    auto open = [&](const std::string& name) {
      return absl::StrCat("extern \"C\" __global__ void __launch_bounds__(", kCudaBlockSize, ") ", name, "(", params, ") {\n");
    };

    const bool tiled = UsesCudaColumnTiles(k);
    std::string out = absl::StrCat(KernelPrelude(k), "\n// ", k.name, ": ", k.num_rows, columns ? " columns" : " rows", " of ",
                                   k.row_length, ", each split over ", k.split, " chunks of ", CudaSplitChunk(k, tuning_),
                                   tiled ? absl::StrCat("; tiles of ", kCudaColumnTileThreadsX, " x ", kCudaColumnTileThreadsY,
                                                        " threads, ", kCudaColumnTileWidth, " columns and ",
                                                        kCudaColumnTileSteps, " rows each (column_tiles.h)")
                                         : "",
                                   "\n");
    if (tiled) {
      absl::StrAppend(&out, PrintCudaColumnTiles(k, params, tuning_));
    } else {
      absl::StrAppend(&out, open(k.name + "_partial"));
      if (columns) {
        absl::StrAppend(&out, "  const ", idx, " part = blockIdx.x / ", tiles, ";\n  const ", idx, " r = (", idx,
                        ")(blockIdx.x % ", tiles, ") * ", kCudaBlockSize, " + threadIdx.x;\n");
      } else {
        absl::StrAppend(&out, "  const long long r = blockIdx.x / ", k.split, ", part = blockIdx.x % ", k.split, ";\n");
      }
      absl::StrAppend(&out, "  const ", idx, " begin = part * ", chunk, ", end = begin + ", chunk, " < ", length,
                      " ? begin + ", chunk, " : ", length, ";\n", columns ? absl::StrCat("  if (r < ", rows, ") {\n") : "  {\n");
      for (const Accumulator& a : pass.accumulators) absl::StrAppend(&out, AccumulatorDecl(a, "    "));
      if (columns) {
        // Chunks are whole steps of kColumnUnroll rows; only the last has a tail.
        const int unroll = tuning_.GetInt(Knob::kColumnUnroll);
        auto steps = [&](const std::string& bound, const std::string& in) {
          return absl::StrCat(in, "for (; j0 + ", unroll, " <= ", bound, "; j0 += ", unroll, ") {\n#pragma unroll\n", in,
                              "  for (int u = 0; u < ", unroll, "; ++u) {\n", in, "    const ", idx, " j = j0 + u;\n",
                              fold(in + "    "), in, "  }\n", in, "}\n");
        };
        absl::StrAppend(&out, "    ", idx, " j0 = begin;\n");
        // Long chunks fold in runs of kCudaColumnRunSteps steps, each into
        // fresh (shadowing) sums and products then added to the chunk's, so
        // no rounding chain grows with the column (RoundsEachFold).
        const int64_t run = kCudaColumnRunSteps * unroll;
        std::vector<const Accumulator*> runs;
        for (const Accumulator& a : pass.accumulators) {
          if (RoundsEachFold(a) && CudaSplitChunk(k, tuning_) > run) runs.push_back(&a);
        }
        if (runs.empty()) {
          absl::StrAppend(&out, steps("end", "    "));
        } else {
          absl::StrAppend(&out, "    for (", idx, " fb_run = begin; fb_run < end; fb_run += ", run, ") {\n", "      const ",
                          idx, " fb_run_end = fb_run + ", run, " < end ? fb_run + ", run, " : end;\n");
          for (const Accumulator* a : runs) absl::StrAppend(&out, "      ", ComputeCType(a->dtype), " fb_run_t", a->temp, ";\n");
          absl::StrAppend(&out, "      {\n");
          for (const Accumulator* a : runs) absl::StrAppend(&out, AccumulatorDecl(*a, "        "));
          absl::StrAppend(&out, steps("fb_run_end", "        "));
          for (const Accumulator* a : runs) absl::StrAppend(&out, "        fb_run_t", a->temp, " = t", a->temp, ";\n");
          absl::StrAppend(&out, "      }\n");
          for (const Accumulator* a : runs) {
            const std::string t = absl::StrCat("t", a->temp);
            absl::StrAppend(&out, "      ", t, " = ", absl::Substitute(op_template(a->op), t, "fb_run_" + t), ";\n");
          }
          absl::StrAppend(&out, "    }\n");
        }
        absl::StrAppend(&out, "    for (", idx, " j = j0; j < end; ++j) {\n", fold("      "), "    }\n    {\n",
                        partial_slots(absl::StrCat("[part * ", rows, " + r]"), /*load=*/false));
      } else {
        absl::StrAppend(&out, "    for (long long j = begin + threadIdx.x; j < end; j += ", kCudaBlockSize, ") {\n",
                        fold("      "), "    }\n", combine(), "    if (threadIdx.x == 0) {\n",
                        partial_slots("[blockIdx.x]", /*load=*/false));
      }
      absl::StrAppend(&out, "    }\n  }\n}\n");
    }
    // The combine is launched as a programmatic dependent of the partial
    // kernel (Driver::Launch, LaunchDims::programmatic): its blocks may start
    // before the partial kernel ends and wait here for its results.
    absl::StrAppend(&out, "\n", open(k.name), kWaitForPriorGrid);
    if (columns) {
      absl::StrAppend(&out, "  const ", idx, " r = (", idx, ")blockIdx.x * ", kCudaBlockSize, " + threadIdx.x;\n  if (r < ",
                      rows, ") {\n");
    } else {
      absl::StrAppend(&out, "  const long long r = blockIdx.x;\n  {\n");
    }
    for (const Accumulator& a : pass.accumulators) absl::StrAppend(&out, AccumulatorDecl(a, "    "));
    absl::StrAppend(&out, columns ? absl::StrCat("    for (int p = 0; p < ", k.split, "; ++p) {\n")
                                  : absl::StrCat("    for (int p = threadIdx.x; p < ", k.split, "; p += ", kCudaBlockSize, ") {\n"),
                    partial_slots(columns ? absl::StrCat("[p * ", rows, " + r]") : absl::StrCat("[r * ", k.split, " + p]"),
                                  /*load=*/true),
                    "    }\n", combine(), OpenRowStores(k), Statements(k, k.row_body, op_template, "      "), "    }\n  }\n}\n");
    return out;
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
    const std::vector<std::string> index_of = *VectorIndices(k, v);  // CudaVectorWidth checked it
    std::string aligned, loads, stores;
    Kernel lanes = k;  // the body over register arrays, lane `k`
    for (size_t n = 0; n < lanes.buffers.size(); ++n) {
      BufferParam& b = lanes.buffers[n];
      const std::string type = StorageCType(b.dtype);
      absl::StrAppend(&aligned, aligned.empty() ? "" : " | ", "(unsigned long long)", b.name);
      absl::StrAppend(&loads, "    ", type, " ", b.name, "_v[", v, "];\n");
      std::string first = "base";
      if (!index_of[n].empty() && index_of[n] != "i") {  // its index at i = base, in a scope of its own
        first = b.name + "_first";
        absl::StrAppend(&loads, "    ", idx, " ", first, ";\n    {\n      const ", idx, " i = base;\n      ", first, " = ",
                        index_of[n], ";\n    }\n");
      }
      // Every element is read or written once (StreamEverywhere).
      const std::string vec =
          absl::StrCat("reinterpret_cast<", b.is_output ? "" : "const ", "uint4*>(", b.name, " + ", first, ")");
      if (!b.is_output) {
        // A broadcast operand is read again by other threads: never streamed.
        const CacheHint hint = first == "base" ? StreamEverywhere(tuning_) : CacheHint::kNormal;
        absl::StrAppend(&loads, "    *reinterpret_cast<uint4*>(", b.name, "_v) = ", HintedLoad(hint, vec), ";\n");
      } else {
        absl::StrAppend(&stores, "    ", HintedStore(StreamEverywhere(tuning_), vec, absl::StrCat("*reinterpret_cast<const uint4*>(", b.name, "_v)")), ";\n");
      }
      b.name += "_v";
    }
    for (Stmt& st : lanes.body) {
      if (st.is_access()) st.index = IndexExpr::Var("k", v);
    }
    std::string out = absl::StrCat(Prelude(), "\n// ", k.name, ": ", k.dynamic_extent ? "fb_n (run-time)" : absl::StrCat(k.numel),
                                   " elements, ", v, " per thread in 16-byte accesses\n");
    absl::StrAppend(&out, "extern \"C\" __global__ void __launch_bounds__(", kCudaBlockSize, ") ", k.name, "(", Params(k),
                    ") {\n  const ", idx, " base = ((", idx, ")blockIdx.x * ", kCudaBlockSize, " + threadIdx.x) * ", v,
                    ";\n  if (base + ", v, " <= ", Extent(k), " && ((", aligned, ") & 15) == 0) {\n", loads,
                    "#pragma unroll\n    for (int k = 0; k < ", v, "; ++k) {\n",
                    Statements(lanes, lanes.body, op_template, "      "), "    }\n", stores, "  } else {\n",
                    "    for (int k = 0; k < ", v, "; ++k) {\n      const ", idx, " i = base + k;\n      if (i >= ",
                    Extent(k), ") break;\n", Statements(k, k.body, op_template, "      "), "    }\n  }\n}\n");
    return out;
  }

 protected:
  std::string OpenRowStores(const Kernel& k) const override {
    switch (k.strategy) {
      case RowStrategy::kBlockPerRow: return "    if (threadIdx.x == 0) {\n";
      case RowStrategy::kWarpPerRow: return "    if ((threadIdx.x & 31) == 0) {\n";
      case RowStrategy::kThreadPerRow: return "    {\n";
    }
    return "";
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
};

}  // namespace

std::string CudaPrelude(const TuningSnapshot& tuning) { return CudaPrinter(tuning).Prelude(); }

std::string CudaIndexCheckPrelude() {
  return CPrinter::IndexCheckHelpers("atomicExch((unsigned long long*)&err[0], 1ull) == 0ull");
}

int CudaVectorWidth(const Kernel& k) {
  if (k.is_reduction()) return 1;
  int size = 0;
  for (const BufferParam& b : k.buffers) {
    if (size != 0 && DTypeSize(b.dtype) != size) return 1;
    size = DTypeSize(b.dtype);
  }
  if (size != 2 && size != 4) return 1;
  const int v = 16 / size;
  return VectorIndices(k, v) ? v : 1;
}

std::string PrintCuda(const Kernel& lowered, const CudaSchedule& schedule, const TuningSnapshot& tuning) {
  // The CUDA passes that follow from the schedule (kernel_passes.h).
  const Kernel kernel = RunKernelPasses(lowered, CudaKernelPasses(), &schedule, tuning);
  if (schedule.kind == CudaScheduleKind::kCluster) return PrintCudaCluster(kernel, schedule.cluster, tuning);
  const CudaPrinter printer(tuning);
  if (schedule.split > 1) return printer.PrintSplit(kernel);
  if (schedule.outer) return PrintCudaOuter(kernel, *schedule.outer, tuning);
  if (schedule.kind == CudaScheduleKind::kPointwiseVector) return printer.PrintVectorized(kernel, schedule.vector_width);
  if (schedule.row_printer()) return printer.PrintRows(kernel, *schedule.rows);
  return printer.Print(kernel);
}

std::string PrintCuda(const Kernel& kernel, const TuningSnapshot& tuning) {
  return PrintCuda(kernel, ChooseCudaSchedule(kernel, tuning), tuning);
}

int CudaBlockSize(const Kernel& k, const TuningSnapshot& tuning) {
  if (const std::optional<CudaOuterLayout> outer = ChooseCudaOuterLayout(k, tuning)) return outer->threads();
  return UsesCudaRowLayout(k) ? CudaRowBlockSize(k, tuning) : kCudaBlockSize;
}

int64_t CudaGridSize(const Kernel& k, int64_t iterations, const TuningSnapshot& tuning) {
  if (const int v = CudaVectorWidth(k); v > 1) {
    const int64_t per_block = int64_t{kCudaBlockSize} * v;
    return (iterations + per_block - 1) / per_block;
  }
  if (!k.is_reduction()) return (iterations + kCudaElementsPerBlock - 1) / kCudaElementsPerBlock;
  switch (k.strategy) {
    case RowStrategy::kBlockPerRow: return k.split > 1 ? iterations * k.split : iterations;
    case RowStrategy::kWarpPerRow: {
      const int rows = ChooseCudaRowLayout(k, tuning).rows_per_block;
      return (iterations + rows - 1) / rows;
    }
    case RowStrategy::kThreadPerRow:
      if (UsesCudaColumnTiles(k)) return CudaColumnTileGridSize(k);
      if (const std::optional<CudaOuterLayout> outer = ChooseCudaOuterLayout(k, tuning)) {
        return (iterations + outer->block_columns() - 1) / outer->block_columns() * outer->blocks;
      }
      return (iterations + kCudaBlockSize - 1) / kCudaBlockSize * std::max<int64_t>(k.split, 1);
  }
  return 0;
}

int CudaPartialBlockSize(const Kernel& k, const TuningSnapshot& tuning) {
  return UsesCudaColumnTiles(k) ? kCudaColumnTileBlock : CudaBlockSize(k, tuning);
}

int64_t CudaCombineGridSize(const Kernel& k) {
  return k.strategy == RowStrategy::kThreadPerRow ? (k.num_rows + kCudaBlockSize - 1) / kCudaBlockSize : k.num_rows;
}

int64_t CudaColumnChunk(int64_t rows, int64_t split, const TuningSnapshot& tuning) {
  const int64_t chunk = (rows + split - 1) / split;
  const int64_t unroll = tuning.Get(Knob::kColumnUnroll);
  return (chunk + unroll - 1) / unroll * unroll;
}

int64_t CudaSplitChunk(const Kernel& k, const TuningSnapshot& tuning) {
  if (UsesCudaColumnTiles(k)) return int64_t{kCudaColumnTileRows} * CudaColumnTileStepsPerGroup(k);
  if (k.strategy == RowStrategy::kThreadPerRow) return CudaColumnChunk(k.row_length, k.split, tuning);
  return (k.row_length + k.split - 1) / k.split;
}

}  // namespace fusebox::backend
