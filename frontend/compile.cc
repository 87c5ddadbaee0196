#include "frontend/compile.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/capture.h"
#include "frontend/explain_dot.h"
#include "frontend/numerics_check.h"
#include "spdlog/spdlog.h"
#include "tensor/debug.h"

namespace fusebox::frontend {

bool CapturingNow() { return CaptureSession::Current() != nullptr; }

bool CompiledState::checks_numerics() const { return options_.check_numerics || CheckNumericsFromEnv(); }

CallScope::CallScope(CompiledState* state) : state_(state) {
  if (state->runs_eagerly()) return;
  session_ = std::make_unique<CaptureSession>(/*eager=*/false);
  session_->set_fullgraph(state->options().fullgraph);
  session_->set_check_numerics(state->checks_numerics());
  session_->set_keep_inputs(state->options().replay);
  session_->set_dynamic_dims(
      [state](size_t graph, const std::vector<Tensor>& inputs) { return state->DynamicDims(graph, inputs); });
  session_->set_last_graphs([state](size_t graph) { return state->LastGraph(graph); });
}

CallScope::~CallScope() = default;

void CallScope::NoteArgument(const Tensor& t) {
  if (session_ && t.defined()) session_->add_argument(&t.impl());
}

TracedCall CallScope::Finish(const std::source_location& loc) {
  if (session_) session_->FlushAtEnd(kEndOfFunction, loc);
  return state_->EndCall(session_.get());
}

namespace {

// Why graph `g` of this call needed a new plan, compared with the last call's
// graph `g`: the inputs that changed, or else the captured ops themselves.
std::string RecompileReason(size_t g, const GraphRecord& before, const GraphRecord& now) {
  std::vector<std::string> changes;
  if (before.inputs.size() != now.inputs.size()) {
    changes.push_back(absl::StrCat("number of inputs ", before.inputs.size(), " -> ", now.inputs.size()));
  } else {
    for (size_t k = 0; k < now.inputs.size(); ++k) {
      if (!(before.inputs[k] == now.inputs[k])) {
        changes.push_back(
            absl::StrCat("input ", k, ": ", before.inputs[k].ToString(), " -> ", now.inputs[k].ToString()));
      }
    }
  }
  if (changes.empty()) changes.push_back("the captured ops or constants changed");
  const fusion::DimSymbols& symbols = now.executable->plan().symbols;
  return absl::StrCat("graph ", g, ": ", absl::StrJoin(changes, "; "),
                      symbols.empty() ? "" : absl::StrCat(" (now dynamic: ", absl::StrJoin(DescribeSymbols(symbols), ", "), ")"));
}

}  // namespace

bool CompiledState::runs_eagerly() const {
  MutexLock lock(&mu_);
  return RunsEagerlyLocked();
}

LastGraphInfo CompiledState::LastGraph(size_t graph) const {
  MutexLock lock(&mu_);
  if (graph >= last_graphs_.size()) return {};
  const GraphRecord& r = last_graphs_[graph];
  return {.trace = r.trace, .dynamic = r.dynamic, .executable = r.executable};
}

std::vector<fusion::InputDim> CompiledState::DynamicDims(size_t graph, const std::vector<Tensor>& inputs) {
  if (options_.dynamic == false) return {};
  MutexLock lock(&mu_);
  if (seen_shapes_.size() <= graph) {
    seen_shapes_.resize(graph + 1);
    dynamic_dims_.resize(graph + 1);
  }
  std::vector<fusion::InputDim>& dims = dynamic_dims_[graph];
  std::vector<Shape>& seen = seen_shapes_[graph];
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Shape& shape = inputs[k].shape();
    for (size_t d = 0; d < shape.size(); ++d) {
      const fusion::InputDim dim{static_cast<int32_t>(k), static_cast<int32_t>(d)};
      const bool changed = k < seen.size() && seen[k].size() == shape.size() && seen[k][d] != shape[d];
      if ((options_.dynamic == true || changed) && std::find(dims.begin(), dims.end(), dim) == dims.end()) {
        dims.push_back(dim);
      }
    }
  }
  seen.assign(inputs.size(), {});
  for (size_t k = 0; k < inputs.size(); ++k) seen[k] = inputs[k].shape();
  return dims;
}

