// In-place ops (add_, sub_, mul_, div_, copy_, fill_, zero_) against a float64
// reference: dtypes, broadcast operands, views written through to their base,
// operands that alias self, errors that leave self unchanged, the version
// counter shared by views, and compile(): a captured global changed in place
// is seen without a recompile, and an in-place op inside a compiled function
// is a graph break. InplaceOnDevice runs on the CPU and on CUDA; the CUDA
// cases skip without a device.
#include <functional>
#include <string>
#include <vector>

#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"
#include "tests/test_util.h"

namespace fusebox {
namespace {

using graph::Op;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using test_util::AllClose;
using test_util::Domain;
using test_util::Expected;
using test_util::Operand;
using test_util::RandomTensor;
using test_util::Reference;
using test_util::RoundTo;

constexpr DType kF32 = DType::kFloat32, kF16 = DType::kFloat16, kBF16 = DType::kBFloat16, kI32 = DType::kInt32,
                kI64 = DType::kInt64, kBool = DType::kBool;

// ------------------------------------------------------------------ helpers

struct InPlaceOp {
  Op op;
  const char* name;
  std::function<void(const Tensor&, const Tensor&)> tensor;
  std::function<void(const Tensor&, double)> scalar;
};

const std::vector<InPlaceOp>& ArithmeticOps() {
  static const auto* ops = new std::vector<InPlaceOp>{
      {Op::kAdd, "add_", [](const Tensor& s, const Tensor& o) { s.add_(o); }, [](const Tensor& s, double o) { s.add_(o); }},
      {Op::kSub, "sub_", [](const Tensor& s, const Tensor& o) { s.sub_(o); }, [](const Tensor& s, double o) { s.sub_(o); }},
      {Op::kMul, "mul_", [](const Tensor& s, const Tensor& o) { s.mul_(o); }, [](const Tensor& s, double o) { s.mul_(o); }},
      {Op::kDiv, "div_", [](const Tensor& s, const Tensor& o) { s.div_(o); }, [](const Tensor& s, double o) { s.div_(o); }},
  };
  return *ops;
}

// What `self <op>= other` leaves in self: the out-of-place reference, cast to self's dtype.
Expected InPlaceRef(Op op, const Tensor& self_before, const Operand& other) {
  Expected want = Reference(op, {self_before, other});
  want.dtype = self_before.dtype();
  for (double& v : want.values) v = RoundTo(want.dtype, v);
  return want;
}

std::string What(const char* name, const Tensor& self, const Operand& other) {
  return absl::StrCat(name, "(", test_util::Describe({self, other}), ")");
}

// A [rows, cols] reference matrix from row-major values.
double At(const std::vector<double>& v, int64_t cols, int64_t i, int64_t j) { return v[i * cols + j]; }

void ExpectValues(const Tensor& t, const std::vector<double>& want, double tol, const std::string& what) {
  const std::vector<double> got = t.to_double_vector();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << what << ": element " << i;
  }
}

// The checks that run on every device: cpu, and cuda where there is one.
class InplaceOnDevice : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    if (GetParam().is_cuda() && !cuda_available()) GTEST_SKIP() << "no usable CUDA device";
  }
};

INSTANTIATE_TEST_SUITE_P(Devices, InplaceOnDevice, ::testing::Values(Device::cpu(), Device::cuda()),
                         [](const ::testing::TestParamInfo<Device>& info) {
                           return std::string(info.param.is_cpu() ? "cpu" : "cuda");
                         });

// -------------------------------------------------- arithmetic per dtype

// Each op with a same-shape tensor, two broadcast tensors and a scalar, for
// every dtype the op can write back into.
TEST_P(InplaceOnDevice, ArithmeticMatchesFloat64Reference) {
  const Device device = GetParam();
  for (const InPlaceOp& op : ArithmeticOps()) {
    for (DType dtype : {kF32, kF16, kBF16, kI32}) {
      if (op.op == Op::kDiv && dtype == kI32) continue;  // float result: an error (ErrorsLeaveSelfUnchanged)
      const Domain domain = op.op == Op::kDiv ? Domain::kNonZero : Domain::kAny;
      for (const Shape& other_shape : {Shape{7, 9}, Shape{9}, Shape{7, 1}}) {
        const Tensor self = RandomTensor({7, 9}, dtype, Domain::kAny, device);
        const Tensor other = RandomTensor(other_shape, dtype, domain, device);
        const Tensor before = self.clone();
        const Expected want = InPlaceRef(op.op, before, other);
        op.tensor(self, other);
        EXPECT_TRUE(AllClose(self, want, What(op.name, before, other)));
      }
      if (IsFloating(dtype)) {
        const Tensor self = RandomTensor({7, 9}, dtype, Domain::kAny, device);
        const Tensor before = self.clone();
        const Expected want = InPlaceRef(op.op, before, 1.75);
        op.scalar(self, 1.75);
        EXPECT_TRUE(AllClose(self, want, What(op.name, before, 1.75)));
      }
    }
    // A wider result that still casts back: float32 into float16, int32 into float32.
    for (auto [self_dtype, other_dtype] : {std::pair{kF16, kF32}, std::pair{kF32, kI32}}) {
      const Tensor self = RandomTensor({5, 3}, self_dtype, Domain::kAny, device);
      const Tensor other = RandomTensor({3}, other_dtype, Domain::kNonZero, device);
      const Tensor before = self.clone();
      const Expected want = InPlaceRef(op.op, before, other);
      op.tensor(self, other);
      EXPECT_TRUE(AllClose(self, want, What(op.name, before, other)));
    }
  }
}

