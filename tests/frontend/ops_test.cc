// Every pointwise row of the op table, through the public API, eager and
// compiled, against the table's float64 reference: dtypes, promotion, scalar
// operands, layouts (transposed, narrowed, broadcast, expanded, lazy views)
// and sizes (rank 0, empty, 1, odd, large). A GPU variant reruns a subset on
// Device::cuda() and skips without a device.
//
// Kernel compiles dominate the run time (~0.2 s each, on first use), so the
// cases are chosen to cover each (op, dtype) and each (op, layout class) once
// rather than their product.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "graph/op.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using graph::Op;
using test_util::AllClose;
using test_util::Domain;
using test_util::Expected;
using test_util::Operand;
using test_util::RandomNarrowed;
using test_util::RandomTensor;
using test_util::RandomTransposed;
using test_util::Reference;

constexpr DType kF32 = DType::kFloat32, kF16 = DType::kFloat16, kBF16 = DType::kBFloat16, kI32 = DType::kInt32,
                kI64 = DType::kInt64, kBool = DType::kBool;
const std::vector<DType> kAllDTypes = {kF32, kF16, kBF16, kI32, kI64, kBool};

// ------------------------------------------------ the public spelling of each op

using Xs = std::vector<Tensor>;
using Call = std::function<Tensor(const Xs&, DType cast_to)>;

const std::map<Op, Call>& PublicOps() {
  static const auto* ops = new std::map<Op, Call>{
      {Op::kCopy, [](const Xs& x, DType) { return x[0].clone(); }},
      {Op::kCast, [](const Xs& x, DType to) { return x[0].to(to); }},
      {Op::kAdd, [](const Xs& x, DType) { return x[0] + x[1]; }},
      {Op::kSub, [](const Xs& x, DType) { return x[0] - x[1]; }},
      {Op::kMul, [](const Xs& x, DType) { return x[0] * x[1]; }},
      {Op::kDiv, [](const Xs& x, DType) { return x[0] / x[1]; }},
      {Op::kNeg, [](const Xs& x, DType) { return -x[0]; }},
      {Op::kAbs, [](const Xs& x, DType) { return abs(x[0]); }},
      {Op::kExp, [](const Xs& x, DType) { return exp(x[0]); }},
      {Op::kLog, [](const Xs& x, DType) { return log(x[0]); }},
      {Op::kTanh, [](const Xs& x, DType) { return tanh(x[0]); }},
      {Op::kSigmoid, [](const Xs& x, DType) { return sigmoid(x[0]); }},
      {Op::kRelu, [](const Xs& x, DType) { return relu(x[0]); }},
      {Op::kGelu, [](const Xs& x, DType) { return gelu(x[0]); }},
      {Op::kGeluTanh, [](const Xs& x, DType) { return gelu(x[0], "tanh"); }},
      {Op::kSqrt, [](const Xs& x, DType) { return sqrt(x[0]); }},
      {Op::kSin, [](const Xs& x, DType) { return sin(x[0]); }},
      {Op::kCos, [](const Xs& x, DType) { return cos(x[0]); }},
      {Op::kErf, [](const Xs& x, DType) { return erf(x[0]); }},
      {Op::kLog1p, [](const Xs& x, DType) { return log1p(x[0]); }},
      {Op::kExpm1, [](const Xs& x, DType) { return expm1(x[0]); }},
      {Op::kSilu, [](const Xs& x, DType) { return silu(x[0]); }},
      {Op::kSoftplus, [](const Xs& x, DType) { return softplus(x[0]); }},
      {Op::kFloor, [](const Xs& x, DType) { return floor(x[0]); }},
      {Op::kCeil, [](const Xs& x, DType) { return ceil(x[0]); }},
      {Op::kRound, [](const Xs& x, DType) { return round(x[0]); }},
      {Op::kSign, [](const Xs& x, DType) { return sign(x[0]); }},
      {Op::kRsqrt, [](const Xs& x, DType) { return rsqrt(x[0]); }},
      {Op::kPow, [](const Xs& x, DType) { return pow(x[0], x[1]); }},
      {Op::kMaximum, [](const Xs& x, DType) { return maximum(x[0], x[1]); }},
      {Op::kMinimum, [](const Xs& x, DType) { return minimum(x[0], x[1]); }},
      {Op::kWhere, [](const Xs& x, DType) { return where(x[0], x[1], x[2]); }},
      {Op::kEq, [](const Xs& x, DType) { return eq(x[0], x[1]); }},
      {Op::kNe, [](const Xs& x, DType) { return ne(x[0], x[1]); }},
      {Op::kLt, [](const Xs& x, DType) { return lt(x[0], x[1]); }},
      {Op::kLe, [](const Xs& x, DType) { return le(x[0], x[1]); }},
      {Op::kGt, [](const Xs& x, DType) { return gt(x[0], x[1]); }},
      {Op::kGe, [](const Xs& x, DType) { return ge(x[0], x[1]); }},
  };
  return *ops;
}

