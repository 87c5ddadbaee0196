#include "fusion/pipeline.h"

#include <cstdio>
#include <string>

#include "fusion/attention_layout.h"
#include "fusion/eliminate_dead_nodes.h"
#include "fusion/fuse_kernels.h"
#include "fusion/name_kernels.h"
#include "fusion/order_kernels.h"
#include "fusion/recognize_attention.h"
#include "fusion/split_kernels.h"
#include "spdlog/spdlog.h"
#include "tensor/debug.h"

namespace fusebox::fusion {
namespace {

void DumpGraph(const char* after, const graph::Graph& before, const graph::Graph& g) {
  if (!DebugDump("graph")) return;
  std::fprintf(stderr, "[fusebox graph] after %s%s\n%s", after, before == g ? " (unchanged)" : "",
               before == g ? "" : g.ToString().c_str());
}

// `before`: the plan's text before the step, where it may leave it unchanged.
void DumpPlan(const char* after, const Plan& plan, const std::string* before = nullptr) {
  if (!DebugDump("plan")) return;
  const std::string text = plan.ToString();
  const bool same = before != nullptr && *before == text;
  std::fprintf(stderr, "[fusebox plan] after %s%s\n%s", after, same ? " (unchanged)" : "", same ? "" : text.c_str());
}

}  // namespace

graph::Graph RunGraphPasses(const graph::Graph& captured, std::vector<std::string>* notes, InputValues* values,
                            std::vector<int32_t>* value_inputs) {
  if (DebugDump("graph")) std::fprintf(stderr, "[fusebox graph] captured\n%s", captured.ToString().c_str());

  // 1. Drop values nothing returns: before fusion so they cost no kernel work.
  graph::Graph g = EliminateDeadNodes(captured);
  DumpGraph("eliminate_dead_nodes", captured, g);

  // 2. Hand-written attention becomes scaled_dot_product_attention's node:
  // one extern kernel in place of two GEMMs and a softmax kernel (it leaves
  // no dead node behind). A mask read from an input whose values are known
  // may be judged causal on them (the plan then guards on that input).
  GraphRewrite attention = RecognizeAttention(g, values);
  if (value_inputs != nullptr) *value_inputs = attention.value_inputs;
  DumpGraph("recognize_attention", g, attention.graph);
  if (notes != nullptr) notes->insert(notes->end(), attention.notes.begin(), attention.notes.end());

  // 3. An attention result only transposed and copied is stored by the
  // attention kernel in the copy's layout: no copy kernel.
  GraphRewrite stored = StoreAttentionInConsumerLayout(attention.graph);
  DumpGraph("store_attention_in_consumer_layout", attention.graph, stored.graph);
  if (notes != nullptr) notes->insert(notes->end(), stored.notes.begin(), stored.notes.end());
  return std::move(stored.graph);
}

Plan BuildPlan(const graph::Graph& captured, absl::Span<const InputDim> dynamic, PlanOptions options) {
  std::vector<std::string> graph_notes;
  std::vector<int32_t> value_inputs;
  const graph::Graph g = RunGraphPasses(captured, &graph_notes, options.values, &value_inputs);

  // 4. Group into kernels (or one per op); 5. order them so each runs after
  // what it loads; 6. name them (names depend on the final groups and order).
  Plan plan = options.fuse ? FuseKernels(g) : SplitKernels(g);
  plan.graph_notes = std::move(graph_notes);
  for (int32_t in : value_inputs) plan.value_guards.push_back(options.values->Guard(in));
  DumpPlan(options.fuse ? "fuse_kernels" : "split_kernels", plan);
  const std::string fused = DebugDump("plan") ? plan.ToString() : std::string();
  plan = OrderKernels(std::move(plan));
  DumpPlan("order_kernels", plan, &fused);
  plan = NameKernels(std::move(plan));
  DumpPlan("name_kernels", plan);

  // 7. Which sizes stay run-time values (on the final graph: node ids match).
  // A plan that assumed input values is planned at one size (its cache key
  // holds every size): it keeps its sizes compiled in.
  plan.symbols = FindDimSymbols(plan.graph, plan.value_guards.empty() ? dynamic : absl::Span<const InputDim>());
  plan.index64 = plan.dynamic() && NeedsIndex64(plan.graph);
  spdlog::debug("planned {} kernel(s) for a graph of {} node(s)", plan.kernels.size(), g.size());
  return plan;
}

}  // namespace fusebox::fusion
