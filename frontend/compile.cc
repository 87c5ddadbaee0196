#include "frontend/compile.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/capture.h"
#include "spdlog/spdlog.h"

namespace fusebox::frontend {
namespace {
constexpr char kEndOfFunction[] = "end of compiled function";
}  // namespace

CallScope::CallScope(CompiledState* state)
    : state_(state), session_(std::make_unique<CaptureSession>(/*eager=*/false)) {
  session_->set_fullgraph(state->options().fullgraph);
}

CallScope::~CallScope() = default;

void CallScope::Finish(const std::source_location& loc) {
  session_->FlushAtEnd(kEndOfFunction, loc);
  state_->EndCall(*session_);
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
  return absl::StrCat("graph ", g, ": ", absl::StrJoin(changes, "; "));
}

}  // namespace

void CompiledState::EndCall(const CaptureSession& session) {
  ++stats_.calls;
  const std::vector<GraphRecord>& graphs = session.records();
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
    recompiles_.push_back(RecompileReason(g, last_graphs_[g], graphs[g]));
    spdlog::debug("recompile: {}", recompiles_.back());
  }
  last_graphs_ = graphs;
  last_empty_breaks_ = session.empty_breaks();
  // Every graph but the one the function's end flushed was ended by a break;
  // breaks with nothing captured before them ended no graph but count too.
  last_breaks_ = static_cast<int64_t>(last_empty_breaks_.size());
  for (const GraphRecord& r : last_graphs_) last_breaks_ += r.end_reason == kEndOfFunction ? 0 : 1;
  stats_.graphs += static_cast<int64_t>(last_graphs_.size());
  stats_.graph_breaks += last_breaks_;
  for (const GraphRecord& r : last_graphs_) ++(r.from_cache ? stats_.cache_hits : stats_.plan_compiles);
  stats_.kernel_compiles += session.kernel_compiles();
}

std::string CompiledState::Explain() const {
  std::string out = absl::StrCat("compiled function: ", stats_.calls, " call(s); last call captured ", last_graphs_.size(),
                                 " graph(s), ", last_breaks_, " graph break(s), ", last_kernels_.size(),
                                 " kernel launch(es)\n");
  for (const std::string& why : recompiles_) absl::StrAppend(&out, "recompiled: ", why, "\n");
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
    for (const std::string& note : plan.notes) absl::StrAppend(&out, "  not fused: ", note, "\n");
    absl::StrAppend(&out, "  graph:\n", plan.graph.ToString());
  }
  empty_breaks_before(last_graphs_.size());
  return out;
}

}  // namespace fusebox::frontend
