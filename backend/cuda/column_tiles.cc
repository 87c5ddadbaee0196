#include "backend/cuda/column_tiles.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "backend/c_printer.h"
#include "backend/cuda/cache_hints.h"
#include "backend/tune.h"
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

bool CudaColumnTilesFit(const Kernel& k) {
  static const bool enabled = TuneInt("FUSEBOX_TUNE_COLUMN_TILES", 1) != 0;
  if (!enabled || k.strategy != RowStrategy::kThreadPerRow || k.kind != fusion::KernelKind::kReduction ||
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

bool UsesCudaColumnTiles(const Kernel& k) { return k.split > 1 && CudaColumnTilesFit(k); }

int64_t CudaColumnTileStepsPerGroup(const Kernel& k) {
  return Ceil(Ceil(k.row_length, kCudaColumnTileRows), kCudaColumnTileMaxGroups);
}

int64_t CudaColumnTileSplit(const Kernel& k) {
  return Ceil(k.row_length, kCudaColumnTileRows * CudaColumnTileStepsPerGroup(k));
}

int64_t CudaColumnTileGridSize(const Kernel& k) { return Ceil(k.num_rows, kCudaColumnTileColumns) * k.split; }

std::string PrintCudaColumnTiles(const Kernel& k, const std::string& params) {
  auto op_template = [](graph::Op op) { return graph::Info(op).cuda_expr; };
  const Pass& pass = k.passes.at(0);
  const std::string idx = k.index64 ? "long long" : "int";
  const std::string sfx = k.index64 ? "LL" : "";
  const int64_t strips = Ceil(k.num_rows, kCudaColumnTileColumns);
  const int64_t steps = CudaColumnTileStepsPerGroup(k);
  const int64_t group_rows = kCudaColumnTileRows * steps;
  const std::string rows = absl::StrCat(k.num_rows, sfx);
  const std::string name = k.name + "_partial", tile = k.name + "_tile";
  const int w = kCudaColumnTileWidth;

  // The aligned path's 16-byte loads, hoisted: register arrays fb_l<temp>.
  std::string loads;
  std::set<int> vector_buffers;
  for (const Stmt& s : pass.body) {
    if (!LoadsAdjacentColumns(k, s)) continue;
    const BufferParam& b = k.buffers[s.buffer];
    vector_buffers.insert(s.buffer);
    const std::string regs = absl::StrCat("fb_l", s.result);
    const std::string at = absl::StrCat(b.name, " + (", s.index.ToString(), ")");
    const CacheHint hint = StreamReadOnlyReduction();  // each element is read once
    absl::StrAppend(&loads, "        ", StorageCType(b.dtype), " ", regs, "[", w, "];\n        if (fb_vec) {\n",
                    "          const ", idx, " r = fb_r0;\n          *reinterpret_cast<uint4*>(", regs,
                    ") = ", HintedLoad(hint, absl::StrCat("reinterpret_cast<const uint4*>(", at, ")")), ";\n",
                    "        } else {\n#pragma unroll\n          for (int e = 0; e < ", w, "; ++e) {\n            const ",
                    idx, " r = fb_r0 + e;\n            ", regs, "[e] = ", HintedLoad(hint, at), ";\n          }\n",
                    "        }\n");
  }
  auto hoisted = [&](const Stmt& s) { return LoadsAdjacentColumns(k, s) ? absl::StrCat("fb_l", s.result, "[e]") : ""; };
  // One element per column of the thread, its accumulators in fb_acc<c>[e].
  auto per_column = [&](const std::string& indent, const std::string& body) {
    std::string out = absl::StrCat(indent, "#pragma unroll\n", indent, "for (int e = 0; e < ", w, "; ++e) {\n");
    for (size_t c = 0; c < pass.accumulators.size(); ++c) {
      const Accumulator& a = pass.accumulators[c];
      absl::StrAppend(&out, indent, "  ", ComputeCType(a.dtype), " t", a.temp, " = fb_acc", c, "[e];\n");
    }
    absl::StrAppend(&out, body);
    for (size_t c = 0; c < pass.accumulators.size(); ++c) {
      absl::StrAppend(&out, indent, "  fb_acc", c, "[e] = t", pass.accumulators[c].temp, ";\n");
    }
    return absl::StrCat(out, indent, "}\n");
  };
  std::string fold_element = absl::StrCat("          const ", idx, " r = fb_r0 + e;\n",
                                          CPrinter::Statements(k, pass.body, op_template, "          ", false, hoisted));
  std::string fold_shared;
  for (size_t c = 0; c < pass.accumulators.size(); ++c) {
    const Accumulator& a = pass.accumulators[c];
    absl::StrAppend(&fold_element, CPrinter::AccumulateStep(a, op_template(a.op), absl::StrCat("t", a.value), "", "          "));
    absl::StrAppend(&fold_shared, CPrinter::AccumulateStep(a, op_template(a.op),
                                                           absl::StrCat("fb_fold", c, "[y * ", kCudaColumnTileColumns, " + fb_tx * ", w, " + e]"),
                                                           "", "        "));
  }

  std::string fold_params, fold_args;
  for (size_t c = 0; c < pass.accumulators.size(); ++c) {
    absl::StrAppend(&fold_params, ", ", ComputeCType(pass.accumulators[c].dtype), "* fb_fold", c);
    absl::StrAppend(&fold_args, ", fb_fold", c);
  }
  std::string aligned;
  for (int b : vector_buffers) absl::StrAppend(&aligned, aligned.empty() ? "" : " | ", "(unsigned long long)", k.buffers[b].name);
  std::string args;
  for (const BufferParam& b : k.buffers) absl::StrAppend(&args, args.empty() ? "" : ", ", b.name);
  for (size_t c = 0; c < pass.accumulators.size(); ++c) absl::StrAppend(&args, ", fb_part", c);
  const std::string tile_decl = absl::StrCat("template <bool fb_vec>\nFB_INLINE void ", tile, "(", params, fold_params, ")");

  std::string out = absl::StrCat(tile_decl, ";\nextern \"C\" __global__ void __launch_bounds__(", kCudaColumnTileBlock, ") ",
                                 name, "(", params, ") {\n");
  for (size_t c = 0; c < pass.accumulators.size(); ++c) {
    absl::StrAppend(&out, "  __shared__ __align__(16) ", ComputeCType(pass.accumulators[c].dtype), " fb_fold", c, "[",
                    kCudaColumnTileBlock * w, "];\n");
  }
  absl::StrAppend(&out, "  if (((", aligned, ") & 15) == 0) {\n    ", tile, "<true>(", args, fold_args, ");\n  } else {\n    ",
                  tile, "<false>(", args, fold_args, ");\n  }\n}\n", tile_decl, " {\n");
  absl::StrAppend(&out, "  const int fb_tx = threadIdx.x % ", kCudaColumnTileThreadsX, ", fb_ty = threadIdx.x / ",
                  kCudaColumnTileThreadsX, ";\n  const ", idx, " part = blockIdx.x / ", strips, ";\n  const ", idx,
                  " fb_r0 = (", idx, ")(blockIdx.x % ", strips, ") * ", kCudaColumnTileColumns, " + fb_tx * ", w, ";\n");
  for (size_t c = 0; c < pass.accumulators.size(); ++c) {
    const Accumulator& a = pass.accumulators[c];
    absl::StrAppend(&out, "  ", ComputeCType(a.dtype), " fb_acc", c, "[", w, "];\n#pragma unroll\n  for (int e = 0; e < ", w,
                    "; ++e) fb_acc", c, "[e] = ", CPrinter::IdentityLiteral(a), ";\n");
  }
  const bool ragged_columns = k.num_rows % kCudaColumnTileColumns != 0;
  const bool ragged_rows = k.row_length % group_rows != 0;
  absl::StrAppend(&out, ragged_columns ? absl::StrCat("  if (fb_r0 < ", rows, ") {\n") : "  {\n");
  if (steps > 1) absl::StrAppend(&out, "    for (int s = 0; s < ", steps, "; ++s) {\n");
  absl::StrAppend(&out, "#pragma unroll\n    for (int u = 0; u < ", kCudaColumnTileSteps, "; ++u) {\n      const ", idx,
                  " j = part * ", group_rows, sfx, steps > 1 ? absl::StrCat(" + s * ", kCudaColumnTileRows) : "",
                  " + u * ", kCudaColumnTileThreadsY, " + fb_ty;\n",
                  ragged_rows ? absl::StrCat("      if (j < ", k.row_length, sfx, ") {\n") : "      {\n", loads,
                  per_column("        ", fold_element), "      }\n    }\n", steps > 1 ? "    }\n" : "", "  }\n");
  // The block's 64 partial rows, folded by its first row of threads.
  for (size_t c = 0; c < pass.accumulators.size(); ++c) {
    absl::StrAppend(&out, "#pragma unroll\n  for (int e = 0; e < ", w, "; ++e) fb_fold", c, "[fb_ty * ",
                    kCudaColumnTileColumns, " + fb_tx * ", w, " + e] = fb_acc", c, "[e];\n");
  }
  absl::StrAppend(&out, "  __syncthreads();\n  if (fb_ty == 0", ragged_columns ? absl::StrCat(" && fb_r0 < ", rows) : "",
                  ") {\n    for (int y = 1; y < ", kCudaColumnTileThreadsY, "; ++y) {\n", per_column("      ", fold_shared),
                  "    }\n");
  for (size_t c = 0; c < pass.accumulators.size(); ++c) {
    absl::StrAppend(&out, "#pragma unroll\n    for (int e = 0; e < ", w, "; ++e) fb_part", c, "[part * ", rows,
                    " + fb_r0 + e] = fb_acc", c, "[e];\n");
  }
  return absl::StrCat(out, "  }\n}\n");
}

}  // namespace fusebox::backend
