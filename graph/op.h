// Op facts, generated from the one op table (graph/ops.def).
#pragma once

#include <array>
#include <vector>
#include <string_view>

#include "tensor/dtype.h"

namespace fusebox::graph {

// kMove: data movement whose positions come from values or ranges (gather
// reads its first input where an index tensor says, cat picks the input
// whose range holds the position); lowered by the backends as indirect or
// masked loads, never printed from a template.
enum class OpKind { kSource, kView, kPointwise, kReduction, kExtern, kMove };

// How an op's result dtype follows from its inputs, which the frontend has
// already promoted to one common dtype (where's condition is bool).
enum class DTypeRule {
  kNone,     // sources and views carry their own dtype
  kSame,     // result = input dtype, any dtype
  kArith,    // result = input dtype; bool is rejected
  kFloat,    // integer and bool inputs are computed and returned as float32
  kCompare,  // result is bool
  kWhere,    // cond is bool; result = dtype of the two values
  kCast,        // result dtype is the node's own
  kReduceSum,   // sum/prod: bool and integers accumulate and return int64
  kReduceSame,  // max/min: result = input dtype
  kReduceIndex, // argmax/argmin: result is the int64 position along the reduced dims
  kRandom,      // rand/randn: int64 (position, seed, offset) in, float32 out
};

enum class Op {
#define OP(Enum, name, arity, kind, rule, cuda, cpp, ref) Enum,
#define REDUCE_OP(Enum, name, rule, cuda, cpp, ref, identity) Enum,
#include "graph/ops.def"
#undef OP
#undef REDUCE_OP
};

using ReferenceFn = double (*)(double, double, double);

struct OpInfo {
  Op op;
  const char* name;
  int arity;
  OpKind kind;
  DTypeRule dtype_rule;
  const char* cuda_expr;
  const char* cpp_expr;
  ReferenceFn reference;
  double identity;  // reductions: the accumulator's start value
};

const OpInfo& Info(Op op);
inline const char* OpName(Op op) { return Info(op).name; }
// Every row, in table order; tests iterate this.
const std::vector<OpInfo>& AllOps();

}  // namespace fusebox::graph