// (rand and randn have no public spelling over tensors: tests/frontend/rng_test.cc.)
std::vector<Op> PointwiseOps() {
  std::vector<Op> ops;
  for (const graph::OpInfo& row : graph::AllOps()) {
    if (row.kind == graph::OpKind::kPointwise && row.dtype_rule != graph::DTypeRule::kRandom) ops.push_back(row.op);
  }
  return ops;
}

std::string OpLabel(Op op) { return op == Op::kGeluTanh ? "gelu_tanh" : graph::OpName(op); }

// Operand dtypes each op is tested with (on contiguous inputs).
std::vector<DType> DTypesFor(Op op) {
  switch (graph::Info(op).dtype_rule) {
    case graph::DTypeRule::kArith: return {kF32, kF16, kBF16, kI32, kI64};
    case graph::DTypeRule::kFloat:
      if (op == Op::kDiv || op == Op::kExp) return {kF32, kF16, kBF16, kI32, kI64};
      return {kF32, kF16, kBF16, kI32};
    default: return kAllDTypes;  // copy, cast (as the source), where (values), comparisons
  }
}

// ------------------------------------------------------------ running a case

// Runs `fn` once as a compiled function of `xs`; reports the kernels launched.
template <typename F>
Tensor RunCompiled(F fn, const Xs& xs, size_t* kernels, std::string* explain) {
  switch (xs.size()) {
    case 1: {
      auto c = compile([&](const Tensor& a) { return fn(Xs{a}); });
      Tensor r = c(xs[0]);
      *kernels = c.kernels().size();
      *explain = c.explain();
      return r;
    }
    case 2: {
      auto c = compile([&](const Tensor& a, const Tensor& b) { return fn(Xs{a, b}); });
      Tensor r = c(xs[0], xs[1]);
      *kernels = c.kernels().size();
      *explain = c.explain();
      return r;
    }
    default: {
      auto c = compile([&](const Tensor& a, const Tensor& b, const Tensor& d) { return fn(Xs{a, b, d}); });
      Tensor r = c(xs[0], xs[1], xs[2]);
      *kernels = c.kernels().size();
      *explain = c.explain();
      return r;
    }
  }
}

std::vector<Operand> AsOperands(const Xs& xs) { return std::vector<Operand>(xs.begin(), xs.end()); }

std::string What(Op op, const std::vector<Operand>& xs, DType cast_to = kF32) {
  return absl::StrCat(OpLabel(op), op == Op::kCast ? absl::StrCat(" to ", DTypeName(cast_to)) : "", "(",
                      test_util::Describe(xs), ")");
}

// `op` on `xs` eagerly and as a compiled one-op function, each against the
// float64 reference; the compiled call must launch exactly one kernel.
void CheckOp(Op op, const Xs& xs, DType cast_to = kF32) {
  const Call& call = PublicOps().at(op);
  const std::string what = What(op, AsOperands(xs), cast_to);
  const Expected want = Reference(op, AsOperands(xs), cast_to);

  const Tensor eager = call(xs, cast_to);
  EXPECT_TRUE(AllClose(eager, want, what + " [eager]"));
  EXPECT_FALSE(eager.is_lazy()) << what;
  EXPECT_EQ(eager.device(), xs[0].device()) << what;

  size_t kernels = 0;
  std::string explain;
  const Tensor compiled = RunCompiled([&](const Xs& args) { return call(args, cast_to); }, xs, &kernels, &explain);
  EXPECT_TRUE(AllClose(compiled, want, what + " [compiled]"));
  EXPECT_EQ(kernels, 1u) << what << "\n" << explain;
}

