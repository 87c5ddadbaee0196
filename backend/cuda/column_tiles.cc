#include "backend/cuda/column_tiles.h"

#include <algorithm>
#include <functional>
#include <set>

#include "absl/strings/str_cat.h"
#include "backend/c_printer.h"
#include "backend/code_writer.h"
#include "backend/cuda/cache_hints.h"
#include "graph/op.h"

namespace fusebox::backend {
namespace {

// A load whose 4 adjacent columns (r0 .. r0 + 3) are 4 adjacent elements,
// the first at a multiple of 4: one 16-byte access where the pointer is aligned.
bool LoadsAdjacentColumns(const Kernel& k, const Stmt& s) {
  return s.kind == StmtKind::kLoad && DTypeSize(k.buffers[s.buffer].dtype) == 4 &&
         s.index.IsVarPlusMultipleOf("r", kCudaColumnTileWidth);
}

int64_t Ceil(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

bool CudaColumnTilesFit(const Kernel& k, const TuningSnapshot& tuning) {
  if (!tuning.On(Knob::kColumnTiles) || k.kind != fusion::KernelKind::kReduction ||
      k.passes.size() != 1 || !k.elementwise.empty() || k.dynamic_extent) {
    return false;
  }
  const Pass& pass = k.passes[0];
  if (pass.accumulators.empty() || pass.accumulators.size() > 2) return false;
  for (const Accumulator& a : pass.accumulators) {
    if (a.index_temp >= 0 || DTypeSize(a.dtype) > 4) return false;
  }
  if (k.num_rows % kCudaColumnTileWidth != 0 || k.num_rows < kCudaColumnTileColumns) return false;
  if (k.row_length < 2 * kCudaColumnTileRows) return false;
  return std::any_of(pass.body.begin(), pass.body.end(), [&](const Stmt& s) { return LoadsAdjacentColumns(k, s); });
}

bool UsesCudaColumnTiles(const CudaRowSpread& spread) { return spread.column_tiles && spread.split > 1; }

int64_t CudaColumnTileStepsPerGroup(const Kernel& k) {
  return Ceil(Ceil(k.row_length, kCudaColumnTileRows), kCudaColumnTileMaxGroups);
}

int64_t CudaColumnTileSplit(const Kernel& k) {
  return Ceil(k.row_length, kCudaColumnTileRows * CudaColumnTileStepsPerGroup(k));
}

int64_t CudaColumnTileGridSize(const Kernel& k, const CudaRowSpread& spread) {
  return Ceil(k.num_rows, kCudaColumnTileColumns) * spread.split;
}

namespace {

// Prints one tile kernel. Each thread holds fb_acc<c>[4], one accumulator
// per column of its group (fb_r0 .. fb_r0 + 3), for every accumulator c.
class TilePrinter {
 public:
  TilePrinter(const Kernel& k, const TuningSnapshot& tuning)
      : k_(k), tuning_(tuning), pass_(k.passes.at(0)), idx_(k.index64 ? "long long" : "int"), sfx_(k.index64 ? "LL" : ""),
        rows_(absl::StrCat(k.num_rows, sfx_)), steps_(CudaColumnTileStepsPerGroup(k)) {}

  // The kernel `<name>_partial`, which picks the aligned or scalar instance
  // of the template `<name>_tile` once, and the template.
  std::string Print(const std::string& params) const {
    std::string fold_params, fold_args, args;
    for (size_t c = 0; c < pass_.accumulators.size(); ++c) {
      absl::StrAppend(&fold_params, ", ", ComputeCType(pass_.accumulators[c].dtype), "* fb_fold", c);
      absl::StrAppend(&fold_args, ", fb_fold", c);
    }
    for (const BufferParam& b : k_.buffers) absl::StrAppend(&args, args.empty() ? "" : ", ", b.name);
    for (size_t c = 0; c < pass_.accumulators.size(); ++c) absl::StrAppend(&args, ", fb_part", c);
    absl::StrAppend(&args, fold_args);
    const std::string tile = k_.name + "_tile";
    const std::string decl = absl::StrCat("FB_INLINE void ", tile, "(", params, fold_params, ")");
    CodeWriter w;
    w.Line("template <bool fb_vec>");
    w.Line(decl, ";");
    {
      auto kernel = w.Block("extern \"C\" __global__ void __launch_bounds__(", kCudaColumnTileBlock, ") ", k_.name,
                            "_partial(", params, ")");
      for (size_t c = 0; c < pass_.accumulators.size(); ++c) {
        w.Line("__shared__ __align__(16) ", ComputeCType(pass_.accumulators[c].dtype), " fb_fold", c, "[",
               kCudaColumnTileBlock * kCudaColumnTileWidth, "];");
      }
      auto pick = w.Block("if (((", AlignedPointers(), ") & 15) == 0)");
      w.Line(tile, "<true>(", args, ");");
      pick.Else();
      w.Line(tile, "<false>(", args, ");");
    }
    w.Line("template <bool fb_vec>");
    {
      auto body = w.Block(decl);
      Geometry(w);
      FoldRows(w);
      FoldBlock(w);
    }
    return std::move(w).Release();
  }

 private:
  static const char* OpTemplate(graph::Op op) { return graph::Info(op).cuda_expr; }

  bool Hoisted(const Stmt& s) const { return LoadsAdjacentColumns(k_, s); }
  bool RaggedColumns() const { return k_.num_rows % kCudaColumnTileColumns != 0; }

  // The buffers of the 16-byte loads, OR-ed for the alignment test.
  std::string AlignedPointers() const {
    std::set<int> buffers;
    for (const Stmt& s : pass_.body) {
      if (Hoisted(s)) buffers.insert(s.buffer);
    }
    std::string out;
    for (int b : buffers) absl::StrAppend(&out, out.empty() ? "" : " | ", "(unsigned long long)", k_.buffers[b].name);
    return out;
  }

  // The thread's place (fb_tx along the columns, fb_ty along the rows), its
  // group (`part`) and first column, and its accumulators at the identity.
  void Geometry(CodeWriter& w) const {
    const int64_t strips = Ceil(k_.num_rows, kCudaColumnTileColumns);
    w.Line("const int fb_tx = threadIdx.x % ", kCudaColumnTileThreadsX, ", fb_ty = threadIdx.x / ", kCudaColumnTileThreadsX, ";");
    w.Line("const ", idx_, " part = blockIdx.x / ", strips, ";");
    w.Line("const ", idx_, " fb_r0 = (", idx_, ")(blockIdx.x % ", strips, ") * ", kCudaColumnTileColumns, " + fb_tx * ",
           kCudaColumnTileWidth, ";");
    for (size_t c = 0; c < pass_.accumulators.size(); ++c) {
      const Accumulator& a = pass_.accumulators[c];
      w.Line(ComputeCType(a.dtype), " fb_acc", c, "[", kCudaColumnTileWidth, "];");
      w.Directive("#pragma unroll");
      w.Line("for (int e = 0; e < ", kCudaColumnTileWidth, "; ++e) fb_acc", c, "[e] = ", CPrinter::IdentityLiteral(a), ";");
    }
  }

  // The aligned path's 16-byte loads into registers fb_l<temp>, or 4 scalar
  // loads each where a pointer is not aligned; streamed (read once).
  void Loads(CodeWriter& w) const {
    const CacheHint hint = StreamReadOnlyReduction(tuning_);
    for (const Stmt& s : pass_.body) {
      if (!Hoisted(s)) continue;
      const BufferParam& b = k_.buffers[s.buffer];
      const std::string regs = absl::StrCat("fb_l", s.result);
      const std::string at = absl::StrCat(b.name, " + (", s.index.ToString(), ")");
      w.Line(StorageCType(b.dtype), " ", regs, "[", kCudaColumnTileWidth, "];");
      auto aligned = w.Block("if (fb_vec)");
      w.Line("const ", idx_, " r = fb_r0;");
      w.Line("*reinterpret_cast<uint4*>(", regs, ") = ", HintedLoad(hint, absl::StrCat("reinterpret_cast<const uint4*>(", at, ")")),
             ";");
      aligned.Else();
      w.Directive("#pragma unroll");
      auto column = w.Block("for (int e = 0; e < ", kCudaColumnTileWidth, "; ++e)");
      w.Line("const ", idx_, " r = fb_r0 + e;");
      w.Line(regs, "[e] = ", HintedLoad(hint, at), ";");
    }
  }

  // `body` once per column of the thread (e), between its accumulators'
  // copies into the pass's temps t<temp> and back.
  void PerColumn(CodeWriter& w, const std::function<void()>& body) const {
    w.Line("#pragma unroll");
    auto column = w.Block("for (int e = 0; e < ", kCudaColumnTileWidth, "; ++e)");
    for (size_t c = 0; c < pass_.accumulators.size(); ++c) {
      const Accumulator& a = pass_.accumulators[c];
      w.Line(ComputeCType(a.dtype), " t", a.temp, " = fb_acc", c, "[e];");
    }
    body();
    for (size_t c = 0; c < pass_.accumulators.size(); ++c) w.Line("fb_acc", c, "[e] = t", pass_.accumulators[c].temp, ";");
  }

  // The thread's rows of its group: kCudaColumnTileSteps rows 64 apart per
  // tile step (unrolled: their loads are independent), each row's elements
  // folded into the accumulators.
  void FoldRows(CodeWriter& w) const {
    const int64_t group_rows = int64_t{kCudaColumnTileRows} * steps_;
    auto hoisted = [&](const Stmt& s) { return Hoisted(s) ? absl::StrCat("fb_l", s.result, "[e]") : ""; };
    auto columns = w.Block(RaggedColumns() ? absl::StrCat("if (fb_r0 < ", rows_, ")") : "");
    // The step loop keeps the unrolled loop's indentation.
    if (steps_ > 1) w.Line("for (int s = 0; s < ", steps_, "; ++s) {");
    {
      w.Directive("#pragma unroll");
      auto rows = w.Block("for (int u = 0; u < ", kCudaColumnTileSteps, "; ++u)");
      w.Line("const ", idx_, " j = part * ", group_rows, sfx_, steps_ > 1 ? absl::StrCat(" + s * ", kCudaColumnTileRows) : "",
             " + u * ", kCudaColumnTileThreadsY, " + fb_ty;");
      auto row = w.Block(k_.row_length % group_rows != 0 ? absl::StrCat("if (j < ", k_.row_length, sfx_, ")") : "");
      Loads(w);
      PerColumn(w, [&] {
        w.Line("const ", idx_, " r = fb_r0 + e;");
        CPrinter::Statements(w, k_, pass_.body, OpTemplate, false, hoisted);
        for (const Accumulator& a : pass_.accumulators) {
          CPrinter::AccumulateStep(w, a, OpTemplate(a.op), absl::StrCat("t", a.value), "");
        }
      });
    }
    if (steps_ > 1) w.Line("}");
  }

  // The block's 64 partial rows through shared memory, folded by its first
  // row of threads into the group's partial row (at part * columns + r,
  // chunk-major, as the combine reads it).
  void FoldBlock(CodeWriter& w) const {
    const int n = kCudaColumnTileWidth;
    for (size_t c = 0; c < pass_.accumulators.size(); ++c) {
      w.Directive("#pragma unroll");
      w.Line("for (int e = 0; e < ", n, "; ++e) fb_fold", c, "[fb_ty * ", kCudaColumnTileColumns, " + fb_tx * ", n,
             " + e] = fb_acc", c, "[e];");
    }
    w.Line("__syncthreads();");
    auto first_row = w.Block("if (fb_ty == 0", RaggedColumns() ? absl::StrCat(" && fb_r0 < ", rows_) : "", ")");
    {
      auto rows = w.Block("for (int y = 1; y < ", kCudaColumnTileThreadsY, "; ++y)");
      PerColumn(w, [&] {
        for (size_t c = 0; c < pass_.accumulators.size(); ++c) {
          const Accumulator& a = pass_.accumulators[c];
          CPrinter::AccumulateStep(w, a, OpTemplate(a.op),
                                   absl::StrCat("fb_fold", c, "[y * ", kCudaColumnTileColumns, " + fb_tx * ", n, " + e]"), "");
        }
      });
    }
    for (size_t c = 0; c < pass_.accumulators.size(); ++c) {
      w.Directive("#pragma unroll");
      w.Line("for (int e = 0; e < ", n, "; ++e) fb_part", c, "[part * ", rows_, " + fb_r0 + e] = fb_acc", c, "[e];");
    }
  }

  const Kernel& k_;
  const TuningSnapshot& tuning_;
  const Pass& pass_;
  const std::string idx_, sfx_, rows_;
  const int64_t steps_;
};

}  // namespace

std::string PrintCudaColumnTiles(const Kernel& k, const std::string& params, const TuningSnapshot& tuning) {
  return TilePrinter(k, tuning).Print(params);
}

}  // namespace fusebox::backend
