#include "graph/op.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "graph/philox.h"

namespace fusebox::graph {

const std::vector<OpInfo>& AllOps() {
  static const std::vector<OpInfo> kOps = {
#define OP(Enum, name, arity, kind, rule, cuda, cpp, ref) \
  OpInfo{Op::Enum, name, arity, OpKind::kind, DTypeRule::rule, cuda, cpp, ref, 0.0},
#define REDUCE_OP(Enum, name, rule, cuda, cpp, ref, identity) \
  OpInfo{Op::Enum, name, 1, OpKind::kReduction, DTypeRule::rule, cuda, cpp, ref, identity},
#include "graph/ops.def"
#undef OP
#undef REDUCE_OP
  };
  return kOps;
}

const OpInfo& Info(Op op) { return AllOps()[static_cast<int>(op)]; }

}  // namespace fusebox::graph