// -------------------------------------------------- views and aliasing

// Writes through slices, narrowed and transposed views land in the base tensor.
TEST_P(InplaceOnDevice, ViewsWriteThroughToTheBase) {
  const Device device = GetParam();
  const Tensor base = RandomTensor({4, 6}, kF32, Domain::kAny, device);
  std::vector<double> want = base.to_double_vector();
  auto expect = [&](const char* what) { ExpectValues(base, want, 1e-6, what); };

  base.slice(0, 1, 3).fill_(0);  // rows 1 and 2
  for (int64_t j = 0; j < 6; ++j) want[6 + j] = want[12 + j] = 0;
  expect("slice(0, 1, 3).fill_(0)");

  base.transpose(0, 1).add_(1.5);
  for (double& v : want) v += 1.5;
  expect("transpose(0, 1).add_(1.5)");

  // A window with an offset, transposed, times a [3, 2] tensor: base[1 + j][2 + i] *= m[i][j].
  const Tensor m = RandomTensor({3, 2}, kF32, Domain::kAny, device);
  const std::vector<double> mv = m.to_double_vector();
  base.narrow(0, 1, 2).narrow(1, 2, 3).transpose(0, 1).mul_(m);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 2; ++j) want[(1 + j) * 6 + 2 + i] = static_cast<float>(want[(1 + j) * 6 + 2 + i] * mv[i * 2 + j]);
  }
  expect("narrow.narrow.transpose.mul_");

  // Transposed self, broadcast other: base[i][j] -= r[i].
  const Tensor r = RandomTensor({4}, kF32, Domain::kAny, device);
  const std::vector<double> rv = r.to_double_vector();
  base.transpose(0, 1).sub_(r);
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 6; ++j) want[i * 6 + j] = static_cast<float>(want[i * 6 + j] - rv[i]);
  }
  expect("transpose(0, 1).sub_(r)");

  // copy_ into a column, from an int32 tensor (cast), broadcast from [1].
  base.narrow(1, 5, 1).copy_(Tensor::from_vector(std::vector<int32_t>{-3}, {1}, device));
  for (int64_t i = 0; i < 4; ++i) want[i * 6 + 5] = -3;
  expect("narrow(1, 5, 1).copy_(int32[1])");
}

// Operands that share self's memory are read before self is written.
TEST_P(InplaceOnDevice, OperandsAliasingSelfAreReadFirst) {
  const Device device = GetParam();
  const Tensor x = RandomTensor({5, 5}, kF32, Domain::kAny, device);
  const std::vector<double> xv = x.to_double_vector();

  x.add_(x);
  std::vector<double> want(25);
  for (int i = 0; i < 25; ++i) want[i] = 2 * xv[i];
  ExpectValues(x, want, 1e-6, "x.add_(x)");

  const std::vector<double> doubled = want;
  x.add_(x.transpose(0, 1));
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t j = 0; j < 5; ++j) want[i * 5 + j] = At(doubled, 5, i, j) + At(doubled, 5, j, i);
  }
  ExpectValues(x, want, 1e-6, "x.add_(x.transpose(0, 1))");

  const Tensor y = RandomTensor({5, 5}, kF32, Domain::kAny, device);
  const std::vector<double> yv = y.to_double_vector();
  y.copy_(y.transpose(0, 1));
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t j = 0; j < 5; ++j) want[i * 5 + j] = At(yv, 5, j, i);
  }
  ExpectValues(y, want, 0, "y.copy_(y.transpose(0, 1))");

  // Overlapping windows of one vector: z[i] += z[i + 1] with the old z[i + 1].
  const Tensor z = RandomTensor({8}, kF32, Domain::kAny, device);
  std::vector<double> zv = z.to_double_vector();
  z.slice(0, 0, 7).add_(z.slice(0, 1, 8));
  for (int i = 0; i < 7; ++i) zv[i] = static_cast<float>(zv[i] + zv[i + 1]);
  ExpectValues(z, zv, 1e-6, "z[0:7].add_(z[1:8])");
}