TracedCall CompiledState::EndCall(CaptureSession* session) {
  TracedCall call;
  std::vector<GraphRecord> graphs;
  if (session != nullptr) graphs = session->TakeRecords();
  call.eager = session == nullptr;
  call.graphs = graphs.size();
  call.breaks = session == nullptr ? 0 : static_cast<int64_t>(session->empty_breaks().size());
  for (const GraphRecord& r : graphs) call.breaks += r.end_reason == kEndOfFunction ? 0 : 1;
  // The inputs must not outlive the call (they may be large): only this
  // call's replay candidate sees them.
  if (graphs.size() == 1 && call.breaks == 0 && options_.replay) call.graph = graphs[0];
  for (GraphRecord& r : graphs) r.input_tensors.clear();
  MutexLock lock(&mu_);
  ++stats_.calls;
  if (session == nullptr) {
    ++stats_.eager_calls;
    return call;
  }
  // kernels() copies each kernel's source and PTX: only when the plans differ
  // from the last call's (a cache hit with the same plans is the common call).
  bool same_plans = graphs.size() == last_graphs_.size();
  for (size_t g = 0; same_plans && g < graphs.size(); ++g) {
    same_plans = graphs[g].executable == last_graphs_[g].executable;
  }
  if (!same_plans) {
    last_kernels_.clear();
    for (const GraphRecord& r : graphs) {
      last_kernels_.insert(last_kernels_.end(), r.executable->kernels().begin(), r.executable->kernels().end());
    }
  }
  for (size_t g = 0; g < graphs.size() && g < last_graphs_.size(); ++g) {
    if (graphs[g].from_cache) continue;
    // Bounded by the plan cache itself (kMaxValuePlans): no recompile.
    if (graphs[g].for_other_values) {
      value_replans_.push_back(absl::StrCat("graph ", g, ": the input values its plan judged a mask on changed"));
      continue;
    }
    recompiles_.push_back(RecompileReason(g, last_graphs_[g], graphs[g]));
    spdlog::debug("recompile: {}", recompiles_.back());
    if (DebugDump("recompiles")) std::fprintf(stderr, "[fusebox recompiles] %s\n", recompiles_.back().c_str());
    if (RunsEagerlyLocked()) {
      spdlog::warn("fusebox: a compiled function reached its recompile limit ({}); it runs eagerly from now on. "
                   "Last recompile: {}. Shapes that keep changing can be made dynamic with CompileOptions{{.dynamic = true}}",
                   options_.recompile_limit, recompiles_.back());
      break;
    }
  }
  last_graphs_ = std::move(graphs);
  last_numerics_.clear();
  for (const GraphRecord& r : last_graphs_) last_numerics_.insert(last_numerics_.end(), r.numerics.begin(), r.numerics.end());
  last_empty_breaks_ = session->empty_breaks();
  // Every graph but the one the function's end flushed was ended by a break;
  // breaks with nothing captured before them ended no graph but count too.
  last_breaks_ = call.breaks;
  stats_.graphs += static_cast<int64_t>(last_graphs_.size());
  stats_.graph_breaks += last_breaks_;
  for (const GraphRecord& r : last_graphs_) {
    ++(r.from_cache ? stats_.cache_hits : stats_.plan_compiles);
    if (r.repeated) ++stats_.repeated_graphs;
  }
  stats_.kernel_compiles += session->kernel_compiles();
  stats_.times += session->compile_times();
  return call;
}

