// fusebox::compile(fn): calls fn with lazy capture on, so its tensor ops build
// a graph; at the end (or at a graph break) the graph is fused, compiled or
// fetched from the cache, and run. The function is traced again on every call
// (C++ has no bytecode to guard on); tracing only records nodes, and the
// captured graph's structure finds the compiled plan in the cache.
//
// Threads: a compiled function may be called from several threads at once
// (as a torch.compile'd module). Each call traces fn on its own thread (the
// capture is thread-local) and runs its kernels there, in parallel; only the
// bookkeeping calls share (stats, seen shapes, dynamic dims, the last graphs,
// replay entries) is locked. kernels(), explain(), numerics(), stats() may be
// read meanwhile: copies of the latest finished call. fn itself runs at once
// on several threads: what it touches besides its arguments is yours to guard.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/kernel_info.h"
#include "frontend/graph_record.h"
#include "frontend/replay.h"
#include "fusion/dynamic_shapes.h"
#include "tensor/mutex.h"

namespace fusebox {

struct CompileOptions {
  bool fullgraph = false;  // a graph break becomes a fusebox::Error naming its reason and line
  // Dynamic shapes. Unset (automatic, as Inductor): a dim of a graph input
  // seen with two different sizes becomes a run-time size, so its kernels
  // serve every later size. true: every dim from the first call. false:
  // never (each new size compiles new kernels). Sizes 0 and 1, and dims the
  // kernels need (a reduced dim, one a view reshapes), stay compiled in.
  std::optional<bool> dynamic;
  // After this many recompiles the function runs eagerly (op by op, no
  // capture) with a warning, rather than compiling forever.
  int recompile_limit = 8;
  // Runs every graph a second time unfused (one kernel per op, 16-bit floats
  // in float32) and compares each fused kernel's stored values with it:
  // numerics() and explain() report the max abs / rel error per kernel, and
  // errors beyond the dtype's tolerance are flagged and logged as warnings.
  // FUSEBOX_CHECK_NUMERICS=1 turns it on for every compiled function. Slow:
  // for debugging.
  bool check_numerics = false;
  // Replays instead of tracing: once two calls with the same arguments
  // (tensors' dtype, device, shape and strides; numbers' values) captured
  // the same single graph, later such calls run its compiled plan directly,
  // without running the function (tinygrad's TinyJit). Tensors read from
  // elsewhere (a module's parameters, also through views such as w.t()) are
  // read at run time from the memory read at capture: in-place changes are
  // seen, and assigning another tensor to one (lin.weight = ...) makes the
  // next call trace again (frontend/replay.h). Scalars, branches and anything
  // else the function looks at are fixed at capture. Arguments that share memory guard too (f(x, x) is not f(x, y)). Needs arguments that are tensors or numbers and a
  // result that is a Tensor, a vector, pair or tuple of them; a call with a
  // graph break, or a numerics check, is never replayed. explain() says why
  // a call was not replayed.
  bool replay = false;
};

// Counters since a compiled function was created.
struct CompileStats {
  int64_t calls = 0;
  int64_t graphs = 0;           // graphs captured (one per call, plus one per break)
  int64_t graph_breaks = 0;     // every break, also one with no ops captured before it
  int64_t plan_compiles = 0;    // graphs whose plan was not cached yet
  int64_t kernel_compiles = 0;  // NVRTC / host-compiler runs (compile-cache misses)
  int64_t cache_hits = 0;       // graphs whose compiled plan came from the cache
  int64_t repeated_graphs = 0;  // of those, graphs equal to the last call's: its plan ran with no lookup
  int64_t eager_calls = 0;      // calls run eagerly because the recompile limit was reached
  int64_t replays = 0;          // calls that ran a recorded plan without tracing (CompileOptions::replay)
  CompileTimes times;           // where the plan compiles' time went, summed
};

namespace frontend {

class CaptureSession;
class CompiledState;

// Whether a compiled function's capture is running on this thread.
bool CapturingNow();
// Adopts a compiled call's result value on the calling thread (capture.h).
void AdoptIfRealized(const Tensor& t);

// What one traced call captured, for its NoteReplayCandidate: that call's
// own graphs, not whatever another thread's call left as the last ones.
struct TracedCall {
  bool eager = false;  // it ran eagerly (the recompile limit)
  size_t graphs = 0;
  int64_t breaks = 0;
  std::optional<GraphRecord> graph;  // with replay on and a single graph: it, with its input tensors
};

// One call of a compiled function: installs the capture, and at Finish()
// flushes it. Destroyed unfinished (the function threw), it drops the capture.
// Past the recompile limit it captures nothing: the function runs eagerly.
class CallScope {
 public:
  explicit CallScope(CompiledState* state);
  ~CallScope();
  // Tells the capture which tensors are the function's arguments.
  template <typename... Args>
  void NoteArguments(const Args&... args) {
    (NoteArgument(args), ...);
  }
  // Returns what the call captured (CompiledState::EndCall).
  TracedCall Finish(const std::source_location& loc);