// -------------------------------------------------- copy_, fill_, zero_

TEST_P(InplaceOnDevice, CopyFillAndZeroCastAsToDType) {
  const Device device = GetParam();
  // Casts as to(DType): float to int truncates, any value to bool is != 0.
  const Tensor f = Tensor::from_vector({-1.5f, 2.7f, 0.0f, 3.0f}, {4}, device);
  const Tensor i = Tensor::empty({2, 4}, kI32, device);
  i.copy_(f);  // broadcast over rows
  ExpectValues(i, {-1, 2, 0, 3, -1, 2, 0, 3}, 0, "int32.copy_(float32)");
  const Tensor b = Tensor::empty({4}, kBool, device);
  b.copy_(f);
  ExpectValues(b, {1, 1, 0, 1}, 0, "bool.copy_(float32)");
  const Tensor h = Tensor::empty({4}, kF16, device);
  h.copy_(i.slice(0, 1, 2).squeeze(0));
  ExpectValues(h, {-1, 2, 0, 3}, 0, "float16.copy_(int32 view)");

  for (DType dtype : {kF32, kF16, kBF16, kI32, kI64, kBool}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor t = RandomTensor({3, 4}, dtype, Domain::kAny, device);
    t.fill_(2.5);
    ExpectValues(t, std::vector<double>(12, RoundTo(dtype, 2.5)), 0, "fill_(2.5)");
    t.transpose(0, 1).zero_();
    ExpectValues(t, std::vector<double>(12, 0), 0, "transpose.zero_()");
  }
}

// -------------------------------------------------- errors and versions

// Each mistake throws a fusebox::Error naming the op, and self keeps its values and version.
TEST(InplaceTest, ErrorsLeaveSelfUnchanged) {
  const Tensor x = RandomTensor({3, 4}, kF32);
  const Tensor n = RandomTensor({3, 4}, kI32);
  const std::vector<double> xv = x.to_double_vector(), nv = n.to_double_vector();
  auto unchanged = [&] {
    EXPECT_EQ(x.to_double_vector(), xv);
    EXPECT_EQ(n.to_double_vector(), nv);
    EXPECT_EQ(x.version(), 0u);
    EXPECT_EQ(n.version(), 0u);
  };

  EXPECT_THAT([&] { x.add_(RandomTensor({2, 3, 4}, kF32)); },
              ThrowsMessage<Error>(AllOf(HasSubstr("add_: other of shape [2, 3, 4] cannot be broadcast to self's "
                                                   "shape [3, 4]"),
                                         HasSubstr("never changes self's shape"))));
  EXPECT_THAT([&] { x.mul_(RandomTensor({5, 4}, kF32)); },
              ThrowsMessage<Error>(HasSubstr("mul_: other of shape [5, 4] cannot be broadcast")));
  EXPECT_THAT([&] { x.copy_(RandomTensor({4, 3}, kF32)); },
              ThrowsMessage<Error>(HasSubstr("copy_: src of shape [4, 3] cannot be broadcast to self's shape [3, 4]")));
  const std::string int_cast = "can't be cast to the desired output type int32";
  EXPECT_THAT([&] { n.add_(x); },
              ThrowsMessage<Error>(AllOf(HasSubstr("add_: result type float32"), HasSubstr(int_cast))));
  EXPECT_THAT([&] { n.sub_(2.5); }, ThrowsMessage<Error>(AllOf(HasSubstr("sub_: result type float32"), HasSubstr(int_cast))));
  EXPECT_THAT([&] { n.div_(n); }, ThrowsMessage<Error>(AllOf(HasSubstr("div_: result type float32"), HasSubstr(int_cast))));
  EXPECT_THAT([&] { RandomTensor({3}, kBool).add_(RandomTensor({3}, kBool)); },
              ThrowsMessage<Error>(HasSubstr("does not support bool")));
  EXPECT_THAT([&] { x.add_(Tensor()); }, ThrowsMessage<Error>(HasSubstr("add_: other is an undefined Tensor")));
  EXPECT_THAT([&] { Tensor().fill_(1.0); }, ThrowsMessage<Error>(HasSubstr("undefined")));
  unchanged();

  // An expanded self would write one element many times.
  const Tensor row = RandomTensor({1, 4}, kF32);
  EXPECT_THAT([&] { row.expand({3, 4}).add_(1.0); },
              ThrowsMessage<Error>(AllOf(HasSubstr("add_: more than one element of"), HasSubstr("clone()"))));
  EXPECT_EQ(row.version(), 0u);
}