// Operand `k` of `op` for operand dtype `dtype` (where's condition is bool).
DType OperandDType(Op op, size_t k, DType dtype) { return op == Op::kWhere && k == 0 ? kBool : dtype; }
Domain OperandDomain(Op op, size_t k, DType dtype) {
  return test_util::InputDomain(op, static_cast<int>(k), OperandDType(op, k, dtype));
}

Xs ContiguousInputs(Op op, DType dtype, const Shape& shape) {
  Xs xs;
  for (int k = 0; k < graph::Info(op).arity; ++k) {
    xs.push_back(RandomTensor(shape, OperandDType(op, k, dtype), OperandDomain(op, k, dtype)));
  }
  return xs;
}

// --------------------------------------------------------------- the table

TEST(OpsTest, EveryPointwiseRowHasAPublicSpelling) {
  for (Op op : PointwiseOps()) EXPECT_TRUE(PublicOps().contains(op)) << "no test spelling for op " << OpLabel(op);
  EXPECT_EQ(PublicOps().size(), PointwiseOps().size());
}

class OpTest : public ::testing::TestWithParam<Op> {};

std::string ParamName(const ::testing::TestParamInfo<Op>& info) { return OpLabel(info.param); }

// Each operand dtype the op takes, contiguous, odd size.
TEST_P(OpTest, DTypes) {
  const Op op = GetParam();
  for (DType dtype : DTypesFor(op)) {
    SCOPED_TRACE(DTypeName(dtype));
    if (op == Op::kCast) {
      for (DType to : kAllDTypes) {
        if (to != dtype) CheckOp(op, ContiguousInputs(op, dtype, {4097}), to);
      }
    } else {
      CheckOp(op, ContiguousInputs(op, dtype, {4097}));
    }
  }
}

// Non-contiguous operands, float32 and bfloat16: transposed and narrowed views.
TEST_P(OpTest, TransposedAndNarrowed) {
  const Op op = GetParam();
  const int arity = graph::Info(op).arity;
  for (DType dtype : {kF32, kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    Xs xs;
    for (int k = 0; k < arity; ++k) {
      const DType d = OperandDType(op, k, dtype);
      const Domain dom = OperandDomain(op, k, dtype);
      xs.push_back(k == 0 ? RandomTransposed(7, 9, d, dom) : k == 1 ? RandomNarrowed(7, 9, d, dom)
                                                                    : RandomTensor({7, 9}, d, dom));
    }
    ASSERT_FALSE(xs[0].is_contiguous());
    if (arity > 1) ASSERT_FALSE(xs[1].is_contiguous());
    CheckOp(op, xs, kI32);
  }
}

// Broadcasting ([7,1] with [1,5] with [5]) and expanded views (stride 0).
TEST_P(OpTest, BroadcastAndExpanded) {
  const Op op = GetParam();
  const int arity = graph::Info(op).arity;
  Xs xs;
  if (arity == 1) {
    xs.push_back(RandomNarrowed(7, 1, kF32, OperandDomain(op, 0, kF32)).expand({7, 5}));
    EXPECT_EQ(xs[0].strides()[1], 0);
  } else {
    const Shape shapes[3] = {{7, 1}, {1, 5}, {5}};
    for (int k = 0; k < arity; ++k) {
      xs.push_back(RandomTensor(shapes[k], OperandDType(op, k, kF32), OperandDomain(op, k, kF32)));
    }
  }
  CheckOp(op, xs, kBF16);
}

// Compiled only: the first operand is a transposed, narrowed (offset) view of a
// value computed in the same graph, so the op reads it through a view node;
// still one kernel.
TEST_P(OpTest, LazyViewOperand) {
  const Op op = GetParam();
  const int arity = graph::Info(op).arity;
  Xs xs = {RandomTensor({9, 8}, OperandDType(op, 0, kF32), OperandDomain(op, 0, kF32))};
  for (int k = 1; k < arity; ++k) {
    xs.push_back(RandomTensor({7, 9}, OperandDType(op, k, kF32), OperandDomain(op, k, kF32)));
  }
  Xs ref_xs = xs;
  ref_xs[0] = xs[0].transpose(0, 1).narrow(0, 1, 7);
  const Call& call = PublicOps().at(op);
  const std::string what = What(op, AsOperands(ref_xs), kF16) + " with a lazy transposed, narrowed first operand";
  size_t kernels = 0;
  std::string explain;
  const Tensor got = RunCompiled(
      [&](const Xs& args) {
        Xs lazy = args;
        lazy[0] = args[0].clone().transpose(0, 1).narrow(0, 1, 7);
        return call(lazy, kF16);
      },
      xs, &kernels, &explain);
  EXPECT_TRUE(AllClose(got, Reference(op, AsOperands(ref_xs), kF16), what));
  EXPECT_EQ(kernels, 1u) << what << "\n" << explain;
}

// NaN, infinities and signed zeros against each other ([8,1] x [1,8]).
TEST_P(OpTest, SpecialValues) {
  const Op op = GetParam();
  const std::vector<double> specials = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -2.5, 0.5};
  Xs xs;
  const Shape shapes[3] = {{8, 1}, {1, 8}, {8}};
  for (int k = 0; k < graph::Info(op).arity; ++k) {
    // where's condition is bool: the specials' truth values (NaN is true).
    xs.push_back(OperandDType(op, k, kF32) == kBool ? ne(Tensor::from_vector(specials, shapes[k], kF32), 0.0)
                                                    : Tensor::from_vector(specials, shapes[k], kF32));
  }
  // Casting NaN or infinity to an integer is undefined; float targets only.
  CheckOp(op, xs, kF16);
  if (op == Op::kCast) CheckOp(op, xs, kBF16);
}

