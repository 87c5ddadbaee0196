#include "backend/row_reciprocals.h"

#include <set>
#include <vector>

namespace fusebox::backend {
namespace {

// Rewrites `block`'s divisions by a temp of `row_values`: a constant 1, its
// division by the divisor, then the multiplication, each a new temp.
void Rewrite(std::vector<Stmt>& block, const std::set<int>& row_values, int& num_temps) {
  std::vector<Stmt> out;
  out.reserve(block.size());
  std::set<int> constants;  // a constant over a row value is already computed once
  for (Stmt& s : block) {
    if (s.kind == StmtKind::kConstant) constants.insert(s.result);
    const bool by_row_value = s.kind == StmtKind::kCompute && s.op == graph::Op::kDiv && s.args.size() == 2 &&
                              row_values.contains(s.args[1]) && !constants.contains(s.args[0]) && IsFloating(s.dtype);
    if (!by_row_value) {
      out.push_back(std::move(s));
      continue;
    }
    Stmt one = s;
    one.kind = StmtKind::kConstant;
    one.result = num_temps++;
    one.args.clear();
    one.constant = 1.0;
    Stmt reciprocal = s;
    reciprocal.result = num_temps++;
    reciprocal.args = {one.result, s.args[1]};
    s.op = graph::Op::kMul;
    s.args[1] = reciprocal.result;
    out.push_back(std::move(one));
    out.push_back(std::move(reciprocal));
    out.push_back(std::move(s));
  }
  block = std::move(out);
}

}  // namespace

Kernel MultiplyByRowReciprocals(Kernel kernel) {
  if (!kernel.is_reduction()) return kernel;
  // Accumulators of the passes before the block being rewritten.
  std::set<int> row_values;
  for (Pass& pass : kernel.passes) {
    Rewrite(pass.body, row_values, kernel.num_temps);
    for (const Accumulator& a : pass.accumulators) {
      if (a.index_temp < 0) row_values.insert(a.temp);  // argmax's index is an integer
    }
  }
  Rewrite(kernel.elementwise, row_values, kernel.num_temps);
  return kernel;
}

}  // namespace fusebox::backend
