// Running a fuzz program: its inputs' data for one call (deterministic from
// the seed), the float64 reference of every value, and fusebox's outputs
// through the public API (the body a compiled function traces).
#pragma once

#include <cstdint>
#include <vector>

#include "frontend/fusebox.h"
#include "tests/fuzz/program.h"
#include "tests/fuzz/ref_array.h"

namespace fusebox::fuzz {

// Input `input`'s values for a call (`assignment` gives the sizes), already
// rounded to its dtype.
RefArray InputData(const Program& p, int input, int assignment, uint64_t call);
// Every value's reference given the inputs (throws RefError where PyTorch
// raises); `upto` < 0: all steps.
std::vector<RefArray> Reference(const Program& p, const std::vector<RefArray>& inputs, int upto = -1);
// The same inputs as fusebox tensors on `device` (a transposed input is a view).
Tensor ToTensor(const RefArray& data, const Input& input, Device device);
// The program's outputs computed by fusebox from its arguments.
std::vector<Tensor> RunFusebox(const Program& p, const std::vector<Tensor>& args);

}  // namespace fusebox::fuzz
