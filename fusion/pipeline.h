// The compiler pipeline from a captured graph to a named plan: one flat list of
// passes (pipeline.cc), each logged and, with FUSEBOX_DEBUG=graph / plan,
// dumped after it runs.
#pragma once

#include "fusion/plan.h"

namespace fusebox::fusion {

Plan BuildPlan(const graph::Graph& graph);

}  // namespace fusebox::fusion