std::vector<Tensor> CompiledState::Replay(std::shared_ptr<const ReplayEntry> entry_ptr,
                                          std::span<const Tensor* const> args) {
  const ReplayEntry& entry = *entry_ptr;
  std::vector<Tensor> results = RunReplay(entry, args);  // unlocked: calls run in parallel
  MutexLock lock(&mu_);
  ++stats_.calls;
  ++stats_.replays;
  replay_status_ = "the last call replayed its recorded plan (no tracing)";
  // kernels() and explain() describe the last call: the replayed graph.
  if (last_graphs_.size() != 1 || last_graphs_[0].executable != entry.record.executable || last_breaks_ != 0) {
    last_graphs_ = {entry.record};
    last_kernels_ = entry.record.executable->kernels();
    last_numerics_.clear();
    last_empty_breaks_.clear();
    last_breaks_ = 0;
  }
  return results;
}

void CompiledState::ResetReplays() {
  MutexLock lock(&mu_);
  replays_.clear();
  replay_pending_.clear();
  replay_status_ = "the recorded plans were reset (reset_replays())";
}

void CompiledState::NoteNotReplayable(const char* why) {
  MutexLock lock(&mu_);
  if (replay_status_.empty()) replay_status_ = absl::StrCat("calls are traced and never replayed: ", why);  // once
}

void CompiledState::NoteReplayCandidate(std::vector<ArgGuard> guards, std::span<const Tensor> args,
                                        std::span<const Tensor* const> results, TracedCall call) {
  ReplayCandidate candidate;
  if (call.eager || runs_eagerly()) {
    candidate.why_not = "the recompile limit was reached (calls run eagerly)";
  } else if (checks_numerics()) {
    candidate.why_not = "the numerics check traces every call";
  } else if (!call.graph) {
    candidate.why_not = absl::StrCat("the call captured ", call.graphs, " graph(s) with ", call.breaks,
                                     " graph break(s); only a single graph is replayed");
  } else {
    candidate = MakeReplayCandidate(std::move(guards), args, results, *call.graph, call.graph->input_tensors);
  }
  call.graph.reset();  // its input tensors
  MutexLock lock(&mu_);
  if (!candidate.why_not.empty()) {
    replay_status_ = absl::StrCat("the last call was traced, and cannot be replayed: ", candidate.why_not);
    replay_pending_.clear();
    return;
  }
  const auto pending = std::find_if(replay_pending_.begin(), replay_pending_.end(),
                                    [&](const ReplayEntry& e) { return SameReplay(e, candidate.entry); });
  if (pending != replay_pending_.end()) {
    // Another thread may have confirmed the same entry since this call looked.
    const bool known = std::any_of(replays_.begin(), replays_.end(), [&](const auto& e) {
      return SameReplay(*e, candidate.entry);
    });
    if (!known && static_cast<int>(replays_.size()) < options_.recompile_limit) {
      replays_.push_back(std::make_shared<const ReplayEntry>(std::move(candidate.entry)));
    }
    replay_pending_.erase(pending);
    replay_status_ = "the last call was traced and confirmed an earlier one: calls like it now replay";
    return;
  }
  // Said when the call is like a pending one but for what it read (the
  // usual reason a model's calls never replay), not merely another call.
  std::string difference;
  for (auto it = replay_pending_.rbegin(); it != replay_pending_.rend() && difference.empty(); ++it) {
    difference = ReplayDifference(*it, candidate.entry);
  }
  if (replay_pending_.size() == kMaxPendingReplays) replay_pending_.erase(replay_pending_.begin());
  replay_pending_.push_back(std::move(candidate.entry));
  replay_status_ = difference.empty() ? "the last call was traced (a second call like it makes it replay)"
                                      : absl::StrCat("the last call was traced and did not confirm the one before: ",
                                                     difference);
}

std::vector<KernelInfo> CompiledState::last_kernels() const {
  MutexLock lock(&mu_);
  return last_kernels_;
}

std::vector<KernelNumerics> CompiledState::last_numerics() const {
  MutexLock lock(&mu_);
  return last_numerics_;
}

CompileStats CompiledState::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