TEST(InplaceTest, VersionCountsWritesAndIsSharedByViews) {
  const Tensor w = RandomTensor({4, 4}, kF32);
  const Tensor top = w.slice(0, 0, 2);
  EXPECT_EQ(w.version(), 0u);
  w.add_(1.0);
  EXPECT_EQ(w.version(), 1u);
  EXPECT_EQ(top.version(), 1u);
  top.mul_(2.0);  // through a view: the base sees it
  EXPECT_EQ(w.version(), 2u);
  EXPECT_EQ(w.transpose(0, 1).version(), 2u);  // a view made later shares it too
  w.copy_(RandomTensor({4}, kF32));
  w.fill_(3.0);
  w.zero_();
  w.sub_(w).div_(1.5);  // chains: each returns self
  EXPECT_EQ(w.version(), 7u);
  EXPECT_THROW(w.add_(RandomTensor({3}, kF32)), Error);
  EXPECT_EQ(w.version(), 7u);  // a failed op writes nothing
  // New memory starts at 0: out-of-place results and clones.
  EXPECT_EQ((w + 1.0).version(), 0u);
  EXPECT_EQ(w.clone().version(), 0u);
  EXPECT_EQ(w.version(), 7u);
}

// -------------------------------------------------- compile()

// The plan reads a captured global at run time: in-place changes made between
// calls are seen, and the plan is reused.
TEST_P(InplaceOnDevice, CompiledFunctionSeesInPlaceChangeOfCapturedGlobal) {
  const Device device = GetParam();
  const Tensor w = RandomTensor({16}, kF32, Domain::kAny, device);
  auto c = compile([&](const Tensor& x) { return x * w + 1.0; });
  const Tensor x = RandomTensor({16}, kF32, Domain::kAny, device);
  auto check = [&](const char* what) {
    const std::vector<double> xv = x.to_double_vector(), wv = w.to_double_vector();
    std::vector<double> want(16);
    for (int i = 0; i < 16; ++i) want[i] = static_cast<float>(static_cast<float>(xv[i] * wv[i]) + 1.0);
    ExpectValues(c(x), want, 1e-5, what);
  };
  check("first call");
  const int64_t plan_compiles = c.stats().plan_compiles;
  w.add_(1.0);
  check("after w.add_(1.0)");
  w.copy_(RandomTensor({16}, kF32, Domain::kAny, device));
  check("after w.copy_(...)");
  w.slice(0, 4, 8).zero_();
  check("after w.slice(0, 4, 8).zero_()");
  EXPECT_EQ(c.stats().calls, 4);
  EXPECT_EQ(c.stats().plan_compiles, plan_compiles);
  EXPECT_EQ(c.stats().graph_breaks, 0);
  // explain() tells the global from the argument, with the version it was read at.
  EXPECT_THAT(c.explain(), HasSubstr(absl::StrCat("global tensor (not an argument): float32[16] strides [1] on ",
                                                  device.str(), ", version 3")));
}

// In-place ops inside the function: the first reads the global before and
// after it changes, the second updates a lazy value. Lines for explain().
int mul_line = 0, add_line = 0;
Tensor UpdatesInPlace(const Tensor& x, const Tensor& w) {
  const Tensor a = x * w;  // reads the old w
  mul_line = __LINE__ + 1;
  w.mul_(2.0);
  Tensor y = a + x * w;  // reads the new w
  add_line = __LINE__ + 1;
  y.add_(1.0);
  return exp(y);
}

