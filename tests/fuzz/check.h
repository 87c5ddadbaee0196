// Checking fuzz programs: one program in one mode (in this process, or in a
// forked child so a crash is a finding, not the end of the run), many seeds
// in batches of forked children, minimizing a failure, and printing it as a
// short C++ repro over the public API.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensor/device.h"
#include "tests/fuzz/program.h"

namespace fusebox::fuzz {

struct Outcome {
  // "" clean; else crash, exception, internal, foreign-exception, no-error,
  // shape, dtype, value, strides (compiled unlike eager), recompile.
  std::string kind;
  std::string detail;
  bool ok() const { return kind.empty(); }
};

Outcome RunProgram(const Program& p, Mode mode, Device device);
// RunProgram in a forked child; a signal (or a hang past `timeout_s`) is a "crash".
Outcome RunIsolated(const Program& p, Mode mode, Device device, int timeout_s = 120);

// Shrinks `p` (drops steps and outputs, smaller sizes, float32, contiguous
// inputs) while `fails` still says it fails the same way.
Program Minimize(Program p, const std::function<bool(const Program&)>& fails);
// A compilable C++ program that replays `p` in `mode` on `device`.
std::string Repro(const Program& p, Mode mode, Device device, const Outcome& why);

struct Finding {
  uint64_t seed;
  Mode mode;
  Outcome outcome;
};
struct RunSummary {
  std::vector<Finding> findings;
  int64_t clean[std::size(kAllModes)] = {};  // programs clean per mode
  int64_t must_fail = 0;                     // of the programs, those that had to throw
};

// Seeds [first, first + count) in each of `modes`, in forked children that a
// crash replaces with a new one from the next program.
RunSummary RunMany(uint64_t first, int64_t count, const std::vector<Mode>& modes, Device device,
                   const GenOptions& options, bool verbose);

std::string ProgramText(const Program& p);  // the steps, one per line, for logs
// "zero-size,zero-dim,mixed-dtype,alias,must-fail,matmul,size1-reduction,float-condition" into `out`; false on an unknown class.
bool ParseExclusions(const std::string& list, Exclusions* out);
// cuda_available(), asked in a child: a parent that initialized CUDA could not fork CUDA runs.
bool CudaAvailableInChild();

}  // namespace fusebox::fuzz