std::string CompiledState::Explain() const {
  MutexLock lock(&mu_);
  std::string out = absl::StrCat("compiled function: ", stats_.calls, " call(s); last call captured ", last_graphs_.size(),
                                 " graph(s), ", last_breaks_, " graph break(s), ", last_kernels_.size(),
                                 " kernel launch(es)\n");
  for (const std::string& why : recompiles_) absl::StrAppend(&out, "recompiled: ", why, "\n");
  for (const std::string& why : value_replans_) absl::StrAppend(&out, "planned again: ", why, "\n");
  if (options_.replay) {
    absl::StrAppend(&out, "replay: ", stats_.replays, " call(s) replayed, ", replays_.size(), " recorded",
                    stale_replays_ > 0 ? absl::StrCat(", ", stale_replays_, " dropped (a tensor read from outside the "
                                                      "arguments was rebound)")
                                       : "",
                    "; ", replay_status_, "\n");
  }
  if (RunsEagerlyLocked()) {
    absl::StrAppend(&out, "recompile limit (", options_.recompile_limit, ") reached: ", stats_.eager_calls,
                    " call(s) ran eagerly since\n");
  }
  // Breaks that ended no graph, in call order: the ones before graph `g`.
  auto empty_breaks_before = [&](size_t g) {
    for (const EmptyBreakRecord& b : last_empty_breaks_) {
      if (b.graphs_before != g) continue;
      absl::StrAppend(&out, "\ngraph break with no ops captured before it: ", b.reason, " at ", SourceLine(b.location),
                      "\n");
    }
  };
  for (size_t g = 0; g < last_graphs_.size(); ++g) {
    empty_breaks_before(g);
    const GraphRecord& r = last_graphs_[g];
    const fusion::Plan& plan = r.executable->plan();
    std::map<std::string, int> counts;
    int num_ops = 0;
    for (const graph::Node& n : plan.graph.nodes()) {
      const graph::OpKind kind = graph::Info(n.op).kind;
      if (kind != graph::OpKind::kPointwise && kind != graph::OpKind::kReduction) continue;
      ++counts[graph::OpName(n.op)];
      ++num_ops;
    }
    std::vector<std::string> ops, kernels;
    for (const auto& [op, n] : counts) ops.push_back(n > 1 ? absl::StrCat(op, " x", n) : op);
    for (const KernelInfo& k : r.executable->kernels()) kernels.push_back(k.name);
    absl::StrAppend(&out, "\ngraph ", g, ": ", num_ops, " op(s) (", absl::StrJoin(ops, ", "), ") -> ",
                    kernels.size(), " kernel(s)", r.from_cache ? " [plan from cache]" : "", "\n");
    absl::StrAppend(&out, "  ended by: ", r.end_reason,
                    r.end_reason == kEndOfFunction ? "" : absl::StrCat(" at ", SourceLine(r.location)), "\n");
    absl::StrAppend(&out, "  kernels: ", absl::StrJoin(kernels, ", "), "\n");
    for (const KernelInfo& k : r.executable->kernels()) {
      if (!k.schedule.empty()) absl::StrAppend(&out, "  schedule: ", k.name, ": ", k.schedule, "\n");
    }
    for (const KernelNumerics& n : r.numerics) {
      absl::StrAppend(&out, "  numerics: ", n.kernel, ": ", DescribeNumerics(n), "\n");
    }
    for (size_t k = 0; k < r.inputs.size(); ++k) absl::StrAppend(&out, "  input ", k, " = ", r.inputs[k].Describe(), "\n");
    for (const std::string& s : DescribeSymbols(plan.symbols)) absl::StrAppend(&out, "  run-time size: ", s, "\n");
    // Why a dim seen with two sizes still recompiles per size.
    for (const std::string& s : plan.symbols.kept_static) absl::StrAppend(&out, "  ", s, "\n");
    for (const std::string& note : plan.graph_notes) absl::StrAppend(&out, "  ", note, "\n");
    for (const std::string& note : plan.notes) absl::StrAppend(&out, "  not fused: ", note, "\n");
    absl::StrAppend(&out, "  graph:\n", plan.graph.ToString());
  }
  empty_breaks_before(last_graphs_.size());
  return out;
}

std::string CompiledState::ExplainDot() const {
  MutexLock lock(&mu_);
  return RenderDot(last_graphs_, last_empty_breaks_);
}

}  // namespace fusebox::frontend
