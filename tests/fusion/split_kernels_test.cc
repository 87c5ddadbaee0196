// The unfused plan (PlanOptions{.fuse = false}): one kernel per op, each
// storing its value; views stay views, read by the kernel that consumes them.
#include <algorithm>

#include "frontend/capture.h"
#include "frontend/fusebox.h"
#include "fusion/pipeline.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::ElementsAre;
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

TEST(SplitKernelsTest, OneKernelPerOpEachStoringItsValue) {
  frontend::CaptureSession session(/*eager=*/false);
  Tensor x = randn({16, 32});
  Tensor out = ManualSoftmax(ManualGelu(x).transpose(0, 1));
  const graph::Graph g = session.Snapshot({out});
  const fusion::Plan fused = fusion::BuildPlan(g);
  const fusion::Plan split = fusion::BuildPlan(g, {}, {.fuse = false});
  EXPECT_LT(fused.kernels.size(), split.kernels.size());
  int ops = 0;
  for (const graph::Node& n : split.graph.nodes()) {
    const graph::OpKind kind = graph::Info(n.op).kind;
    ops += kind == graph::OpKind::kPointwise || kind == graph::OpKind::kReduction;
  }
  ASSERT_EQ(static_cast<int>(split.kernels.size()), ops);
  for (const fusion::KernelGroup& k : split.kernels) {
    ASSERT_EQ(k.outputs.size(), 1u) << k.name;
    EXPECT_EQ(k.name.find("_fused_"), std::string::npos) << k.name;
    // Every op it reads was stored by an earlier kernel.
    for (graph::NodeId in : k.buffer_inputs) EXPECT_LT(in, k.outputs[0]) << k.name;
  }
  // softmax's max over the transposed gelu: a reduction kernel of its own
  // that loads the stored value through the transpose.
  auto max = std::find_if(split.kernels.begin(), split.kernels.end(),
                          [](const fusion::KernelGroup& k) { return k.name.find("_max_") != std::string::npos; });
  ASSERT_NE(max, split.kernels.end());
  EXPECT_THAT(max->reductions, ElementsAre(max->outputs[0]));
  ASSERT_EQ(max->buffer_inputs.size(), 1u);
  EXPECT_EQ(split.graph.node(max->buffer_inputs[0]).op, graph::Op::kMul);
}

}  // namespace
}  // namespace fusebox