INSTANTIATE_TEST_SUITE_P(AllPointwise, OpTest, ::testing::ValuesIn(PointwiseOps()), ParamName);

// Sizes: rank 0, empty, one element, odd, 1000, and an empty 2-D shape.
class OpShapeTest : public ::testing::TestWithParam<Op> {};

TEST_P(OpShapeTest, Sizes) {
  const Op op = GetParam();
  for (const Shape& shape : std::vector<Shape>{{}, {0}, {1}, {7}, {1000}, {3, 0}}) {
    SCOPED_TRACE(ShapeToString(shape));
    CheckOp(op, ContiguousInputs(op, kF32, shape), kI64);
  }
}

INSTANTIATE_TEST_SUITE_P(Representative, OpShapeTest,
                         ::testing::Values(Op::kCopy, Op::kCast, Op::kAdd, Op::kDiv, Op::kExp, Op::kGeluTanh,
                                           Op::kPow, Op::kMaximum, Op::kWhere, Op::kLt),
                         ParamName);

// ---------------------------------------------------------- scalar operands

// `fn(x)` eager and compiled against the reference of `op` on `operands`
// (which spell the same computation with the scalar in place).
void CheckScalarCase(const char* label, Op op, const std::function<Tensor(const Tensor&)>& fn,
                     const std::vector<Operand>& operands, const Tensor& x) {
  const std::string what = absl::StrCat(label, " on ", test_util::Describe(x));
  const Expected want = Reference(op, operands);
  EXPECT_TRUE(AllClose(fn(x), want, what + " [eager]"));
  size_t kernels = 0;
  std::string explain;
  const Tensor got = RunCompiled([&](const Xs& a) { return fn(a[0]); }, {x}, &kernels, &explain);
  EXPECT_TRUE(AllClose(got, want, what + " [compiled]"));
  EXPECT_EQ(kernels, 1u) << what << "\n" << explain;
}

TEST(OpsScalarTest, TensorScalarArithmetic) {
  for (DType dtype : {kF32, kBF16, kI32}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor x = RandomTensor({33}, dtype, Domain::kAny);
    const Tensor nz = RandomTensor({33}, dtype, Domain::kNonZero);
    const Tensor pos = RandomTensor({33}, dtype, Domain::kPositive);
    CheckScalarCase("x + 2.0", Op::kAdd, [](const Tensor& t) { return t + 2.0; }, {x, 2.0}, x);
    CheckScalarCase("2.0 - x", Op::kSub, [](const Tensor& t) { return 2.0 - t; }, {2.0, x}, x);
    CheckScalarCase("x * 0.5", Op::kMul, [](const Tensor& t) { return t * 0.5; }, {x, 0.5}, x);
    CheckScalarCase("-1.5 * x", Op::kMul, [](const Tensor& t) { return -1.5 * t; }, {-1.5, x}, x);
    CheckScalarCase("x / 4.0", Op::kDiv, [](const Tensor& t) { return t / 4.0; }, {x, 4.0}, x);
    CheckScalarCase("3.0 / x", Op::kDiv, [](const Tensor& t) { return 3.0 / t; }, {3.0, nz}, nz);
    CheckScalarCase("x - 0.25", Op::kSub, [](const Tensor& t) { return t - 0.25; }, {x, 0.25}, x);
    CheckScalarCase("pow(x, 3.0)", Op::kPow, [](const Tensor& t) { return pow(t, 3.0); }, {x, 3.0}, x);
    CheckScalarCase("pow(x, 0.5)", Op::kPow, [](const Tensor& t) { return pow(t, 0.5); }, {pos, 0.5}, pos);
  }
}

