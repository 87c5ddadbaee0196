// The differential fuzzer in CI: its reference and minimizer checked on
// known cases, a CPU run of a few hundred programs in every mode, a CUDA run
// where a GPU is present, and the seeds that found bugs (tests/fuzz/FINDINGS.md).
#include <cmath>
#include <cstdlib>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/fuzz/check.h"
#include "tests/fuzz/interpret.h"
#include "tests/fuzz/op_table.h"

namespace fusebox::fuzz {
namespace {

// Known defects being fixed elsewhere (FINDINGS.md): CI leaves their classes out.
GenOptions CiOptions() {
  GenOptions o;
  o.max_steps = 4;
  o.palette = {1, 2, 3, 5};  // few shapes, so most CPU kernels hit the compile cache
  return o;
}

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : fallback;
}

std::string Report(const RunSummary& sum, const GenOptions& options, Device device) {
  std::string out;
  for (const Finding& f : sum.findings) {
    out += "seed " + std::to_string(f.seed) + " " + ModeName(f.mode) + ": " + f.outcome.kind + ": " + f.outcome.detail +
           "\n" + ProgramText(Generate(f.seed, options)) + Repro(Generate(f.seed, options), f.mode, device, f.outcome);
  }
  return out;
}

TEST(FuzzReference, SoftmaxRowsSumToOneAndBoundGrowsWithInputError) {
  RefArray x = MakeArray({2, 3}, DType::kFloat32);
  *x.val = {1, 2, 3, -1, 0, 1};
  Step s;
  s.op = OpIndex("softmax");
  s.ints = {1};
  const RefArray y = OpTable()[s.op].ref({x}, s);
  EXPECT_NEAR(y.v(0) + y.v(1) + y.v(2), 1.0, 1e-12);
  EXPECT_NEAR(y.v(2), std::exp(3.0) / (std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), 1e-12);
  x.err = std::make_shared<std::vector<double>>(6, 1e-3);
  const RefArray z = OpTable()[s.op].ref({x}, s);
  EXPECT_GT(z.e(0), 1e-3 * z.v(0));  // the input error carries through
  EXPECT_LT(y.e(0), 1e-5);           // exact inputs: only float32 rounding
}

TEST(FuzzReference, CancellationWidensTheBoundAndComparisonsNearTiesAreUnchecked) {
  RefArray a = MakeArray({1}, DType::kBFloat16), b = MakeArray({1}, DType::kBFloat16);
  (*a.val)[0] = 1.0, (*a.err)[0] = 4e-3, (*b.val)[0] = 1.001, (*b.err)[0] = 4e-3;
  Step sub;
  sub.op = OpIndex("binary");
  sub.ints = {1};
  const RefArray d = OpTable()[sub.op].ref({a, b}, sub);
  EXPECT_NEAR(d.v(0), -0.001, 1e-12);
  EXPECT_GT(d.e(0), 8e-3);  // larger than the difference itself
  Step lt;
  lt.op = OpIndex("compare");
  lt.ints = {2};
  EXPECT_TRUE(std::isinf(OpTable()[lt.op].ref({a, b}, lt).e(0)));
}

TEST(FuzzReference, PromotionFollowsPyTorch) {
  RefArray v = MakeArray({4}, DType::kBFloat16), s = MakeArray({}, DType::kFloat32), h = MakeArray({4}, DType::kFloat16);
  EXPECT_EQ(ResultType({&v, &s}), DType::kBFloat16);  // a 0-d tensor does not widen
  EXPECT_EQ(ResultType({&v, &h}), DType::kFloat32);
  EXPECT_THROW(BroadcastShapes({2, 3}, {4}), RefError);
}

TEST(FuzzGenerator, SameSeedSameProgram) {
  const GenOptions o;
  for (uint64_t seed = 1; seed < 20; ++seed) EXPECT_EQ(ProgramText(Generate(seed, o)), ProgramText(Generate(seed, o)));
  EXPECT_NE(ProgramText(Generate(1, o)), ProgramText(Generate(2, o)));
}

TEST(FuzzMinimizer, ShrinksToTheStepThatFails) {
  GenOptions o;
  o.max_steps = 8;
  const int exp_op = OpIndex("exp");
  auto has_exp = [&](const Program& p) {
    for (const Step& s : p.steps) {
      if (s.op == exp_op) return true;
    }
    return false;
  };
  uint64_t seed = 1;
  while (!(has_exp(Generate(seed, o)) && Generate(seed, o).steps.size() >= 5 && !Generate(seed, o).must_fail)) ++seed;
  const Program small = Minimize(Generate(seed, o), has_exp);
  int ops = 0;
  for (const Step& s : small.steps) ops += s.op != kInputOp;
  EXPECT_EQ(ops, 1) << ProgramText(small);
  EXPECT_TRUE(has_exp(small));
  EXPECT_NE(Repro(small, Mode::kCompiled, Device::cpu(), {"value", "x"}).find("exp(t"), std::string::npos);
}

TEST(FuzzCpu, ProgramsAgreeWithTheReferenceInEveryMode) {
  const GenOptions o = CiOptions();
  const uint64_t seed = EnvInt("FUSEBOX_FUZZ_SEED", 1);
  const int64_t count = EnvInt("FUSEBOX_FUZZ_COUNT", 150);
  const std::vector<Mode> modes(std::begin(kAllModes), std::end(kAllModes));
  const RunSummary sum = RunMany(seed, count, modes, Device::cpu(), o, /*verbose=*/false);
  EXPECT_TRUE(sum.findings.empty()) << Report(sum, o, Device::cpu());
  EXPECT_GT(sum.must_fail, 0);  // some programs checked that errors throw
  for (Mode m : modes) EXPECT_GT(sum.clean[static_cast<int>(m)], count * 9 / 10) << ModeName(m);
}

TEST(FuzzCpu, DataMovementProgramsAgreeWithTheReference) {
  GenOptions o = CiOptions();
  o.data_movement = true;
  const int64_t count = EnvInt("FUSEBOX_FUZZ_COUNT", 60);
  const std::vector<Mode> modes = {Mode::kEager, Mode::kCompiled, Mode::kDynamic};
  const RunSummary sum = RunMany(EnvInt("FUSEBOX_FUZZ_SEED", 1), count, modes, Device::cpu(), o, /*verbose=*/false);
  EXPECT_TRUE(sum.findings.empty()) << Report(sum, o, Device::cpu());
  for (Mode m : modes) EXPECT_GT(sum.clean[static_cast<int>(m)], count * 8 / 10) << ModeName(m);
}

TEST(FuzzCpu, ModelOpsProgramsAgreeWithTheReference) {
  GenOptions o = CiOptions();
  o.model_ops = true;
  const int64_t count = EnvInt("FUSEBOX_FUZZ_COUNT", 60);
  const uint64_t seed = EnvInt("FUSEBOX_FUZZ_SEED", 1);
  // The programs draw the new rows: most of them, masked_fill and the triangles included.
  absl::flat_hash_set<std::string> drawn;
  for (int64_t i = 0; i < count; ++i) {
    for (const Step& s : Generate(seed + i, o).steps) {
      if (s.op != kInputOp) drawn.insert(OpTable()[s.op].name);
    }
  }
  int model_rows = 0;
  for (const char* name : {"sin", "cos", "erf", "log1p", "expm1", "silu", "softplus", "floor", "ceil", "round", "sign",
                           "clamp", "masked_fill", "triangle"}) {
    model_rows += drawn.contains(name);
  }
  EXPECT_GE(model_rows, 6) << absl::StrJoin(drawn, " ");
  EXPECT_TRUE(drawn.contains("masked_fill") || drawn.contains("triangle"));
  const std::vector<Mode> modes = {Mode::kEager, Mode::kCompiled, Mode::kDynamic, Mode::kReplay};
  const RunSummary sum = RunMany(seed, count, modes, Device::cpu(), o, /*verbose=*/false);
  EXPECT_TRUE(sum.findings.empty()) << Report(sum, o, Device::cpu());
  for (Mode m : modes) EXPECT_GT(sum.clean[static_cast<int>(m)], count * 8 / 10) << ModeName(m);
}

TEST(FuzzCuda, ProgramsAgreeWithTheReferenceInEveryMode) {
  if (!CudaAvailableInChild()) GTEST_SKIP() << "no usable CUDA device";
  const GenOptions o = CiOptions();
  const int64_t count = EnvInt("FUSEBOX_FUZZ_CUDA_COUNT", 500);
  const std::vector<Mode> modes(std::begin(kAllModes), std::end(kAllModes));
  const RunSummary sum = RunMany(EnvInt("FUSEBOX_FUZZ_SEED", 1), count, modes, Device::cuda(), o, false);
  EXPECT_TRUE(sum.findings.empty()) << Report(sum, o, Device::cuda());
}

TEST(FuzzCuda, ModelOpsProgramsAgreeWithTheReference) {
  if (!CudaAvailableInChild()) GTEST_SKIP() << "no usable CUDA device";
  GenOptions o = CiOptions();
  o.model_ops = true;
  const int64_t count = EnvInt("FUSEBOX_FUZZ_CUDA_COUNT", 300);
  const std::vector<Mode> modes(std::begin(kAllModes), std::end(kAllModes));
  const RunSummary sum = RunMany(EnvInt("FUSEBOX_FUZZ_SEED", 1), count, modes, Device::cuda(), o, false);
  EXPECT_TRUE(sum.findings.empty()) << Report(sum, o, Device::cuda());
}

// The seeds that found bugs, with the options that generated them; each
// passes since its fix (an entry may be turned off, enabled = false, while a
// new bug waits for its fix; FUSEBOX_FUZZ_REGRESSION_ALL=1 runs them all).
struct Regression {
  uint64_t seed;
  Mode mode;
  const char* exclude;  // the run's --exclude
  const char* bug;      // FINDINGS.md entry
  bool enabled;
};
const Regression kRegressions[] = {
    {10, Mode::kEager, "", "softmax over a zero-size dim throws", true},
    {12, Mode::kEager, "", "SIGFPE: maximum of zero-size tensors", true},
    {7036, Mode::kEager, "zero-size,size1-reduction,float-condition", "SIGILL: transpose of a 0-d tensor", true},
    {217, Mode::kCompiled, "zero-size,zero-dim,alias", "SIGILL: compiled pow(0-d, sum over a size-1 dim)", true},
    {5063, Mode::kEager, "zero-size,zero-dim,alias,size1-reduction", "where() with a float condition does not throw", true},
    {7062, Mode::kEager, "zero-size,size1-reduction,float-condition", "a 0-d bf16 widens f16[1] to f32 in maximum", true},
    {7162, Mode::kEager, "zero-size,size1-reduction,float-condition", "view of a 0-d tensor as [1] throws", true},
    {7008, Mode::kReplay, "zero-size,size1-reduction,float-condition", "replay after aliased calls f(x, x) returns wrong values", true},
    // The first H200 campaign (default options).
    {180, Mode::kEager, "", "matmul of a zero batch with a batch of 1 broadcast the batch to 1", true},
    {4000148, Mode::kEager, "", "SIGILL: slice of a 0-d tensor", true},
    {5000220, Mode::kEager, "", "var of float16 rounded every intermediate to float16", true},
    {4000146, Mode::kDynamic, "", "(reference) a 0-d f32 operand of a bf16 op is rounded to bf16 first", true},
    // The second H200 campaign.
    {7002144, Mode::kEager, "", "cuBLASLt rejected a broadcast [33, 1] operand (strides 0, 1)", true},
    {11001808, Mode::kReplay, "", "(reference) rms_norm whose float32 sum of squares overflows", true},
    {9001932, Mode::kDynamic, "", "(reference) prod whose partial products leave float32's range", true},
    {6000618, Mode::kEager, "", "(reference) an odd split of an empty tensor is a valid reshape", true},
    // The third H200 campaign.
    {7002345, Mode::kReplay, "", "(reference) pow(pow(x, x), ...) whose bound reaches past bfloat16's range", true},
    {6001814, Mode::kDynamic, "", "(reference) pow(x, -1) where x's bound contains the pole at 0", true},
    // The CPU campaign on this machine.
    {60002709, Mode::kEager, "", "(reference) ne(bf16, f32[]) compares in bfloat16", true},
};

TEST(FuzzRegression, SeedsThatFoundBugs) {
  const bool all = EnvInt("FUSEBOX_FUZZ_REGRESSION_ALL", 0) != 0;
  int ran = 0;
  for (const Regression& r : kRegressions) {
    if (!r.enabled && !all) continue;
    GenOptions o;
    ASSERT_TRUE(ParseExclusions(r.exclude, &o.exclude));
    const Program p = Generate(r.seed, o);
    const Outcome out = RunIsolated(p, r.mode, Device::cpu());
    EXPECT_TRUE(out.ok()) << r.bug << ": seed " << r.seed << " " << ModeName(r.mode) << ": " << out.kind << ": "
                          << out.detail << "\n" << Repro(p, r.mode, Device::cpu(), out);
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "every regression seed waits for its fix (see tests/fuzz/FINDINGS.md)";
}

}  // namespace
}  // namespace fusebox::fuzz
