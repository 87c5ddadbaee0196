#include "backend/nonnegative_compares.h"

#include <map>
#include <vector>

namespace fusebox::backend {
namespace {

bool IsFloat(DType dtype) { return dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16; }

}  // namespace

Kernel RewriteNonNegativeCompares(Kernel kernel) {
  std::vector<std::vector<Stmt>*> blocks = {&kernel.body, &kernel.elementwise, &kernel.row_body};
  for (Pass& pass : kernel.passes) blocks.push_back(&pass.body);
  std::map<int, Stmt> defined;  // temps are the kernel's, unique across its blocks
  for (std::vector<Stmt>* block : blocks) {
    for (const Stmt& s : *block) {
      if (s.result >= 0) defined[s.result] = s;
    }
  }
  // The NaN source of `temp` where it is a float value >= 0 unless NaN, else -1.
  auto nan_source = [&](int temp) -> int {
    auto it = defined.find(temp);
    if (it == defined.end() || it->second.kind != StmtKind::kCompute || !IsFloat(it->second.dtype)) return -1;
    const Stmt& d = it->second;
    switch (d.op) {
      case graph::Op::kAbs:
      case graph::Op::kExp:
      case graph::Op::kRelu: return d.args.at(0);
      case graph::Op::kMul: return d.args.at(0) == d.args.at(1) ? d.args.at(0) : -1;
      case graph::Op::kSqrt: return temp;
      default: return -1;
    }
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
      // v >= c, or c <= v; strict: v > c, or c < v.
      const bool ge = s.op == graph::Op::kGe || s.op == graph::Op::kLe, gt = s.op == graph::Op::kGt || s.op == graph::Op::kLt;
      if (!ge && !gt) continue;
      const bool value_first = s.op == graph::Op::kGe || s.op == graph::Op::kGt;
      const int x = nan_source(s.args[value_first ? 0 : 1]);
      double c = 0;
      if (x < 0 || !constant(s.args[value_first ? 1 : 0], &c)) continue;
      if (!(c < 0 || (ge && c == 0))) continue;
      s.op = graph::Op::kEq;
      s.args = {x, x};
    }
  }
  return kernel;
}

}  // namespace fusebox::backend
