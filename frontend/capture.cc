#include "frontend/capture.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "frontend/runtime.h"
#include "tensor/debug.h"
#include "spdlog/spdlog.h"

namespace fusebox::frontend {
namespace {

thread_local CaptureSession* current_session = nullptr;
thread_local int contiguous_results_depth = 0;

}  // namespace

std::string SourceLine(const std::source_location& loc) {
  std::string_view file = loc.file_name();
  if (size_t slash = file.rfind('/'); slash != std::string_view::npos) file.remove_prefix(slash + 1);
  return absl::StrCat(std::string(file), ":", loc.line());
}

std::string InputSignature::ToString() const {
  return absl::StrCat(DTypeName(dtype), ShapeToString(shape), " strides ", ShapeToString(strides), " on ",
                      device.str());
}

std::string InputSignature::Describe() const {
  if (rng_state) return absl::StrCat("random generator state (seed, offset), drawn per call: ", ToString());
  return argument >= 0 ? absl::StrCat("argument ", argument, ": ", ToString())
                       : absl::StrCat("global tensor (not an argument): ", ToString(), ", version ", version);
}

InputSignature CaptureSession::Signature(const Tensor& t) const {
  InputSignature sig{t.dtype(), t.shape(), t.strides(), t.device()};
  sig.identity = &t.impl();
  sig.version = t.version();
  sig.rng_state = t.impl().rng_state;
  for (size_t k = 0; k < arguments_.size() && sig.argument < 0; ++k) {
    // A view of an argument (x.transpose(0, 1)) reads the argument too.
    if (arguments_[k] == &t.impl() || (arguments_[k]->storage && arguments_[k]->storage == t.impl().storage)) {
      sig.argument = static_cast<int32_t>(k);
    }
  }
  return sig;
}

CaptureSession::CaptureSession(bool eager) : eager_(eager) {
  if (!eager_) {
    previous_ = current_session;
    current_session = this;
    lazy_values_.reserve(16);  // a small function's values without regrowing
  }
}

CaptureSession::~CaptureSession() {
  if (!eager_) current_session = previous_;
  // Anything never flushed (the user's function threw) can never be computed.
  for (auto& weak : lazy_values_) {
    if (auto v = weak.lock(); v && !v->realized) {
      v->session = nullptr;
      v->error = "this tensor was captured by a compiled call that did not finish (it threw)";
    }
  }
}

CaptureSession* CaptureSession::Current() { return current_session; }

void CaptureSession::Reset() {
  builder_ = graph::GraphBuilder(builder_.device());
  inputs_.clear();
  lifted_.clear();
  permuted_.clear();
  permuted_sources_.clear();
  shown_inputs_.clear();
  lazy_values_.clear();
  FollowLastGraph();
}

void CaptureSession::set_last_graphs(LastGraphFn fn) {
  last_graphs_ = std::move(fn);
  if (builder_.size() == 0) FollowLastGraph();
}

void CaptureSession::FollowLastGraph() {
  if (!last_graphs_) return;
  LastGraphInfo last = last_graphs_(records_.size());
  if (last.trace) builder_.Follow(std::move(last.trace));
}

graph::NodeId CaptureSession::Operand(const Tensor& t) {
  TensorImpl& impl = t.impl();
  if (impl.lazy && (impl.lazy->realized || impl.lazy->session != this)) {
    Realize(impl, "a tensor from an earlier graph is used", std::source_location::current());
  }
  if (!has_device_) {
    builder_.set_device(impl.device);
    has_device_ = true;
  }
  if (!impl.lazy) {
    if (auto it = lifted_.find(&impl); it != lifted_.end()) return it->second;
    graph::Node node{.op = graph::Op::kInput, .dtype = impl.dtype, .shape = impl.shape,
                     .input_index = static_cast<int32_t>(inputs_.size()), .strides = impl.strides};
    const graph::NodeId id = builder_.Add(std::move(node));
    inputs_.push_back(t);
    shown_inputs_.push_back(t);
    lifted_.emplace(&impl, id);
    return id;
  }
  const graph::NodeId base = impl.lazy->node;
  const graph::Node& base_node = builder_.node(base);
  if (impl.shape == base_node.shape && impl.offset == 0 && IsContiguous(impl.shape, impl.strides)) return base;
  return builder_.Add(graph::Node{.op = graph::Op::kView, .dtype = impl.dtype, .shape = impl.shape,
                                  .inputs = {base}, .strides = impl.strides, .offset = impl.offset});
}

void CaptureSession::UseDevice(Device device, const char* op) {
  if (!has_device_ || builder_.size() == 0) {
    builder_.set_device(device);
    has_device_ = true;
  }
  FUSEBOX_ENSURE(builder_.device() == device, op, ": expected all tensors on one device, got ", device.str(),
                 " in a graph on ", builder_.device().str(), "; move them with .to(Device) first");
}

graph::NodeId CaptureSession::PermutedOperand(const Tensor& t, const std::vector<int64_t>& order) {
  if (t.impl().lazy) return Operand(t.permute(order));  // a view of its node
  auto [it, inserted] = permuted_.try_emplace({&t.impl(), order}, -1);
  if (inserted) {
    const size_t lifted = inputs_.size();
    it->second = Operand(t.permute(order));
    if (inputs_.size() > lifted) shown_inputs_.back() = t;
    permuted_sources_.push_back(t);
  }
  return it->second;
}

graph::NodeId CaptureSession::Constant(double value, DType dtype, const Shape& shape) {
  return builder_.Add(graph::Node{.op = graph::Op::kConstant, .dtype = dtype, .shape = shape, .scalar = value});
}

Tensor CaptureSession::MakeLazy(graph::NodeId node, Device device) {
  const graph::Node& n = builder_.node(node);
  auto value = std::make_shared<LazyValue>();
  value->session = this;
  value->node = node;
  lazy_values_.push_back(value);
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = n.shape;
  impl->strides = ContiguousStrides(n.shape);
  impl->dtype = n.dtype;
  impl->device = device;
  impl->lazy = std::move(value);
  return Tensor(std::move(impl));
}

graph::Graph CaptureSession::Snapshot(const std::vector<Tensor>& outputs) const {
  std::vector<graph::NodeId> ids;
  for (const Tensor& t : outputs) {
    FUSEBOX_ENSURE(t.impl().lazy && t.impl().lazy->session == this, "Snapshot: ", t.str(),
                   " is not a value captured by this session");
    ids.push_back(t.impl().lazy->node);
  }
  return builder_.Build(std::move(ids));
}

void CaptureSession::FlushAtEnd(const std::string& reason, const std::source_location& loc) {
  at_end_ = true;
  Flush(reason, loc);
}

void CaptureSession::Flush(const std::string& reason, const std::source_location& loc) {
  FUSEBOX_ENSURE(!fullgraph_ || at_end_ || eager_, "graph break with fullgraph=true: ", reason, " at ",
                 SourceLine(loc), "; remove the call that needs a concrete value inside the compiled function, "
                 "or compile with CompileOptions{.fullgraph = false}");
  std::vector<std::shared_ptr<LazyValue>> pending;
  std::vector<graph::NodeId> outputs;
  for (auto& weak : lazy_values_) {
    auto v = weak.lock();
    if (!v || v->realized) continue;
    pending.push_back(v);
    if (std::find(outputs.begin(), outputs.end(), v->node) == outputs.end()) outputs.push_back(v->node);
  }
  if (outputs.empty()) {
    if (!eager_ && !at_end_) {
      empty_breaks_.push_back({.reason = reason, .location = loc, .graphs_before = records_.size()});
      InitLogging();  // no graph may have run yet, and RunGraph is what configures the logger
      spdlog::debug("graph break ({}, {}) with no ops captured before it", reason, SourceLine(loc));
    }
    Reset();
    return;
  }
  const std::vector<fusion::InputDim> dynamic =
      dynamic_dims_ ? dynamic_dims_(records_.size(), inputs_) : std::vector<fusion::InputDim>{};
  // The builder is reset below anyway: move its nodes into the graph. A
  // compiled call's graph is kept (with its trace) in its record for the next
  // call to follow; one that repeated the last call's graph runs that plan as
  // is. If the graph fails (a compiler error, out of memory), its values can
  // never be computed: they say why, and the session starts over.
  RunResult run;
  std::shared_ptr<const graph::Trace> trace;
  RunOptions options{.dynamic = dynamic, .eager_op = eager_ ? std::string_view(reason) : std::string_view(),
                     .check_numerics = check_numerics_ && !eager_};
  try {
    if (eager_) {
      run = RunGraph(std::move(builder_).Build(outputs), inputs_, options);
    } else {
      if (std::shared_ptr<const graph::Trace> repeated = builder_.Repeated(outputs)) {
        const LastGraphInfo last = last_graphs_ ? last_graphs_(records_.size()) : LastGraphInfo{};
        if (last.trace == repeated && last.dynamic == dynamic) {
          trace = std::move(repeated);
          options.known_plan = last.executable;
        }
      }
      if (!trace) trace = std::make_shared<const graph::Trace>(std::move(builder_).BuildTrace(outputs));
      run = RunGraph(trace->graph, inputs_, options);
    }
  } catch (const std::exception& e) {
    for (auto& v : pending) {
      v->session = nullptr;
      v->error = absl::StrCat("the graph computing this tensor failed: ", e.what());
    }
    Reset();
    throw;
  }
  kernel_compiles_ += run.kernel_compiles;
  compile_times_ += run.compile_times;
  if (!eager_) {
    GraphRecord record{.executable = run.executable, .end_reason = reason, .location = loc,
                       .from_cache = run.plan_cache_hit, .for_other_values = run.for_other_values,
                       .numerics = std::move(run.numerics),
                       .trace = std::move(trace), .dynamic = dynamic,
                       // It ran that plan (not one for other input values: value_guards).
                       .repeated = options.known_plan != nullptr && run.executable == options.known_plan};
    for (const Tensor& in : shown_inputs_) record.inputs.push_back(Signature(in));
    if (keep_inputs_) {
      record.input_tensors = inputs_;
      record.output_nodes = outputs;
    }
    records_.push_back(std::move(record));
    if (spdlog::should_log(spdlog::level::debug)) {  // SourceLine builds a string
      spdlog::debug("graph {} ended ({}, {}): {} kernel(s)", records_.size() - 1, reason, SourceLine(loc),
                    run.executable->kernels().size());
    }
  }
  for (auto& v : pending) {
    const size_t k = std::find(outputs.begin(), outputs.end(), v->node) - outputs.begin();
    const Tensor& out = run.outputs[k];
    FUSEBOX_CHECK(out.is_contiguous(), "materialized value %", v->node, " is not contiguous");
    v->storage = out.impl().storage;
    v->storage_offset = out.storage_offset();
    v->realized = true;
    v->session = nullptr;
  }
  Reset();
}

OpRecorder::OpRecorder() : session_(CaptureSession::Current()) {
  if (session_ == nullptr) session_ = &eager_.emplace(/*eager=*/true);
}

Tensor OpRecorder::Finish(graph::NodeId node, Device device, const char* op_name) {
  Tensor out = session_->MakeLazy(node, device);
  if (eager_) {
    eager_->Flush(op_name, std::source_location::current());
    Realize(out.impl(), op_name, std::source_location::current());
  }
  return out;
}

ContiguousResultsScope::ContiguousResultsScope() { ++contiguous_results_depth; }
ContiguousResultsScope::~ContiguousResultsScope() { --contiguous_results_depth; }
bool ContiguousResultsScope::active() { return contiguous_results_depth > 0; }

EagerScope::EagerScope() : saved_(current_session) { current_session = nullptr; }
EagerScope::~EagerScope() { current_session = saved_; }

void BreakGraph(const std::string& reason, const std::source_location& loc) {
  if (CaptureSession* session = CaptureSession::Current()) session->Flush(reason, loc);
}

void AdoptIfRealized(const Tensor& t) {
  if (t.defined() && t.impl().lazy && t.impl().lazy->realized) {
    Realize(t.impl(), "a compiled call returns it", std::source_location::current());
  }
}

void Realize(TensorImpl& impl, const char* reason, const std::source_location& loc) {
  if (!impl.lazy) return;
  LazyValue& v = *impl.lazy;
  if (!v.realized) {
    FUSEBOX_ENSURE(v.session != nullptr, v.error.empty() ? "tensor can no longer be computed" : v.error);
    v.session->Flush(reason, loc);
  }
  FUSEBOX_CHECK(v.realized, "flush did not realize node %", v.node);
  impl.storage = v.storage;
  impl.offset += v.storage_offset;
  impl.lazy.reset();
}

}  // namespace fusebox::frontend
