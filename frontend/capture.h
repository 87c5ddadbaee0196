// Lazy capture. While a CaptureSession is current on a thread (inside a
// compile()d function, or for the duration of one eager op), ops record nodes
// into its graph instead of running. Concrete tensors an op touches are lifted
// to graph inputs; lazy tensors are views of graph nodes. Flush() compiles and
// runs what was captured and turns every live lazy value into storage; a
// tensor picks that storage up (Realize) the next time its data is needed.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "backend/kernel_info.h"
#include "frontend/graph_record.h"
#include "fusion/dynamic_shapes.h"
#include "graph/graph.h"
#include "tensor/tensor.h"

namespace fusebox::frontend {

class CaptureSession;

struct LazyValue {
  CaptureSession* session = nullptr;  // null once the session is gone
  graph::NodeId node = -1;
  // Filled by Flush(): the node's value, contiguous.
  std::shared_ptr<Storage> storage;
  int64_t storage_offset = 0;
  bool realized = false;
  std::string error;  // why it can never be realized (its capture failed)
};

class CaptureSession {
 public:
  explicit CaptureSession(bool eager);
  ~CaptureSession();
  CaptureSession(const CaptureSession&) = delete;
  CaptureSession& operator=(const CaptureSession&) = delete;

  // The session capturing on this thread (compile()), or null (eager mode).
  static CaptureSession* Current();
  bool eager() const { return eager_; }
  // CompileOptions::fullgraph: a graph break throws instead of flushing.
  void set_fullgraph(bool on) { fullgraph_ = on; }
  // CompileOptions::check_numerics: every graph is also run unfused and compared.
  void set_check_numerics(bool on) { check_numerics_ = on; }
  // CompileOptions::replay: records keep their graph's input tensors and
  // output nodes (GraphRecord::input_tensors, output_nodes).
  void set_keep_inputs(bool on) { keep_inputs_ = on; }
  // The compiled function's tensor arguments, to tell them from tensors it
  // reads from elsewhere (globals, captured weights) in explain().
  void add_argument(const TensorImpl* argument) { arguments_.push_back(argument); }
  // Which input dims of the `graph`-th graph of this call to keep dynamic
  // (run-time sizes), given its inputs; unset: none.
  using DynamicDimsFn = std::function<std::vector<fusion::InputDim>(size_t graph, const std::vector<Tensor>& inputs)>;
  void set_dynamic_dims(DynamicDimsFn fn) { dynamic_dims_ = std::move(fn); }
  // The last call's `graph`-th graph (an empty trace: none): each graph of
  // this call is captured following it (graph::GraphBuilder::Follow), and one
  // that repeats it runs its plan without hashing the graph or looking the
  // plan up.
  using LastGraphFn = std::function<LastGraphInfo(size_t graph)>;
  void set_last_graphs(LastGraphFn fn);
  // Called by the compiled function's end; every other flush is a graph break.
  void FlushAtEnd(const std::string& reason, const std::source_location& loc);

  // The graph node for `t` (same shape as `t`): a lifted input, a lazy node or
  // a view of one. Fixes the graph's device on first use.
  graph::NodeId Operand(const Tensor& t);
  // The node for `t.permute(order)`: an op whose result is laid out in another
  // order than row-major computes in memory order (frontend/ops.cc). A
  // concrete `t` permuted the same way again is the same graph input, so
  // `x * x` on a transposed x loads it once.
  graph::NodeId PermutedOperand(const Tensor& t, const std::vector<int64_t>& order);
  graph::NodeId Constant(double value, DType dtype, const Shape& shape);
  graph::NodeId AddNode(graph::Node node) { return builder_.Add(std::move(node)); }
  // A lazy tensor over `node`.
  Tensor MakeLazy(graph::NodeId node, Device device);
  // The device of the graph (the first tensor's), if one was lifted yet.
  bool has_device() const { return has_device_; }
  // Fixes the graph's device to `device` for nodes that lift no tensor
  // (iota); a graph already on another device is a user error naming `op`.
  void UseDevice(Device device, const char* op);
  Device device() const { return builder_.device(); }

  // The graph captured so far with `outputs` (lazy tensors of this session)
  // as its outputs, without running it: for tests and tools.
  graph::Graph Snapshot(const std::vector<Tensor>& outputs) const;

