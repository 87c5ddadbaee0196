// GraphBuilder: hash-consing, and following a recorded trace (Follow), which
// must build exactly what a fresh builder builds for the same adds.
#include <algorithm>
#include <random>
#include <vector>

#include "graph/graph.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace fusebox::graph {
namespace {

Node Input(int32_t index, Shape shape) {
  Strides strides = ContiguousStrides(shape);
  return Node{.op = Op::kInput, .shape = std::move(shape), .input_index = index, .strides = std::move(strides)};
}
Node Constant(double value, Shape shape) { return Node{.op = Op::kConstant, .shape = std::move(shape), .scalar = value}; }
Node Binary(Op op, NodeId a, NodeId b, Shape shape) { return Node{.op = op, .shape = std::move(shape), .inputs = {a, b}}; }

// One capture's adds: an input, constants and ops on earlier results; the
// second add of `1.0` is a twin of the first.
std::vector<Node> Adds(double scale) {
  const Shape s{4, 8};
  return {Input(0, s), Constant(1.0, s), Binary(Op::kAdd, 0, 1, s), Constant(scale, s),
          Binary(Op::kMul, 2, 3, s), Constant(1.0, s), Binary(Op::kSub, 4, 1, s)};
}

std::vector<NodeId> AddAll(GraphBuilder& b, const std::vector<Node>& adds) {
  std::vector<NodeId> ids;
  for (const Node& n : adds) ids.push_back(b.Add(n));
  return ids;
}

std::shared_ptr<const Trace> Record(const std::vector<Node>& adds, NodeId output) {
  GraphBuilder b;
  AddAll(b, adds);
  return std::make_shared<const Trace>(std::move(b).BuildTrace({output}));
}

TEST(GraphBuilderTest, FollowingTheSameAddsRepeatsTheTrace) {
  const std::shared_ptr<const Trace> trace = Record(Adds(0.5), 5);
  EXPECT_EQ(trace->graph.size(), 6);  // the second 1.0 was its twin
  EXPECT_EQ(trace->adds, (std::vector<NodeId>{0, 1, 2, 3, 4, 1, 5}));
  GraphBuilder b;
  b.Follow(trace);
  const std::vector<NodeId> ids = AddAll(b, Adds(0.5));
  EXPECT_EQ(ids, trace->adds);
  EXPECT_EQ(b.size(), trace->graph.size());
  for (NodeId id = 0; id < b.size(); ++id) EXPECT_EQ(b.node(id), trace->graph.node(id));
  EXPECT_EQ(b.Repeated({5}), trace);
  // Not a repeat: other outputs, a store target the trace did not have.
  EXPECT_EQ(b.Repeated({4}), nullptr);
  EXPECT_EQ(b.Repeated({5}, {0}), nullptr);
  // What Build returns is the trace's graph either way.
  EXPECT_EQ(std::move(b).Build({5}), trace->graph);
}

TEST(GraphBuilderTest, APrefixOfTheTraceIsNotARepeat) {
  const std::shared_ptr<const Trace> trace = Record(Adds(0.5), 5);
  GraphBuilder b;
  b.Follow(trace);
  const std::vector<Node> adds = Adds(0.5);
  for (size_t k = 0; k + 1 < adds.size(); ++k) b.Add(adds[k]);
  EXPECT_EQ(b.Repeated({4}), nullptr);
  EXPECT_EQ(b.Build({4}), [&] {
    GraphBuilder fresh;
    for (size_t k = 0; k + 1 < adds.size(); ++k) fresh.Add(adds[k]);
    return std::move(fresh).Build({4});
  }());
}

TEST(GraphBuilderTest, ADifferentNodeMidwayBuildsWhatAFreshBuilderBuilds) {
  const std::shared_ptr<const Trace> trace = Record(Adds(0.5), 5);
  const std::vector<Node> adds = Adds(2.0);  // differs at the fourth add
  GraphBuilder follower;
  follower.Follow(trace);
  GraphBuilder fresh;
  EXPECT_EQ(AddAll(follower, adds), AddAll(fresh, adds));
  EXPECT_EQ(follower.Repeated({5}), nullptr);
  const Trace a = std::move(follower).BuildTrace({5});
  const Trace b = std::move(fresh).BuildTrace({5});
  EXPECT_EQ(a.graph, b.graph);
  EXPECT_EQ(a.adds, b.adds);
}

TEST(GraphBuilderTest, FollowRequiresAnEmptyBuilder) {
  GraphBuilder b;
  b.Add(Input(0, {4}));
  EXPECT_THROW(b.Follow(Record(Adds(0.5), 5)), Error);
}

// Adds each node with its inputs clamped to the nodes there are (random and
// edited sequences may point past them).
std::vector<NodeId> AddClamped(GraphBuilder& b, std::vector<Node> adds) {
  std::vector<NodeId> ids;
  for (Node& n : adds) {
    for (NodeId& in : n.inputs) in = std::min(in, b.size() - 1);
    ids.push_back(b.Add(std::move(n)));
  }
  return ids;
}

// Random captures and random edits of them (a constant changed, an add
// dropped or inserted, or none): following the first and adding the second
// builds the second's graph, ids and trace exactly as a fresh builder does,
// and is a repeat exactly when those equal the first's.
TEST(GraphBuilderTest, RandomEditsBuildWhatAFreshBuilderBuilds) {
  std::mt19937_64& rng = test_util::Rng();
  const Shape s{3, 5};
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto random_adds = [&](int n) {
    std::vector<Node> adds = {Input(0, s), Input(1, {5})};
    for (int k = 2; k < n; ++k) {
      const int kind = pick(0, 3);
      if (kind == 0) {
        adds.push_back(Constant(pick(0, 3), s));  // few values: twins are likely
      } else {
        adds.push_back(Binary(kind == 1 ? Op::kAdd : kind == 2 ? Op::kMul : Op::kMaximum, pick(0, k - 1), pick(0, k - 1), s));
      }
    }
    return adds;
  };
  int repeats = 0, twins = 0;
  for (int trial = 0; trial < 300; ++trial) {
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    const int n = pick(3, 24);
    const std::vector<Node> first = random_adds(n);
    std::vector<Node> second = first;
    const int at = pick(2, n - 1);
    switch (pick(0, 3)) {
      case 0: second[at] = Constant(pick(0, 3), s); break;
      case 1: second.erase(second.begin() + at); break;
      case 2: second.insert(second.begin() + at, Constant(pick(0, 3), s)); break;
      case 3: break;  // the same adds again
    }
    GraphBuilder recorder;
    AddClamped(recorder, first);
    const NodeId output = recorder.size() - 1;
    const auto trace = std::make_shared<const Trace>(std::move(recorder).BuildTrace({output}));
    GraphBuilder follower, fresh;
    follower.Follow(trace);
    ASSERT_EQ(AddClamped(follower, second), AddClamped(fresh, second));
    ASSERT_EQ(follower.size(), fresh.size());
    const NodeId out = std::min(output, fresh.size() - 1);
    const bool repeated = follower.Repeated({out}) != nullptr;
    const Trace a = std::move(follower).BuildTrace({out});
    const Trace b = std::move(fresh).BuildTrace({out});
    ASSERT_EQ(a.graph, b.graph);
    ASSERT_EQ(a.adds, b.adds);
    ASSERT_EQ(repeated, b.graph == trace->graph && b.adds == trace->adds);
    repeats += repeated;
    twins += static_cast<int>(b.adds.size()) > b.graph.size();
  }
  // The draws exercised both outcomes, and twins.
  EXPECT_GT(repeats, 0);
  EXPECT_LT(repeats, 300);
  EXPECT_GT(twins, 0);
}

}  // namespace
}  // namespace fusebox::graph