TEST(OpsScalarTest, ComparisonsAndWhereWithScalars) {
  for (DType dtype : {kF32, kF16, kI64}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor x = RandomTensor({40}, dtype, Domain::kCoarse);
    CheckScalarCase("eq(x, 0.5)", Op::kEq, [](const Tensor& t) { return eq(t, 0.5); }, {x, 0.5}, x);
    CheckScalarCase("ne(x, 1.0)", Op::kNe, [](const Tensor& t) { return ne(t, 1.0); }, {x, 1.0}, x);
    CheckScalarCase("lt(x, 0.0)", Op::kLt, [](const Tensor& t) { return lt(t, 0.0); }, {x, 0.0}, x);
    CheckScalarCase("le(x, -1.0)", Op::kLe, [](const Tensor& t) { return le(t, -1.0); }, {x, -1.0}, x);
    CheckScalarCase("gt(x, 0.25)", Op::kGt, [](const Tensor& t) { return gt(t, 0.25); }, {x, 0.25}, x);
    CheckScalarCase("ge(x, 2.0)", Op::kGe, [](const Tensor& t) { return ge(t, 2.0); }, {x, 2.0}, x);
    const Tensor c = RandomTensor({40}, kBool);
    CheckScalarCase("where(c, x, 2.0)", Op::kWhere, [&](const Tensor& t) { return where(c, t, 2.0); }, {c, x, 2.0},
                    x);
    CheckScalarCase("where(c, -1.0, x)", Op::kWhere, [&](const Tensor& t) { return where(c, -1.0, t); },
                    {c, -1.0, x}, x);
  }
}

// --------------------------------------------------------------- promotion

struct PromotionCase {
  const char* label;
  Op op;
  std::vector<DType> dtypes;  // operand dtypes (where: the condition first)
  DType expected;             // the result dtype, as PyTorch gives it
};

TEST(OpsPromotionTest, ResultDTypesFollowPyTorch) {
  const std::vector<PromotionCase> cases = {
      {"i32 + f32", Op::kAdd, {kI32, kF32}, kF32},
      {"f32 + i32", Op::kAdd, {kF32, kI32}, kF32},
      {"i32 / i32", Op::kDiv, {kI32, kI32}, kF32},
      {"i64 / i64", Op::kDiv, {kI64, kI64}, kF32},
      {"f16 + bf16", Op::kAdd, {kF16, kBF16}, kF32},
      {"bf16 * f16", Op::kMul, {kBF16, kF16}, kF32},
      {"f16 - f32", Op::kSub, {kF16, kF32}, kF32},
      {"i32 * bf16", Op::kMul, {kI32, kBF16}, kBF16},
      {"i32 + i64", Op::kAdd, {kI32, kI64}, kI64},
      {"bool + i32", Op::kAdd, {kBool, kI32}, kI32},
      {"bool * f16", Op::kMul, {kBool, kF16}, kF16},
      {"max(i64, f16)", Op::kMaximum, {kI64, kF16}, kF16},
      {"i32 < f32", Op::kLt, {kI32, kF32}, kBool},
      {"f16 == bf16", Op::kEq, {kF16, kBF16}, kBool},
      {"bool != bool", Op::kNe, {kBool, kBool}, kBool},
      {"exp(i32)", Op::kExp, {kI32}, kF32},
      {"sqrt(i64)", Op::kSqrt, {kI64}, kF32},
      {"sigmoid(bool)", Op::kSigmoid, {kBool}, kF32},
      {"pow(i32, f16)", Op::kPow, {kI32, kF16}, kF16},
      {"where(bool, i32, f16)", Op::kWhere, {kBool, kI32, kF16}, kF16},
      {"where(bool, i32, i64)", Op::kWhere, {kBool, kI32, kI64}, kI64},
  };
  for (const PromotionCase& c : cases) {
    SCOPED_TRACE(c.label);
    Xs xs;
    for (size_t k = 0; k < c.dtypes.size(); ++k) {
      Domain dom = test_util::InputDomain(c.op, static_cast<int>(k), c.dtypes[k]);
      if (c.op == Op::kPow && k == 0) dom = Domain::kPositive;  // float exponent: positive base
      xs.push_back(RandomTensor({65}, c.dtypes[k], dom));
    }
    const Tensor got = PublicOps().at(c.op)(xs, kF32);
    EXPECT_EQ(got.dtype(), c.expected) << c.label << " gave " << DTypeName(got.dtype());
    // The values too (this also checks the reference's own promotion).
    const Expected want = Reference(c.op, AsOperands(xs));
    EXPECT_EQ(want.dtype, c.expected) << "test_util::ExpectedDTypes disagrees on " << c.label;
    CheckOp(c.op, xs);
  }
}

