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
      if (before.inputs[k] != now.inputs[k]) {
        changes.push_back(absl::StrCat("input ", k, ": ", before.inputs[k], " -> ", now.inputs[k]));
      }
    }
  }
  if (changes.empty()) changes.push_back("the captured ops or constants changed");
  return absl::StrCat("graph ", g, ": ", absl::StrJoin(changes, "; "));
}

}  // namespace

void CompiledState::EndCall(const CaptureSession& session) {
  ++stats_.calls;
  last_kernels_ = session.launched();
  const std::vector<GraphRecord>& graphs = session.records();
  for (size_t g = 0; g < graphs.size() && g < last_graphs_.size(); ++g) {
    if (graphs[g].from_cache) continue;
    recompiles_.push_back(RecompileReason(g, last_graphs_[g], graphs[g]));
    spdlog::debug("recompile: {}", recompiles_.back());
  }
  last_graphs_ = graphs;
  stats_.graphs += static_cast<int64_t>(last_graphs_.size());
  stats_.graph_breaks += last_graphs_.empty() ? 0 : static_cast<int64_t>(last_graphs_.size()) - 1;
  for (const GraphRecord& r : last_graphs_) ++(r.from_cache ? stats_.cache_hits : stats_.plan_compiles);
  stats_.kernel_compiles += session.kernel_compiles();
}

std::string CompiledState::Explain() const {
  std::string out = absl::StrCat("compiled function: ", stats_.calls, " call(s); last call captured ", last_graphs_.size(),
                                 " graph(s), ", last_graphs_.empty() ? 0 : last_graphs_.size() - 1,
                                 " graph break(s), ", last_kernels_.size(), " kernel launch(es)\n");
  for (const std::string& why : recompiles_) absl::StrAppend(&out, "recompiled: ", why, "\n");
  for (size_t g = 0; g < last_graphs_.size(); ++g) {
    const GraphRecord& r = last_graphs_[g];
    std::map<std::string, int> counts;
    for (const std::string& op : r.ops) ++counts[op];
    std::vector<std::string> ops;
    for (const auto& [op, n] : counts) ops.push_back(n > 1 ? absl::StrCat(op, " x", n) : op);
    absl::StrAppend(&out, "\ngraph ", g, ": ", r.ops.size(), " op(s) (", absl::StrJoin(ops, ", "), ") -> ",
                    r.kernel_names.size(), " kernel(s)", r.from_cache ? " [plan from cache]" : "", "\n");
    absl::StrAppend(&out, "  ended by: ", r.end_reason,
                    r.end_reason == kEndOfFunction ? "" : absl::StrCat(" at ", r.location), "\n");
    absl::StrAppend(&out, "  kernels: ", absl::StrJoin(r.kernel_names, ", "), "\n");
    for (const std::string& note : r.fusion_notes) absl::StrAppend(&out, "  not fused: ", note, "\n");
    absl::StrAppend(&out, "  graph:\n", r.graph_text);
  }
  return out;
}

}  // namespace fusebox::frontend