namespace fusebox::graph {
namespace {

// The typed attribute `dim` is part of a node's identity: cat along dim 0
// and along dim 1 of the same operands are two nodes, and a cat of any
// number of inputs is one node; the dump names the dim.
TEST(GraphBuilderTest, TypedDimAndVariableInputsAreNodeIdentity) {
  GraphBuilder b;
  const NodeId x = b.Add(Input(0, {2, 2})), y = b.Add(Input(1, {2, 2}));
  const NodeId along0 = b.Add(Node{.op = Op::kCat, .shape = {6, 2}, .inputs = {x, y, x}, .dim = 0});
  const NodeId along1 = b.Add(Node{.op = Op::kCat, .shape = {2, 6}, .inputs = {x, y, x}, .dim = 1});
  const NodeId twin = b.Add(Node{.op = Op::kCat, .shape = {6, 2}, .inputs = {x, y, x}, .dim = 0});
  EXPECT_NE(along0, along1);
  EXPECT_EQ(twin, along0);
  Node a{.op = Op::kGather, .shape = {2, 2}, .inputs = {x, y}, .dim = 0}, c = a;
  c.dim = 1;
  EXPECT_FALSE(a == c);
  EXPECT_NE(absl::HashOf(a), absl::HashOf(c));
  EXPECT_NE(std::move(b).Build({along1}).ToString().find("cat(%0, %1, %0, dim=1)"), std::string::npos);
}

}  // namespace
}  // namespace fusebox::graph