TEST(InplaceTest, InPlaceOpInsideCompiledFunctionIsAGraphBreak) {
  const Tensor x = RandomTensor({33}, kF32);
  const Tensor w = RandomTensor({33}, kF32);
  const Tensor w_eager = w.clone();
  auto c = compile([&](const Tensor& in) { return UpdatesInPlace(in, w); });
  for (int call = 1; call <= 2; ++call) {
    SCOPED_TRACE(call);
    const std::vector<double> want = UpdatesInPlace(x, w_eager).to_double_vector();
    const Tensor got = c(x);
    EXPECT_FALSE(got.is_lazy());
    ExpectValues(got, want, 1e-5, "compiled vs eager");  // fused: contractions may differ
    ExpectValues(w, w_eager.to_double_vector(), 0, "the global after the call");
    EXPECT_EQ(w.version(), static_cast<uint64_t>(call));
  }
  const CompileStats stats = c.stats();
  EXPECT_EQ(stats.graphs, 6);
  EXPECT_EQ(stats.graph_breaks, 4);
  EXPECT_EQ(stats.plan_compiles + stats.cache_hits, 6);
  EXPECT_GE(stats.cache_hits, 3);  // at least the second call's plans
  const std::string explain = c.explain();
  EXPECT_THAT(explain, HasSubstr(absl::StrCat("ended by: in-place op 'mul_' at inplace_test.cc:", mul_line)));
  EXPECT_THAT(explain, HasSubstr(absl::StrCat("ended by: in-place op 'add_' at inplace_test.cc:", add_line)));
}

TEST(InplaceTest, FullgraphTurnsAnInPlaceOpIntoAnError) {
  const Tensor w = RandomTensor({8}, kF32);
  const std::vector<double> wv = w.to_double_vector();
  const int line = __LINE__ + 1;
  auto c = compile([&](const Tensor& x) { w.add_(1.0); return x * w; }, CompileOptions{.fullgraph = true});
  EXPECT_THAT([&] { c(RandomTensor({8}, kF32)); },
              ThrowsMessage<Error>(HasSubstr(absl::StrCat(
                  "graph break with fullgraph=true: in-place op 'add_' at inplace_test.cc:", line))));
  EXPECT_EQ(w.to_double_vector(), wv);
  EXPECT_EQ(w.version(), 0u);
  // Without fullgraph the same function runs; the break comes before any op, and still counts.
  auto relaxed = compile([&](const Tensor& x) { w.add_(1.0); return x * w; });
  const Tensor x = RandomTensor({8}, kF32);
  const std::vector<double> xv = x.to_double_vector(), got = relaxed(x).to_double_vector();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_FLOAT_EQ(got[i], xv[i] * static_cast<float>(wv[i] + 1));
  EXPECT_EQ(relaxed.stats().graph_breaks, 1);
  EXPECT_EQ(w.version(), 1u);
}

TEST(InplaceTest, VersionOfALazyTensorIsZeroAndReadsNothing) {
  bool lazy = false;
  uint64_t version = 1;
  auto c = compile([&](const Tensor& x) {
    Tensor y = x * 2.0;
    version = y.version();
    lazy = y.is_lazy();
    return y;
  });
  c(RandomTensor({4}, kF32));
  EXPECT_EQ(version, 0u);
  EXPECT_TRUE(lazy);
  EXPECT_EQ(c.stats().graph_breaks, 0);
}

// -------------------------------------------------- CUDA

TEST(InplaceCudaTest, CopyAcrossDevices) {
  SKIP_WITHOUT_CUDA();
  // Host values into a transposed window of a GPU tensor, cast to float16.
  const Tensor gpu = zeros({4, 6}, Device::cuda(), kF16);
  const Tensor src = RandomTensor({3, 2}, kF32);
  const std::vector<double> sv = src.to_double_vector();
  gpu.narrow(0, 1, 2).narrow(1, 2, 3).transpose(0, 1).copy_(src);
  std::vector<double> want(24, 0);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 2; ++j) want[(1 + j) * 6 + 2 + i] = RoundTo(kF16, sv[i * 2 + j]);
  }
  ExpectValues(gpu, want, 0, "cuda view.copy_(cpu)");
  EXPECT_EQ(gpu.version(), 1u);
  // And back into a host view, broadcast.
  const Tensor host = zeros({3, 4}, Device::cpu(), kF32);
  host.slice(0, 1, 3).copy_(gpu.slice(0, 1, 2).narrow(1, 0, 4));  // gpu row 1 into host rows 1 and 2
  std::vector<double> host_want(12, 0);
  for (int64_t j = 0; j < 4; ++j) host_want[4 + j] = host_want[8 + j] = want[6 + j];
  ExpectValues(host, host_want, 0, "cpu view.copy_(cuda)");
}

TEST(InplaceCudaTest, OtherOnAnotherDeviceIsAnError) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = RandomTensor({4}, kF32, Domain::kAny, Device::cuda());
  EXPECT_THAT([&] { x.add_(RandomTensor({4}, kF32)); },
              ThrowsMessage<Error>(HasSubstr("add_: other is on cpu, self on cuda:0")));
  EXPECT_EQ(x.version(), 0u);
}

}  // namespace
}  // namespace fusebox