 private:
  void NoteArgument(const Tensor& t);
  template <typename T>
  void NoteArgument(const T&) {}  // not a tensor
  CompiledState* state_;
  std::unique_ptr<CaptureSession> session_;
};

// State shared by all copies of one compiled function, and by the threads
// calling it: every member but options_ is guarded by mu_. Calls trace and
// run outside the lock; they take it to read or record the bookkeeping.
class CompiledState {
 public:
  explicit CompiledState(CompileOptions options) : options_(std::move(options)) {}
  const CompileOptions& options() const { return options_; }  // never changes
  // check_numerics, from the options or FUSEBOX_CHECK_NUMERICS.
  bool checks_numerics() const;
  // Past the recompile limit: calls run eagerly.
  bool runs_eagerly() const;
  // The input dims of this call's `graph`-th graph to keep dynamic; notes
  // the sizes seen (automatic dynamic).
  std::vector<fusion::InputDim> DynamicDims(size_t graph, const std::vector<Tensor>& inputs);
  // What a capture follows of the last call's `graph`-th graph (empty: none).
  LastGraphInfo LastGraph(size_t graph) const;
  // Records what a finished call ran (`session` null: it ran eagerly).
  TracedCall EndCall(CaptureSession* session);

  // CompileOptions::replay: the recorded plan these arguments run, or null
  // (`tensors[k]`: argument k's tensor, null for a number). Entries are
  // immutable and shared: one stays valid while it runs. An entry whose
  // captured tensors were rebound since (GlobalsCurrent) is dropped, and the
  // call traces.
  template <typename... Args>
  std::shared_ptr<const ReplayEntry> FindReplay(std::span<const Tensor* const> tensors, const Args&... args) {
    MutexLock lock(&mu_);
    for (auto it = replays_.begin(); it != replays_.end(); ++it) {
      const ReplayEntry& e = **it;
      size_t k = 0;
      if (e.guards.size() == sizeof...(Args) && (Matches(e.guards[k++], args) && ...) &&
          AliasesMatch(e.guards, tensors)) {
        if (GlobalsCurrent(e)) return *it;
        replays_.erase(it);
        ++stale_replays_;
        return nullptr;
      }
    }
    return nullptr;
  }
  // Runs `entry` for a call (`args[k]`: argument k's tensor, null for a number).
  std::vector<Tensor> Replay(std::shared_ptr<const ReplayEntry> entry, std::span<const Tensor* const> args);
  // After a traced call (EndCall): records it as replayable once a second
  // call confirms it, or notes why it is not.
  void NoteReplayCandidate(std::vector<ArgGuard> guards, std::span<const Tensor> args,
                           std::span<const Tensor* const> results, TracedCall call);
  // A call whose types a replay cannot guard or rebuild: explain() says why.
  void NoteNotReplayable(const char* why);
  // Forgets every recorded and pending replay: the next calls trace again.
  void ResetReplays();

  // Copies: another thread's call may replace them at any time.
  std::vector<KernelInfo> last_kernels() const;
  std::vector<KernelNumerics> last_numerics() const;
  std::string Explain() const;
  std::string ExplainDot() const;
  CompileStats stats() const;

 private:
  bool RunsEagerlyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(recompiles_.size()) >= options_.recompile_limit;
  }

  const CompileOptions options_;
  mutable Mutex mu_;
  std::vector<KernelInfo> last_kernels_ ABSL_GUARDED_BY(mu_);  // rebuilt only when the call's plans change
  std::vector<KernelNumerics> last_numerics_ ABSL_GUARDED_BY(mu_);
  std::vector<GraphRecord> last_graphs_ ABSL_GUARDED_BY(mu_);
  std::vector<EmptyBreakRecord> last_empty_breaks_ ABSL_GUARDED_BY(mu_);
  int64_t last_breaks_ ABSL_GUARDED_BY(mu_) = 0;  // every break of the last call, with or without a graph before it
  CompileStats stats_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> recompiles_ ABSL_GUARDED_BY(mu_);  // why each recompile happened, oldest first
  // Plans made for other input values (not recompiles: the plan cache bounds them).
  std::vector<std::string> value_replans_ ABSL_GUARDED_BY(mu_);
  // Automatic dynamic, per graph of a call: the input shapes last seen, and
  // the dims seen with two sizes.
  std::vector<std::vector<Shape>> seen_shapes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<fusion::InputDim>> dynamic_dims_ ABSL_GUARDED_BY(mu_);
  // CompileOptions::replay: confirmed entries (at most recompile_limit), the
  // entries of the last traced calls waiting for a confirming call (newest
  // last, at most kMaxPendingReplays: threads and alternating shapes trace
  // calls of several entries in turn), and the last call's status for explain().
  static constexpr size_t kMaxPendingReplays = 8;
  std::vector<std::shared_ptr<const ReplayEntry>> replays_ ABSL_GUARDED_BY(mu_);
  std::vector<ReplayEntry> replay_pending_ ABSL_GUARDED_BY(mu_);
  std::string replay_status_ ABSL_GUARDED_BY(mu_);
  int64_t stale_replays_ ABSL_GUARDED_BY(mu_) = 0;  // entries dropped: a tensor they read was rebound
};

}  // namespace frontend

