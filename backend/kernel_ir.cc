#include "backend/kernel_ir.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace fusebox::backend {

const char* ReductionAxisName(ReductionAxis axis) {
  return axis == ReductionAxis::kInner ? "inner" : "outer";
}

int64_t Kernel::Iterations(const std::vector<int64_t>& symbol_values) const {
  if (!dynamic_extent) return is_reduction() ? num_rows : numel;
  int64_t n = extent_factor;
  for (int32_t k : extent_symbols) n *= symbol_values.at(k);
  return n;
}

std::string Kernel::ToString() const {
  std::string out = absl::StrCat("kernel ", name, " (numel=", numel, index64 ? ", index64" : "",
                                 dynamic_extent ? ", iterations fb_n at run time" : "");
  for (size_t a = 0; a < size_args.size(); ++a) {
    absl::StrAppend(&out, a == 0 ? ", run-time sizes " : " ", SizeArgName(size_args[a]));
  }
  absl::StrAppend(&out, ")\n");
  for (const BufferParam& b : buffers) {
    absl::StrAppend(&out, "  ", b.is_output ? "out " : "in  ", b.name, ": ", DTypeName(b.dtype), "  (%",
                    b.node, ")\n");
  }
  auto temp = [](std::string* s, int t) { absl::StrAppend(s, "t", t); };
  auto print = [&](const std::vector<Stmt>& block, const std::string& indent) {
    for (const Stmt& s : block) {
      switch (s.kind) {
        case StmtKind::kLoad:
          absl::StrAppend(&out, indent, "t", s.result, " = load ", buffers[s.buffer].name, "[", s.index.ToString(), "]",
                          s.mask >= 0 ? absl::StrCat(" if t", s.mask) : "", "\n");
          break;
        case StmtKind::kIndexCheck:
          absl::StrAppend(&out, indent, "t", s.result, " = check_index(t", s.args[0], " < ", s.hi, ", ",
                          graph::OpName(s.op), " dim ", s.dim, ")", s.mask >= 0 ? absl::StrCat(" if t", s.mask) : "", "\n");
          break;
        case StmtKind::kInRange:
          absl::StrAppend(&out, indent, "t", s.result, " = ", s.lo, " <= ", s.index.ToString(), " < ", s.hi,
                          s.args.empty() ? "" : absl::StrCat(" && t", s.args[0]), "\n");
          break;
        case StmtKind::kPosition:
          absl::StrAppend(&out, indent, "t", s.result, " = position ", s.index.ToString(), "\n");
          break;
        case StmtKind::kConstant:
          absl::StrAppend(&out, indent, "t", s.result, absl::StrFormat(" = %.9g\n", s.constant));
          break;
        case StmtKind::kCompute:
          absl::StrAppend(&out, indent, "t", s.result, " = ", graph::OpName(s.op), "(",
                          absl::StrJoin(s.args, ", ", temp), ") : ", DTypeName(s.dtype), "\n");
          break;
        case StmtKind::kStore:
          absl::StrAppend(&out, indent, "store ", buffers[s.buffer].name, "[", s.index.ToString(), "] = t", s.args[0], "\n");
          break;
      }
    }
  };
  if (!is_reduction()) {
    print(body, "  ");
    return out;
  }
  absl::StrAppend(&out, "  for r in [0, ", num_rows, "):  # reduced dims ", ReductionAxisName(axis), "\n");
  for (const Pass& p : passes) {
    absl::StrAppend(&out, "    for j in [0, ", row_length, "):\n");
    print(p.body, "      ");
    for (const Accumulator& a : p.accumulators) {
      if (a.online_max >= 0) {
        absl::StrAppend(&out, "      t", a.temp, " = online_exp_sum(t", a.temp, ", t", a.value, " - running t", a.online_max,
                        ")\n");
        continue;
      }
      absl::StrAppend(&out, "      t", a.temp, " = ", graph::OpName(a.op), "(t", a.temp, ", t", a.value, ")\n");
    }
  }
  if (!elementwise.empty()) {
    absl::StrAppend(&out, "    for j in [0, ", row_length, "):\n");
    print(elementwise, "      ");
  }
  print(row_body, "    ");
  return out;
}

}  // namespace fusebox::backend
