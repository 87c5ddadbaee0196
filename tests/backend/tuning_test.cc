// The tuning registry (backend/tuning.h): the table's defaults are valid, bad
// environment values warn and fall back, FUSEBOX_DEBUG's unknown names warn,
// each knob that shapes generated source changes it under a ScopedTuning
// (and the CUDA source still compiles for sm_90), CPU results stay right
// under the CPU-affecting knobs, and docs/debugging.md lists the table.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "absl/hash/hash.h"
#include "backend/compile_ahead.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/row_layout.h"
#include "backend/tuning.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/debug.h"
#include "tests/backend/lower_for_test.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using backend::CurrentTuning;
using backend::Knob;
using backend::ScopedTuning;
using backend::TuningSnapshot;
using ::testing::HasSubstr;
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

TEST(TuningTest, DefaultsAreValidAndMatchTheLayoutConstants) {
  const auto table = backend::KnobTable();
  ASSERT_EQ(static_cast<int>(table.size()), backend::kNumKnobs);
  std::set<std::string_view> names;
  for (const backend::KnobInfo& k : table) {
    EXPECT_EQ(backend::KnobValueError(k, k.default_value), "") << k.name;
    EXPECT_TRUE(k.name.starts_with("FUSEBOX_TUNE_")) << k.name;
    EXPECT_FALSE(k.doc.empty()) << k.name;
    EXPECT_TRUE(names.insert(k.name).second) << "twice: " << k.name;
  }
  const TuningSnapshot defaults;
  EXPECT_TRUE(defaults.IsDefault());
  EXPECT_EQ(defaults.ToString(), "default tuning");
  EXPECT_EQ(defaults.GetInt(Knob::kLoopGroups), backend::kCudaLoopGroups);
  EXPECT_EQ(defaults.GetInt(Knob::kLongRowBlocks), backend::kCudaLongRowBlocksPerSm);
  EXPECT_EQ(defaults.GetInt(Knob::kWarpRowsPerBlock), backend::kCudaWarpRowsPerBlock);
}

TEST(TuningTest, UnknownAndBadValuesWarnAndFallBackToTheDefault) {
  std::vector<std::string> warnings;
  const TuningSnapshot t = TuningSnapshot::FromEnvironment(
      {{"FUSEBOX_TUNE_NO_SUCH_KNOB", "1"},
       {"FUSEBOX_TUNE_CACHE_HINTS", "7"},     // out of [0, 2]
       {"FUSEBOX_TUNE_COLUMN_UNROLL", "12"},  // not a power of two
       {"FUSEBOX_TUNE_LOOP_GROUPS", "four"},  // not an integer
       {"FUSEBOX_TUNE_COUNTED_LOOP", "2"},    // a bool
       {"FUSEBOX_TUNE_L1_HINTS", "3"},        // valid
       {"HOME", "/nowhere"}},
      &warnings);
  ASSERT_EQ(warnings.size(), 5u) << ::testing::PrintToString(warnings);
  const std::string all = ::testing::PrintToString(warnings);
  EXPECT_THAT(all, HasSubstr("unknown tuning knob FUSEBOX_TUNE_NO_SUCH_KNOB"));
  EXPECT_THAT(all, HasSubstr("FUSEBOX_TUNE_WARP_ROW_LIMIT, "));  // the valid knobs are listed
  EXPECT_THAT(all, HasSubstr("FUSEBOX_TUNE_CACHE_HINTS=7: 7 is not [0, 2]; using the default 1"));
  EXPECT_THAT(all, HasSubstr("FUSEBOX_TUNE_COLUMN_UNROLL=12: 12 is not a power of two in [1, 64]"));
  EXPECT_THAT(all, HasSubstr("'four' is not an integer"));
  EXPECT_THAT(all, HasSubstr("FUSEBOX_TUNE_COUNTED_LOOP=2: 2 is not 0 or 1"));
  TuningSnapshot want;
  want.Set(Knob::kL1Hints, 3);
  EXPECT_EQ(t, want);
  EXPECT_EQ(t.ToString(), "FUSEBOX_TUNE_L1_HINTS=3");
  EXPECT_NE(absl::HashOf(t), absl::HashOf(TuningSnapshot()));
  EXPECT_THROW(want.Set(Knob::kLoopThreads, 100), Error);
}

