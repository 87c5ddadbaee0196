// A fuzz program is data: size variables (a size per call of a compiled
// function), inputs whose dims name those variables, and steps (op, operand
// value ids, attributes; value k is step k's result, inputs being steps too)
// interpreted three ways from one op table
// (tests/fuzz/op_table.h): by fusebox, by the float64 reference, and as the
// C++ text of a repro.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tests/fuzz/ref_array.h"

namespace fusebox::fuzz {

// Size assignments: 0 is every mode's first call; dynamic modes call again
// with 1 (and automatic dynamic with 2, once the dims are dynamic).
inline constexpr int kAssignments = 3;

struct Input {
  std::vector<int> dims;  // >= 0: a size variable; -1: size 1
  DType dtype = DType::kFloat32;
  bool transposed = false;  // passed as a transposed view of a contiguous tensor
  int data = 0;             // 0 normal, 1 positive, 2 coarse (k/4: ties)
};

inline constexpr int kInputOp = -1;  // a step that is the function's argument ints[0]

struct Step {
  int op = 0;              // index into OpTable(), or kInputOp
  std::vector<int> args;   // value ids; -1: an undefined Tensor (no weight)
  Dims ints;               // dims, starts, dtypes ...
  double scalar = 0;
  bool flag = false;       // keepdim, scalar on the left, operator spelling ...
};

struct Program {
  uint64_t seed = 0;
  std::vector<std::array<int64_t, kAssignments>> sizes;
  std::vector<Input> inputs;
  std::vector<Step> steps;
  std::vector<int> outputs;  // value ids (step indices)
  bool must_fail = false;    // the last step is invalid: fusebox must throw fusebox::Error
  bool alias = false;        // replay mode also calls with argument 1 the same tensor as argument 0

  Dims InputShape(int input, int assignment) const;
};

enum class Mode { kEager, kCompiled, kCached, kDynamic, kAutoDynamic, kReplay };
inline constexpr Mode kAllModes[] = {Mode::kEager, Mode::kCompiled, Mode::kCached,
                                     Mode::kDynamic, Mode::kAutoDynamic, Mode::kReplay};
const char* ModeName(Mode m);
bool ParseMode(const std::string& name, Mode* out);

// Classes of programs a run can leave out (known defects being fixed elsewhere).
struct Exclusions {
  bool zero_size = false;     // no size-0 dims
  bool zero_dim = false;      // no 0-d tensors
  bool mixed_dtype = false;   // one dtype per program
  bool alias = false;         // no aliased replay arguments
  bool must_fail = false;     // no programs that must throw
  bool matmul = false;
  bool size1_reduction = false;  // no reduction or norm whose rows have one element
  bool float_condition = false;  // no where() with a float condition (must fail: PyTorch wants bool)
};

struct GenOptions {
  int max_steps = 6;
  int max_inputs = 4;
  // Sizes drawn from this palette (few sizes: CPU kernels hit the compile cache).
  std::vector<int64_t> palette = {0, 1, 2, 3, 5, 8, 17, 33};
  bool allow_16bit = true;
  // Also draw cat, stack, chunk, split, gather and index_select (at argmax)
  // among the views (off by default, so the recorded seeds keep generating
  // the programs they found).
  bool data_movement = false;
  // Also draw the ops model code added (sin ... sign, clamp, masked_fill,
  // tril/triu: tests/fuzz/op_table_model.cc), off by default for the same reason.
  bool model_ops = false;
  Exclusions exclude;
};

Program Generate(uint64_t seed, const GenOptions& options);

}  // namespace fusebox::fuzz
