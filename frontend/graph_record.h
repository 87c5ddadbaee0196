// What explain() reports about one captured graph. Recorded on every call of a
// compiled function, so it holds references and values, not text: explain()
// renders the text when asked.
#pragma once

#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "backend/executable.h"
#include "backend/kernel_info.h"
#include "fusion/dynamic_shapes.h"
#include "graph/graph.h"
#include "tensor/tensor.h"

namespace fusebox::frontend {

// A graph input: what its plan was compiled for (the guards a recompile
// reason compares), and where the tensor came from.
struct InputSignature {
  DType dtype;
  Shape shape;
  Strides strides;
  Device device;
  // Which argument of the compiled function this is (or a view of), or -1:
  // a tensor the function reads from elsewhere (a global, a captured weight).
  int32_t argument = -1;
  const TensorImpl* identity = nullptr;  // which tensor (compared, never read)
  uint64_t version = 0;                  // its in-place version when read
  bool rng_state = false;                // a random op's generator state (frontend/random.h)
  friend bool operator==(const InputSignature& a, const InputSignature& b) {
    return a.dtype == b.dtype && a.shape == b.shape && a.strides == b.strides && a.device == b.device;
  }
  std::string ToString() const;  // "float32[1024, 4096] strides [4096, 1] on cpu"
  // ToString plus where it came from: "argument 0: ..." / "global tensor: ...".
  std::string Describe() const;
};

// The end reason of the graph a compiled function's return flushed; every
// other graph was ended by a graph break.
inline constexpr char kEndOfFunction[] = "end of compiled function";

// "file.cc:42": where the user's call was, for messages.
std::string SourceLine(const std::source_location& loc);

struct GraphRecord {
  std::shared_ptr<const backend::Executable> executable;  // plan, graph, kernels, fusion notes
  std::vector<InputSignature> inputs;
  std::string end_reason;         // "end of compiled function", "item() called"
  std::source_location location;  // of the call that ended the graph
  bool from_cache = false;        // the plan was already compiled
  bool for_other_values = false;  // planned for input values its cached plan did not assume (RunResult)
  std::vector<KernelNumerics> numerics;  // check_numerics: one per kernel, else empty
  // The captured graph (with the order its nodes came in) and the dynamic
  // dims it was planned with: the next call's capture follows it, and when
  // it repeats the graph exactly, runs `executable` with no cache lookup.
  std::shared_ptr<const graph::Trace> trace;
  std::vector<fusion::InputDim> dynamic;
  bool repeated = false;  // it was the last call's graph, and ran its plan
  // CompileOptions::replay only, until the call ends: the graph's input
  // tensors, and the captured node of each of its outputs, in the order the
  // plan returns them (frontend/replay.h).
  std::vector<Tensor> input_tensors;
  std::vector<graph::NodeId> output_nodes;
};

// What the next call's capture takes of the last call's graph: the trace to
// follow, and the plan to run when it repeats that graph with the same
// dynamic dims. A copy (shared pointers), so another thread's call can
// replace the record while this call follows it.
struct LastGraphInfo {
  std::shared_ptr<const graph::Trace> trace;
  std::vector<fusion::InputDim> dynamic;
  std::shared_ptr<const backend::Executable> executable;
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
