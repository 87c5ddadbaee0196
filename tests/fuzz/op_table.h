// The fuzzer's ops: one row each with its three interpretations (fusebox's
// public API, the float64 reference with error bounds, the C++ spelling of a
// repro), so a program means the same thing in all three.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "frontend/fusebox.h"
#include "tests/fuzz/program.h"
#include "tests/fuzz/ref_array.h"

namespace fusebox::fuzz {

using Refs = std::vector<RefArray>;
using Tensors = std::vector<Tensor>;
using Names = std::vector<std::string>;
using Ranks = std::vector<int64_t>;

enum class Category { kUnary, kScalar, kBinary, kCompare, kCompareScalar, kWhere, kCast, kView, kReduce, kNorm, kMatmul };

struct OpDef {
  const char* name;
  Category category;
  // Operands are arrays (an undefined one has no `val`), tensors, or the names
  // and ranks of the repro's variables.
  std::function<RefArray(const std::vector<RefArray>&, const Step&)> ref;
  std::function<Tensor(const std::vector<Tensor>&, const Step&)> fb;
  std::function<std::string(const std::vector<std::string>&, const std::vector<int64_t>&, const Step&)> print;
};

const std::vector<OpDef>& OpTable();
// A float unary function's row: the reference bounds f over the operand's
// interval (and by `lipschitz` times its width, for f not monotonic).
OpDef Unary(const char* name, double (*f)(double), Tensor (*fb)(const Tensor&), double lipschitz = 0);
int OpIndex(const std::string& name);
// PyTorch's result dtype of operands (0-d tensors do not widen dimensioned ones).
DType ResultType(const std::vector<const RefArray*>& operands);
std::string DTypeSpelling(DType d);  // "DType::kBFloat16"

}  // namespace fusebox::fuzz
