// The compiler pipeline from a captured graph to a named plan: one flat list of
// passes (pipeline.cc), each logged and, with FUSEBOX_DEBUG=graph / plan,
// dumped after it runs.
#pragma once

#include <string>
#include <vector>

#include "fusion/input_values.h"
#include "fusion/plan.h"

namespace fusebox::fusion {

struct PlanOptions {
  // false: one kernel per op (split_kernels.h), the reference the numerics
  // check compares fused kernels with.
  bool fuse = true;
  // The call's input values, which the plan may assume (input_values.h;
  // null: none). Planning a dynamic plan passes none.
  InputValues* values = nullptr;
};

// The graph passes alone (dead nodes, attention recognition), as BuildPlan
// runs them first; `notes` (may be null) gets what they rewrote or left.
// With `values`, `value_inputs` (may be null) gets the inputs whose values the
// rewritten graph assumed.
graph::Graph RunGraphPasses(const graph::Graph& captured, std::vector<std::string>* notes = nullptr,
                            InputValues* values = nullptr, std::vector<int32_t>* value_inputs = nullptr);

// `dynamic`: input dims to keep out of the kernels (dynamic_shapes.h).
Plan BuildPlan(const graph::Graph& graph, absl::Span<const InputDim> dynamic = {}, PlanOptions options = {});

}  // namespace fusebox::fusion
