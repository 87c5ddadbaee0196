#include "backend/abs_compares.h"

#include <map>
#include <vector>

namespace fusebox::backend {
namespace {

bool IsFloat(DType dtype) { return dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16; }

}  // namespace

Kernel RewriteAbsCompares(Kernel kernel) {
  std::vector<std::vector<Stmt>*> blocks = {&kernel.body, &kernel.elementwise, &kernel.row_body};
  for (Pass& pass : kernel.passes) blocks.push_back(&pass.body);
  std::map<int, Stmt> defined;  // temps are the kernel's, unique across its blocks
  for (std::vector<Stmt>* block : blocks) {
    for (const Stmt& s : *block) {
      if (s.result >= 0) defined[s.result] = s;
    }
  }
  auto abs_of = [&](int temp) -> int {  // x where temp = abs(x) in a float type, else -1
    auto it = defined.find(temp);
    if (it == defined.end() || it->second.kind != StmtKind::kCompute || it->second.op != graph::Op::kAbs ||
        !IsFloat(it->second.dtype)) {
      return -1;
    }
    return it->second.args.at(0);
  };
  auto constant = [&](int temp, double* c) {
    auto it = defined.find(temp);
    if (it == defined.end() || it->second.kind != StmtKind::kConstant) return false;
    *c = it->second.constant;
    return true;
  };
  for (std::vector<Stmt>* block : blocks) {
    for (Stmt& s : *block) {
      if (s.kind != StmtKind::kCompute || s.args.size() != 2) continue;
      // abs(x) >= c, or c <= abs(x); strict: abs(x) > c, or c < abs(x).
      const bool ge = s.op == graph::Op::kGe || s.op == graph::Op::kLe, gt = s.op == graph::Op::kGt || s.op == graph::Op::kLt;
      if (!ge && !gt) continue;
      const bool abs_first = s.op == graph::Op::kGe || s.op == graph::Op::kGt;
      const int x = abs_of(s.args[abs_first ? 0 : 1]);
      double c = 0;
      if (x < 0 || !constant(s.args[abs_first ? 1 : 0], &c)) continue;
      if (!(c < 0 || (ge && c == 0))) continue;
      s.op = graph::Op::kEq;
      s.args = {x, x};
    }
  }
  return kernel;
}

}  // namespace fusebox::backend
