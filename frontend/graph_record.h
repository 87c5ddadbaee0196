// What explain() reports about one captured graph. Recorded on every call of a
// compiled function, so it holds references and values, not text: explain()
// renders the text when asked.
#pragma once

#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "backend/executable.h"
#include "tensor/tensor.h"

namespace fusebox::frontend {

// A graph input as a recompile reason compares it.
struct InputSignature {
  DType dtype;
  Shape shape;
  Strides strides;
  Device device;
  friend bool operator==(const InputSignature&, const InputSignature&) = default;
  std::string ToString() const;  // "float32[1024, 4096] strides [4096, 1] on cpu"
};

// "file.cc:42": where the user's call was, for messages.
std::string SourceLine(const std::source_location& loc);

struct GraphRecord {
  std::shared_ptr<const backend::Executable> executable;  // plan, graph, kernels, fusion notes
  std::vector<InputSignature> inputs;
  std::string end_reason;         // "end of compiled function", "item() called"
  std::source_location location;  // of the call that ended the graph
  bool from_cache = false;        // the plan was already compiled
};

// A graph break that ended no graph: nothing had been captured since the
// previous one (e.g. sort() of the function's input). explain() still lists
// it and stats() counts it.
struct EmptyBreakRecord {
  std::string reason;
  std::source_location location;
  size_t graphs_before = 0;  // how many graphs of the call ended before it
};

}  // namespace fusebox::frontend
