#include "backend/kernel_ir.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace fusebox::backend {

std::string Kernel::ToString() const {
  std::string out = absl::StrCat("kernel ", name, " (numel=", numel, index64 ? ", index64" : "", ")\n");
  for (const BufferParam& b : buffers) {
    absl::StrAppend(&out, "  ", b.is_output ? "out " : "in  ", b.name, ": ", DTypeName(b.dtype), "  (%",
                    b.node, ")\n");
  }
  auto temp = [](std::string* s, int t) { absl::StrAppend(s, "t", t); };
  for (const Stmt& s : body) {
    switch (s.kind) {
      case StmtKind::kLoad:
        absl::StrAppend(&out, "  t", s.result, " = load ", buffers[s.buffer].name, "[", s.index.ToString(), "]\n");
        break;
      case StmtKind::kConstant:
        absl::StrAppend(&out, "  t", s.result, absl::StrFormat(" = %.9g\n", s.constant));
        break;
      case StmtKind::kCompute:
        absl::StrAppend(&out, "  t", s.result, " = ", graph::OpName(s.op), "(", absl::StrJoin(s.args, ", ", temp),
                        ") : ", DTypeName(s.dtype), "\n");
        break;
      case StmtKind::kStore:
        absl::StrAppend(&out, "  store ", buffers[s.buffer].name, "[", s.index.ToString(), "] = t", s.args[0], "\n");
        break;
    }
  }
  return out;
}

}  // namespace fusebox::backend