template <typename Fn>
class CompiledFunction {
 public:
  CompiledFunction(Fn fn, CompileOptions options)
      : fn_(std::move(fn)), state_(std::make_shared<frontend::CompiledState>(std::move(options))) {}

  template <typename... Args>
  auto operator()(Args&&... args) {
    using Result = std::invoke_result_t<Fn&, Args...>;
    if constexpr (frontend::kReplayable<Result, Args...>) {
      // Inside another compiled function's capture its ops join that graph.
      if (state_->options().replay && !frontend::CapturingNow()) {
        return CallWithReplay<Result>(std::forward<Args>(args)...);
      }
    } else if (state_->options().replay) {
      state_->NoteNotReplayable(
          "its arguments are not all tensors or numbers, or its result is not a Tensor or a vector, pair or tuple of them");
    }
    const bool nested = frontend::CapturingNow();  // inside another compiled function's capture
    frontend::CallScope scope(state_.get());
    scope.NoteArguments(args...);
    if constexpr (std::is_void_v<std::invoke_result_t<Fn&, Args...>>) {
      std::invoke(fn_, std::forward<Args>(args)...);
      scope.Finish(std::source_location::current());
    } else {
      auto result = std::invoke(fn_, std::forward<Args>(args)...);
      scope.Finish(std::source_location::current());
      if (!nested) AdoptResults(result);
      return result;
    }
  }

  // The kernels launched by the last call, in order. (Copies, like
  // numerics() and stats(): safe while other threads call the function.)
  std::vector<KernelInfo> kernels() const { return state_->last_kernels(); }
  // Graphs captured by the last call, their ops and kernels, and why each ended.
  std::string explain() const { return state_->Explain(); }
  // explain() as a Graphviz digraph (`dot -Tsvg`): a cluster per graph with
  // its nodes (op, dtype, shape), fused kernels as nested clusters labelled
  // with their names, and graph breaks as red nodes between graphs.
  std::string explain_dot() const { return state_->ExplainDot(); }
  // check_numerics: per kernel of the last call, how far its stored values
  // are from the same ops run unfused; empty when the check is off.
  std::vector<KernelNumerics> numerics() const { return state_->last_numerics(); }
  // Counters since creation: calls, graphs, graph_breaks, plan_compiles, ...
  CompileStats stats() const { return state_->stats(); }
  // CompileOptions::replay: forgets the recorded plans, so the next calls
  // trace again (and re-read what the function reads besides its arguments,
  // e.g. after rebinding a global tensor: see frontend/replay.h).
  void reset_replays() { state_->ResetReplays(); }

 private:
  static const Tensor* TensorOrNull(const Tensor& t) { return &t; }
  static const Tensor* TensorOrNull(const auto&) { return nullptr; }
  static Tensor TensorOrEmpty(const Tensor& t) { return t; }
  static Tensor TensorOrEmpty(const auto&) { return Tensor(); }

  // Makes the returned tensors concrete on the calling thread (AdoptIfRealized),
  // so they may be read from several threads at once. Not for a call inside
  // another compiled function's capture: its results are that graph's nodes.
  template <typename R>
  static void AdoptResults(const R& result) {
    if constexpr (std::is_same_v<R, Tensor>) {
      frontend::AdoptIfRealized(result);
    } else if constexpr (frontend::ReplayResult<R>::kSupported) {
      std::vector<const Tensor*> tensors;
      frontend::ReplayResult<R>::Collect(result, &tensors);
      for (const Tensor* t : tensors) frontend::AdoptIfRealized(*t);
    }
  }

  template <typename Result, typename... Args>
  Result CallWithReplay(Args&&... args) {
    const Tensor* arg_tensors[] = {TensorOrNull(args)..., nullptr};
    const std::span<const Tensor* const> arg_span(arg_tensors, sizeof...(Args));
    if (std::shared_ptr<const frontend::ReplayEntry> entry = state_->FindReplay(arg_span, args...)) {
      return frontend::ReplayResult<Result>::Make(state_->Replay(std::move(entry), arg_span));
    }
    std::vector<frontend::ArgGuard> guards{frontend::GuardOf(args)...};
    frontend::NoteAliases(arg_span, guards);
    std::vector<Tensor> tensors{TensorOrEmpty(args)...};
    frontend::CallScope scope(state_.get());
    scope.NoteArguments(args...);
    Result result = std::invoke(fn_, std::forward<Args>(args)...);
    frontend::TracedCall call = scope.Finish(std::source_location::current());
    std::vector<const Tensor*> results;
    frontend::ReplayResult<Result>::Collect(result, &results);
    state_->NoteReplayCandidate(std::move(guards), tensors, results, std::move(call));
    AdoptResults(result);
    return result;
  }

  Fn fn_;
  std::shared_ptr<frontend::CompiledState> state_;
};

template <typename Fn>
CompiledFunction<std::decay_t<Fn>> compile(Fn&& fn, CompileOptions options = {}) {
  return CompiledFunction<std::decay_t<Fn>>(std::forward<Fn>(fn), std::move(options));
}

}  // namespace fusebox