TEST(OpsPromotionTest, ScalarsAreWeak) {
  struct Case {
    const char* label;
    std::function<Tensor(const Tensor&)> fn;
    DType input, expected;
  };
  const std::vector<Case> cases = {
      {"bf16 * 0.5", [](const Tensor& t) { return t * 0.5; }, kBF16, kBF16},
      {"f16 + 1.0", [](const Tensor& t) { return t + 1.0; }, kF16, kF16},
      {"i32 + 2.0", [](const Tensor& t) { return t + 2.0; }, kI32, kF32},
      {"i64 * 0.5", [](const Tensor& t) { return t * 0.5; }, kI64, kF32},
      {"bool - 1.0", [](const Tensor& t) { return t - 1.0; }, kBool, kF32},
      {"pow(i32, 2.0)", [](const Tensor& t) { return pow(t, 2.0); }, kI32, kF32},
      {"lt(bf16, 0.0)", [](const Tensor& t) { return lt(t, 0.0); }, kBF16, kBool},
      {"where(c, i32, 2.0)", [](const Tensor& t) { return where(gt(t, 0.0), t, 2.0); }, kI32, kF32},
  };
  for (const Case& c : cases) {
    const Tensor x = RandomTensor({5}, c.input);
    const Tensor got = c.fn(x);
    EXPECT_EQ(got.dtype(), c.expected) << c.label << " gave " << DTypeName(got.dtype());
    EXPECT_EQ(got.shape(), Shape{5}) << c.label;
  }
}

// Function and operator spellings are the same op.
TEST(OpsSpellingTest, FunctionsAndOperatorsAgree) {
  const Tensor a = RandomTensor({6, 4}, kF32);
  const Tensor b = RandomTensor({6, 4}, kF32, Domain::kNonZero);
  EXPECT_EQ(add(a, b).to_vector(), (a + b).to_vector());
  EXPECT_EQ(sub(a, b).to_vector(), (a - b).to_vector());
  EXPECT_EQ(mul(a, b).to_vector(), (a * b).to_vector());
  EXPECT_EQ(div(a, b).to_vector(), (a / b).to_vector());
  EXPECT_EQ(neg(a).to_vector(), (-a).to_vector());
  EXPECT_EQ(gelu(a).to_vector(), gelu(a, "none").to_vector());
  EXPECT_NE(gelu(a).to_vector(), gelu(a, "tanh").to_vector());
  // The same tensor on both sides is lifted once; the values are still right.
  EXPECT_TRUE(AllClose(a * a, Reference(Op::kMul, {a, a}), "a * a"));
  EXPECT_TRUE(AllClose(a - a, Reference(Op::kSub, {a, a}), "a - a"));
}

// ------------------------------------------------- the helpers catch bugs