  // Runs everything captured so far and realizes every live lazy value.
  void Flush(const std::string& reason, const std::source_location& loc);

  // One per flush of a compiled function (eager sessions record nothing).
  const std::vector<GraphRecord>& records() const { return records_; }
  std::vector<GraphRecord> TakeRecords() { return std::move(records_); }
  // Graph breaks with nothing captured before them (no graph to record).
  const std::vector<EmptyBreakRecord>& empty_breaks() const { return empty_breaks_; }
  int64_t kernel_compiles() const { return kernel_compiles_; }
  const CompileTimes& compile_times() const { return compile_times_; }

 private:
  void Reset();
  // Starts following the last call's graph at this graph's index, if any.
  void FollowLastGraph();
  InputSignature Signature(const Tensor& input) const;
  bool eager_;
  bool fullgraph_ = false;
  bool check_numerics_ = false;
  bool keep_inputs_ = false;
  std::vector<const TensorImpl*> arguments_;
  DynamicDimsFn dynamic_dims_;
  LastGraphFn last_graphs_;
  bool at_end_ = false;
  CaptureSession* previous_ = nullptr;  // restored on destruction
  graph::GraphBuilder builder_;
  bool has_device_ = false;
  std::vector<Tensor> inputs_;  // by input_index; keeps lifted tensors alive
  absl::flat_hash_map<const TensorImpl*, graph::NodeId> lifted_;
  // PermutedOperand of concrete tensors: (tensor, order) -> node; the
  // tensors are held so no other tensor reuses their address meanwhile.
  absl::flat_hash_map<std::pair<const TensorImpl*, std::vector<int64_t>>, graph::NodeId> permuted_;
  std::vector<Tensor> permuted_sources_;
  // By input_index: the tensor explain() and recompile reasons describe,
  // the input itself or, for a permuted one, the tensor the op was given.
  std::vector<Tensor> shown_inputs_;
  std::vector<std::weak_ptr<LazyValue>> lazy_values_;
  std::vector<GraphRecord> records_;
  std::vector<EmptyBreakRecord> empty_breaks_;
  int64_t kernel_compiles_ = 0;
  CompileTimes compile_times_;
};

// Runs ops eagerly on this thread while it lives, even inside compile(): an op
// with no codegen computes on concrete tensors after its graph break, and the
// ops it uses itself (copies, a custom op's body) are not captured.
class EagerScope {
 public:
  EagerScope();
  ~EagerScope();
  EagerScope(const EagerScope&) = delete;
  EagerScope& operator=(const EagerScope&) = delete;

 private:
  CaptureSession* saved_;
};

// While one lives on a thread, ops there record row-major (contiguous)
// results whatever their operands' layout: for composite ops (softmax,
// layer_norm, mean, ...) whose PyTorch kernel allocates a contiguous result,
// so their pieces keep the order their reductions walk.
class ContiguousResultsScope {
 public:
  ContiguousResultsScope();
  ~ContiguousResultsScope();
  ContiguousResultsScope(const ContiguousResultsScope&) = delete;
  ContiguousResultsScope& operator=(const ContiguousResultsScope&) = delete;
  static bool active();
};

// Records one op: inside compile() into the current session, else into a
// one-op session that Finish() runs at once (eager mode).
class OpRecorder {
 public:
  OpRecorder();
  CaptureSession& session() { return *session_; }
  // The op's result: lazy under compile(), computed in eager mode.
  Tensor Finish(graph::NodeId node, Device device, const char* op_name);

 private:
  CaptureSession* session_;
  std::optional<CaptureSession> eager_;
};

// A graph break not caused by reading one tensor (an op with no codegen, an
// in-place op): inside compile() everything captured so far is compiled and
// run (with fullgraph, an error naming `reason` and `loc`); outside, nothing
// happens.
void BreakGraph(const std::string& reason, const std::source_location& loc);

// Makes `impl` concrete: adopts its flushed value, flushing its session first
// when needed (a graph break, `reason` says why). No-op on concrete tensors.
void Realize(TensorImpl& impl, const char* reason, const std::source_location& loc);
// Adopts `t`'s value if its graph already ran (a compiled call's result),
// flushing nothing. A compiled call does it for its results on its own
// thread, before they can reach others: two threads' first reads of a lazy
// result would both write it (Realize).
void AdoptIfRealized(const Tensor& t);

}  // namespace fusebox::frontend