TEST(TuningTest, UnknownDebugNamesWarnAndListTheValidOnes) {
  std::vector<std::string> warnings;
  const std::vector<std::string> dumps = ParseDebugDumps("graph, nope ,all", &warnings);
  EXPECT_EQ(dumps, (std::vector<std::string>{"graph", "all"}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("unknown name 'nope'"));
  EXPECT_THAT(warnings[0], HasSubstr("recompiles, all"));
}

TEST(TuningTest, ScopedTuningNestsAndRestores) {
  const TuningSnapshot before = CurrentTuning();
  {
    ScopedTuning outer({{Knob::kCacheHints, 0}});
    EXPECT_EQ(CurrentTuning().Get(Knob::kCacheHints), 0);
    {
      ScopedTuning inner({{Knob::kLoopGroups, 2}});
      EXPECT_EQ(CurrentTuning().Get(Knob::kCacheHints), 0);
      EXPECT_EQ(CurrentTuning().Get(Knob::kLoopGroups), 2);
    }
    EXPECT_EQ(CurrentTuning().Get(Knob::kLoopGroups), before.Get(Knob::kLoopGroups));
  }
  EXPECT_EQ(CurrentTuning(), before);
  EXPECT_THROW(ScopedTuning({{Knob::kLongRowBlocks, 5}}), Error);
  EXPECT_EQ(CurrentTuning(), before);
}

// A workload whose CUDA source one knob changes.
struct SourceCase {
  Knob knob;
  int64_t value;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  std::vector<Shape> shapes;
};

Tensor Softmax(const std::vector<Tensor>& in) { return ManualSoftmax(in[0]); }
Tensor SoftmaxOfProduct(const std::vector<Tensor>& in) { return ManualSoftmax(in[0] * in[1]); }
Tensor LayerNorm(const std::vector<Tensor>& in) {
  Tensor centered = in[0] - mean(in[0], -1, /*keepdim=*/true);
  return centered * rsqrt(mean(centered * centered, -1, true) + 1e-5) * in[1] + in[2];
}
Tensor RmsNoWeight(const std::vector<Tensor>& in) { return in[0] * rsqrt(mean(in[0] * in[0], -1, true) + 1e-6); }
Tensor RowSum(const std::vector<Tensor>& in) { return sum(in[0], -1); }
Tensor ColumnSum(const std::vector<Tensor>& in) { return sum(in[0], 0); }
Tensor ColumnSoftmax(const std::vector<Tensor>& in) { return softmax(in[0], 0); }
Tensor Gelu(const std::vector<Tensor>& in) { return ManualGelu(in[0]); }
Tensor Scale(const std::vector<Tensor>& in) { return in[0] * 2.0 + 1.0; }

// The CUDA source of fn's last kernel under the current tuning.
std::string LastCudaSource(const SourceCase& c) {
  std::vector<Tensor> inputs;
  for (const Shape& s : c.shapes) inputs.push_back(randn(s, Device::cpu(), FreshSeed()));
  const backend::Kernel k = testing_backend::LowerAll(c.fn, inputs).back();
  return backend::PrintCuda(k, CurrentTuning());
}

// Every knob that shapes a kernel's source (not kFastMath, an NVRTC option,
// nor the launch-time kCudaGraphs and kGemmCandidates; kClusters below).
TEST(TuningTest, EachSourceKnobChangesTheCudaSourceWhichStillCompiles) {
  const std::vector<SourceCase> cases = {
      {Knob::kWarpRowLimit, 256, RowSum, {{64, 512}}},
      {Knob::kWarpRowsPerBlock, 4, Softmax, {{64, 512}}},
      {Knob::kLaneElements, 1, Softmax, {{64, 37}}},  // 8 lanes per row -> 16
      {Knob::kShortRowWarps, 2, Softmax, {{64, 37}}},
      {Knob::kRowValues, 2, Softmax, {{8, 2048}}},
      {Knob::kOnChipRowLimit, 1024, Softmax, {{8, 2048}}},
      {Knob::kSharedRows, 0, Softmax, {{3, 65536}}},
      {Knob::kHeldValues, 0, Softmax, {{8, 2048}}},
      {Knob::kWideRowLoop, 0, Softmax, {{64, 8192}}},
      {Knob::kNormRowLoop, 0, LayerNorm, {{16, 4096}, {4096}, {4096}}},
      {Knob::kCountedLoop, 0, RmsNoWeight, {{64, 4096}}},
      {Knob::kLoopThreads, 512, RmsNoWeight, {{64, 4096}}},
      {Knob::kLoopGroups, 2, RmsNoWeight, {{64, 4096}}},
      {Knob::kLoopMinBlocks, 2, RmsNoWeight, {{64, 4096}}},
      {Knob::kLongRowBlocks, 2, SoftmaxOfProduct, {{3, 65536}, {3, 65536}}},  // grid-stride rows
      {Knob::kCacheHints, 2, Scale, {{4096}}},
      {Knob::kL1Hints, 0, RmsNoWeight, {{64, 4096}}},
      {Knob::kColumnTiles, 0, ColumnSum, {{4096, 256}}},
      {Knob::kColumnBlocks, 64, ColumnSum, {{8192, 62}}},
      {Knob::kColumnUnroll, 4, ColumnSum, {{8192, 62}}},
      // Columns too short to split (under 2 x 64 rows) take the outer layout.
      {Knob::kOuterWarpColumns, 32, ColumnSoftmax, {{96, 1023}}},
      {Knob::kOuterHeldWords, 0, ColumnSoftmax, {{96, 1023}}},
      {Knob::kOuterSplit, 0, ColumnSoftmax, {{4096, 1023}}},
      {Knob::kOnlineExpSums, 0, ColumnSoftmax, {{4096, 1023}}},
      {Knob::kColumnLanes, 2, ColumnSoftmax, {{4096, 1023}}},  // the rule's 4
      {Knob::kAlignedRowGroups, 0, RowSum, {{64, 1031}}},
      {Knob::kOnePlusTanh, 0, Gelu, {{1000}}},
  };
  std::set<Knob> covered;
  for (const SourceCase& c : cases) {
    SCOPED_TRACE(std::string(backend::KnobInfoOf(c.knob).name));
    ASSERT_NE(c.value, backend::KnobInfoOf(c.knob).default_value);
    const std::string by_default = LastCudaSource(c);
    std::string tuned;
    {
      ScopedTuning scope({{c.knob, c.value}});
      tuned = LastCudaSource(c);
    }
    EXPECT_NE(tuned, by_default);
    auto out = cuda::CompileWithNvrtc(tuned, "tuned", 90);
    EXPECT_TRUE(out.ok()) << out.status() << "\n" << tuned;
    covered.insert(c.knob);
  }
  EXPECT_EQ(covered.size(), cases.size());
}

// Clusters are set by CompileAhead (the kernel IR records the layout): by
// the rule (Knob::kClusters 1) for looped rows fewer than the SMs, for every
// row a cluster fits with 2, never with 0.
TEST(TuningTest, ClustersKnobGivesAClusterKernel) {
  auto sources = [](const Shape& shape, int clusters) {
    Tensor x = Tensor::empty(shape, DType::kFloat32, Device::cpu());  // captured, never read
    frontend::CaptureSession session(/*eager=*/false);
    const fusion::Plan plan = fusion::BuildPlan(session.Snapshot({ManualSoftmax(x)}));
    TuningSnapshot tuning;
    tuning.Set(Knob::kClusters, clusters);
    return backend::CompileAhead(plan, 90, /*cuda_twins=*/true, tuning, /*cuda_sm_count=*/132).back().cuda_source;
  };
  // 262147 is past what a block holds on chip; 4 rows leave SMs idle, 256
  // do not; 65536 fits 8 blocks' registers.
  const std::string few = sources({4, 262147}, 1), many = sources({256, 262147}, 1), never = sources({4, 262147}, 0),
                    every = sources({256, 65536}, 2);
  EXPECT_THAT(few, HasSubstr("__cluster_dims__("));
  EXPECT_THAT(many, ::testing::Not(HasSubstr("__cluster_dims__(")));
  EXPECT_THAT(never, ::testing::Not(HasSubstr("__cluster_dims__(")));
  EXPECT_THAT(every, HasSubstr("__cluster_dims__("));
  for (const std::string* source : {&few, &every}) {
    auto out = cuda::CompileWithNvrtc(*source, "clusters", 90);
    EXPECT_TRUE(out.ok()) << out.status();
  }
}

// The lowering's rewrite (1 + tanh) and the CUDA spread's knobs (warp rows,
// column split; ChooseCudaSchedule reads them, the CPU kernels do not): CPU
// results stay right, and a compile under an override never reuses the plan
// cached under the default tuning.
TEST(TuningTest, CpuResultsStayRightUnderTheOverridesAndPlansAreNotShared) {
  const uint64_t seed = FreshSeed();
  Tensor x = randn({512, 48}, Device::cpu(), seed);
  const std::vector<float> xs = x.to_vector();
  std::vector<double> gelu(xs.size()), rows(512, 0.0), cols(48, 0.0);
  for (size_t i = 0; i < xs.size(); ++i) {
    gelu[i] = GeluRef(xs[i]);
    rows[i / 48] += xs[i];
    cols[i % 48] += xs[i];
  }
  auto f = compile([](const Tensor& t) { return std::make_tuple(ManualGelu(t), sum(t, -1), sum(t, 0)); });
  auto check = [&] {
    auto [g, r, c] = f(x);
    ExpectClose(g.to_vector(), gelu, 1e-5);
    ExpectClose(r.to_vector(), rows, 1e-4);
    ExpectClose(c.to_vector(), cols, 1e-4);
  };
  auto sources = [&] {
    std::string all;
    for (const KernelInfo& k : f.kernels()) all += k.source;
    return all;
  };
  check();
  const std::string default_source = sources();
  const int64_t compiles = f.stats().plan_compiles;
  for (const auto& [knob, value] : std::vector<std::pair<Knob, int64_t>>{
           {Knob::kOnePlusTanh, 0}, {Knob::kWarpRowLimit, 16}, {Knob::kColumnBlocks, 4}, {Knob::kColumnUnroll, 2}}) {
    SCOPED_TRACE(std::string(backend::KnobInfoOf(knob).name));
    ScopedTuning scope({{knob, value}});
    const int64_t before = f.stats().plan_compiles;
    check();
    EXPECT_EQ(f.stats().plan_compiles, before + 1) << "a plan compiled under other tuning was reused";
    if (knob == Knob::kOnePlusTanh) EXPECT_NE(sources(), default_source);
  }
  check();  // the default tuning's plan again, from the cache
  EXPECT_EQ(f.stats().plan_compiles, compiles + 4);
  EXPECT_EQ(sources(), default_source);
}

// docs/debugging.md carries the generated table verbatim, and names no
// FUSEBOX_TUNE_ variable the table lacks.
// FUSEBOX_UPDATE_GOLDEN=1 rewrites the table between its markers.
TEST(TuningTest, DebuggingDocListsEveryKnobWithItsDefault) {
  const std::string path = std::string(FUSEBOX_TEST_DATA_DIR) + "/../docs/debugging.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " not found";
  std::stringstream text;
  text << in.rdbuf();
  std::string doc = text.str();
  const std::string table = backend::KnobTableMarkdown();
  if (std::getenv("FUSEBOX_UPDATE_GOLDEN") != nullptr) {
    const std::string begin = "<!-- knob table: generated from backend/tuning.cc -->\n", end = "<!-- end of knob table -->";
    const size_t b = doc.find(begin), e = doc.find(end);
    ASSERT_TRUE(b != std::string::npos && e != std::string::npos && b < e) << "the knob table's markers are missing";
    doc = doc.substr(0, b + begin.size()) + table + doc.substr(e);
    std::ofstream(path) << doc;
  }
  EXPECT_THAT(doc, HasSubstr(table)) << "regenerate the knob table of docs/debugging.md:\n" << table;
  for (const backend::KnobInfo& k : backend::KnobTable()) {
    EXPECT_THAT(doc, HasSubstr(absl::StrCat("| `", std::string(k.name), "` | ")));
  }
  const std::regex name("FUSEBOX_TUNE_[A-Z0-9_]+");
  for (std::sregex_iterator it(doc.begin(), doc.end(), name), end; it != end; ++it) {
    const std::string found = it->str();
    bool known = false;
    for (const backend::KnobInfo& k : backend::KnobTable()) known = known || k.name == found;
    EXPECT_TRUE(known) << "docs/debugging.md names " << found << ", which is not in the table";
  }
}

}  // namespace
}  // namespace fusebox