// The comparison must fail on the mistakes the op tests look for.
TEST(TestUtilTest, AllCloseCatchesMismatches) {
  const Tensor x = Tensor::from_vector(std::vector<double>{1.0, -2.0, NAN, INFINITY, 0.25}, {5}, kBF16);
  const Expected exact = {.shape = {5}, .dtype = kBF16, .values = {1.0, -2.0, NAN, INFINITY, 0.25}};
  EXPECT_TRUE(AllClose(x, exact, "exact"));
  Expected off_by_ulps = exact;
  off_by_ulps.values[1] = -2.0 * (1 + 2.0 * 0x1p-7);  // two bf16 ulps
  const ::testing::AssertionResult result = AllClose(x, off_by_ulps, "two ulps");
  EXPECT_FALSE(result);
  EXPECT_THAT(result.message(), ::testing::AllOf(::testing::HasSubstr("two ulps"), ::testing::HasSubstr("[1]"),
                                                 ::testing::HasSubstr("bfloat16[5]")));
  Expected nan_where_value = exact;
  nan_where_value.values[2] = 3.0;
  EXPECT_FALSE(AllClose(x, nan_where_value, "NaN for a value"));
  Expected value_where_nan = exact;
  value_where_nan.values[0] = NAN;
  EXPECT_FALSE(AllClose(x, value_where_nan, "a value for NaN"));
  Expected wrong_inf = exact;
  wrong_inf.values[3] = -INFINITY;
  EXPECT_FALSE(AllClose(x, wrong_inf, "-inf for inf"));
  Expected wrong_dtype = exact;
  wrong_dtype.dtype = kF16;
  EXPECT_FALSE(AllClose(x, wrong_dtype, "dtype"));
  Expected wrong_shape = exact;
  wrong_shape.shape = {5, 1};
  EXPECT_FALSE(AllClose(x, wrong_shape, "shape"));
  // Integers are exact.
  const Tensor i = Tensor::from_vector(std::vector<int64_t>{1, 2, 3}, {3});
  EXPECT_TRUE(AllClose(i, {.shape = {3}, .dtype = kI64, .values = {1, 2, 3}}, "ints"));
  EXPECT_FALSE(AllClose(i, {.shape = {3}, .dtype = kI64, .values = {1, 2, 4}}, "ints off by one"));
}

TEST(TestUtilTest, ReferenceBroadcastsPromotesAndRounds) {
  const Tensor a = Tensor::from_vector(std::vector<int32_t>{1, 2, 3}, {3, 1});
  const Tensor b = Tensor::from_vector(std::vector<double>{0.5, -1.5}, {2}, kF16);
  const Expected sum = Reference(Op::kAdd, {a, b});
  EXPECT_EQ(sum.dtype, kF16);
  EXPECT_EQ(sum.shape, (Shape{3, 2}));
  EXPECT_EQ(sum.values, (std::vector<double>{1.5, -0.5, 2.5, 0.5, 3.5, 1.5}));
  const Expected cast = Reference(Op::kCast, {Tensor::from_vector(std::vector<float>{-2.75f, 2.75f}, {2})}, kI32);
  EXPECT_EQ(cast.values, (std::vector<double>{-2, 2}));
  const Expected less = Reference(Op::kLt, {b, 0.0});
  EXPECT_EQ(less.dtype, kBool);
  EXPECT_EQ(less.values, (std::vector<double>{0, 1}));
}

// ---------------------------------------------------------------------- GPU

TEST(OpsCudaTest, RepresentativeOpsMatchTheCpuReference) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda();
  const std::vector<Op> ops = {Op::kCopy, Op::kCast,    Op::kAdd,  Op::kDiv,   Op::kNeg,     Op::kExp,
                               Op::kLog,  Op::kSigmoid, Op::kGelu, Op::kGeluTanh, Op::kRsqrt, Op::kPow,
                               Op::kMaximum, Op::kWhere, Op::kLt,  Op::kEq,
                               // issue 24's: libm calls, compositions, rounding, a prelude helper
                               Op::kSin, Op::kCos, Op::kErf, Op::kLog1p, Op::kExpm1, Op::kSilu, Op::kSoftplus,
                               Op::kFloor, Op::kCeil, Op::kRound, Op::kSign};
  for (Op op : ops) {
    const int arity = graph::Info(op).arity;
    for (DType dtype : {kF32, kBF16, kF16, kI32}) {
      if (graph::Info(op).dtype_rule == graph::DTypeRule::kFloat && dtype == kI32 && op != Op::kDiv) continue;
      SCOPED_TRACE(absl::StrCat(OpLabel(op), " ", DTypeName(dtype)));
      const DType cast_to = dtype == kF32 ? kBF16 : kF32;
      auto make = [&](int k, const Shape& shape) {
        return RandomTensor(shape, OperandDType(op, k, dtype), OperandDomain(op, k, dtype), gpu);
      };
      // Contiguous, several blocks with a ragged tail.
      for (const Shape& shape : std::vector<Shape>{{1}, {4097}, {1 << 20 | 3}}) {
        Xs xs;
        for (int k = 0; k < arity; ++k) xs.push_back(make(k, shape));
        CheckOp(op, xs, cast_to);
      }
      // Transposed / narrowed.
      Xs strided;
      for (int k = 0; k < arity; ++k) {
        const DType d = OperandDType(op, k, dtype);
        const Domain dom = OperandDomain(op, k, dtype);
        strided.push_back(k == 0 ? RandomTransposed(33, 65, d, dom, gpu) : RandomNarrowed(33, 65, d, dom, gpu));
      }
      CheckOp(op, strided, cast_to);
      // Broadcast / expanded.
      Xs bcast;
      if (arity == 1) {
        bcast.push_back(make(0, {33, 1}).expand({33, 17}));
      } else {
        const Shape shapes[3] = {{33, 1}, {1, 17}, {17}};
        for (int k = 0; k < arity; ++k) bcast.push_back(make(k, shapes[k]));
      }
      CheckOp(op, bcast, cast_to);
    }
  }
}

TEST(OpsCudaTest, ScalarsAndEmptyOnGpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda();
  const Tensor x = RandomTensor({1000}, kBF16, Domain::kAny, gpu);
  CheckScalarCase("2.0 - x", Op::kSub, [](const Tensor& t) { return 2.0 - t; }, {2.0, x}, x);
  CheckScalarCase("pow(x, 3.0)", Op::kPow, [](const Tensor& t) { return pow(t, 3.0); }, {x, 3.0}, x);
  const Tensor empty = RandomTensor({0}, kF32, Domain::kAny, gpu);
  CheckOp(Op::kExp, {empty});
  const Tensor specials = Tensor::from_vector(std::vector<double>{NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0}, {6},
                                              kF32, gpu);
  for (Op op : {Op::kExp, Op::kLog, Op::kRsqrt, Op::kSigmoid, Op::kTanh, Op::kSilu, Op::kSoftplus, Op::kRound,
                Op::kSign, Op::kLog1p, Op::kExpm1, Op::kErf}) {
    CheckOp(op, {specials});
  }
  CheckOp(Op::kMaximum, {specials, specials.narrow(0, 0, 1).expand({6})});
}

// fb_sigmoid (ex2.approx and rcp.approx, backend/cuda/cuda_printer.cc) over
// the whole range where sigmoid is a normal float, and the gelu whose
// 1 + tanh becomes 2 * sigmoid (backend/one_plus_tanh.h), against float64.
TEST(OpsCudaTest, SigmoidAndOnePlusTanhAcrossTheRange) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda();
  std::vector<double> grid;
  for (int i = -87000; i <= 87000; i += 7) grid.push_back(i * 1e-3 + 1e-4 * (i % 13));
  const Tensor x = Tensor::from_vector(grid, {static_cast<int64_t>(grid.size())}, kF32, gpu);
  const std::vector<double> xs = x.to_double_vector();
  const std::vector<double> sig = compile([](const Tensor& t) { return sigmoid(t); })(x).to_double_vector();
  for (size_t i = 0; i < xs.size(); ++i) {
    // The rounding of x * log2(e) grows with |x|, as in Triton's exp.
    const double want = 1 / (1 + std::exp(-xs[i]));
    ASSERT_LE(std::fabs(sig[i] - want), (1e-6 + 5e-8 * std::fabs(xs[i])) * want) << "sigmoid(" << xs[i] << ")";
  }
  const Tensor g = x * (10.0 / 87);  // [-10, 10]
  const std::vector<double> gs = g.to_double_vector();
  const std::vector<double> gelu = compile([](const Tensor& t) { return testing_workloads::ManualGelu(t); })(g).to_double_vector();
  for (size_t i = 0; i < gs.size(); ++i) {
    const double want = testing_workloads::GeluRef(gs[i]);
    ASSERT_NEAR(gelu[i], want, 2e-6 * std::max(1.0, std::fabs(want))) << "gelu(" << gs[i] << ")";
  }
}

}  // namespace
}  // namespace fusebox
