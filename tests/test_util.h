// Shared helpers for the op tests: fresh random inputs per dtype in a domain
// each op is defined on, a float64 reference evaluator driven by the op
// table's `reference` column (with its own, independent copy of the PyTorch
// promotion rules), and a comparison that says where and how results differ.
// Header-only; every random draw comes from one engine per test process whose
// seed is printed on failure (rerun with FUSEBOX_TEST_SEED=<seed>).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <ostream>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/cuda/nvrtc.h"
#include "backend/ptx_summary.h"
#include "frontend/fusebox.h"
#include "graph/op.h"
#include "gtest/gtest.h"

// Readable GoogleTest output for dtypes, devices and ops ("float32", "cuda:0", "gelu"), found by
// argument-dependent lookup; test-only, so it lives here.
namespace fusebox {
inline void PrintTo(DType dtype, std::ostream* os) { *os << DTypeName(dtype); }
inline void PrintTo(Device device, std::ostream* os) { *os << device.str(); }
namespace graph {
inline void PrintTo(Op op, std::ostream* os) { *os << OpName(op) << (op == Op::kGeluTanh ? "(tanh)" : ""); }
}  // namespace graph
}  // namespace fusebox

namespace fusebox::test_util {

// How often `part` occurs in `text`, without overlaps (generated sources, PTX).
inline int64_t CountSubstr(const std::string& text, const std::string& part) {
  int64_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

// ---------------------------------------------------------------- randomness

// NVRTC source -> PTX + cubin whose log holds ptxas's -v report (registers,
// spills). NVRTC on the H200 machine leaves that report out when ptxas saw
// the same PTX before, in this process or another (the test shards, the bench):
// it caches by PTX, so a comment does not help. An empty kernel named after
// this process and compile makes every module new; a log still without the
// report is compiled again, up to three times.
inline absl::StatusOr<cuda::NvrtcOutput> CompileWithPtxasReport(const std::string& source, const std::string& name,
                                                                int arch, bool arch_specific = false) {
  static std::atomic<int64_t> compiles{0};
  absl::StatusOr<cuda::NvrtcOutput> out;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::string unique = absl::StrCat(source, "extern \"C\" __global__ void fusebox_test_unique_",
                                            static_cast<int64_t>(::getpid()), "_", compiles++, "() {}\n");
    out = cuda::CompileWithNvrtc(unique, name, arch, {}, arch_specific);
    if (!out.ok() || backend::SummarizePtx(out->ptx, out->log).registers > 0) break;
  }
  return out;
}

inline uint64_t Seed() {
  static const uint64_t seed = [] {
    if (const char* env = std::getenv("FUSEBOX_TEST_SEED"); env && *env) return static_cast<uint64_t>(std::strtoull(env, nullptr, 10));
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) | rd();
  }();
  return seed;
}

inline std::mt19937_64& Rng() {
  static std::mt19937_64 rng(Seed());
  return rng;
}

// Where an op's operand is drawn from, so that results stay finite and
// well-conditioned (floats / integers).
enum class Domain {
  kAny,       // [-3, 3]        / [-10, 10]; bools 50/50
  kPositive,  // [0.1, 4]       / [1, 10]    (log, sqrt, rsqrt, pow's float base)
  kNonZero,   // ±[0.5, 3]      / ±[1, 10]   (divisors, pow's integer base)
  kExponent,  // [-2, 2]        / [-2, 3]    (pow's exponent)
  kCoarse,    // k/4 in [-2, 2] / [-3, 3]    (ties for comparisons, max/min, casts)
};

inline double RandomValue(DType dtype, Domain domain) {
  auto& rng = Rng();
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto integer = [&](int64_t lo, int64_t hi) {
    return static_cast<double>(std::uniform_int_distribution<int64_t>(lo, hi)(rng));
  };
  auto sign = [&] { return integer(0, 1) == 0 ? -1.0 : 1.0; };
  if (dtype == DType::kBool) return integer(0, 1);
  if (IsFloating(dtype)) {
    switch (domain) {
      case Domain::kAny: return uniform(-3, 3);
      case Domain::kPositive: return uniform(0.1, 4);
      case Domain::kNonZero: return sign() * uniform(0.5, 3);
      case Domain::kExponent: return uniform(-2, 2);
      case Domain::kCoarse: return integer(-8, 8) / 4.0;
    }
  }
  switch (domain) {
    case Domain::kAny: return integer(-10, 10);
    case Domain::kPositive: return integer(1, 10);
    case Domain::kNonZero: return sign() * integer(1, 10);
    case Domain::kExponent: return integer(-2, 3);
    case Domain::kCoarse: return integer(-3, 3);
  }
  return 0;
}

inline std::vector<double> RandomValues(int64_t n, DType dtype, Domain domain) {
  std::vector<double> values(n);
  for (double& v : values) v = RandomValue(dtype, domain);
  return values;
}

// A fresh contiguous tensor of random values.
inline Tensor RandomTensor(const Shape& shape, DType dtype, Domain domain = Domain::kAny,
                           Device device = Device::cpu()) {
  return Tensor::from_vector(RandomValues(Numel(shape), dtype, domain), shape, dtype, device);
}

// The domain operand `arg` of `op` is drawn from.
inline Domain InputDomain(graph::Op op, int arg, DType dtype) {
  using graph::Op;
  switch (op) {
    case Op::kLog:
    case Op::kLog1p:
    case Op::kSqrt:
    case Op::kRsqrt: return Domain::kPositive;
    case Op::kDiv: return arg == 1 ? Domain::kNonZero : Domain::kAny;
    case Op::kPow:
      if (arg == 1) return Domain::kExponent;
      return IsFloating(dtype) ? Domain::kPositive : Domain::kNonZero;
    case Op::kWhere: return arg == 0 ? Domain::kAny : Domain::kCoarse;
    case Op::kCopy:
    case Op::kCast:
    case Op::kMaximum:
    case Op::kMinimum:
    case Op::kEq:
    case Op::kNe:
    case Op::kLt:
    case Op::kLe:
    case Op::kGt:
    case Op::kGe: return Domain::kCoarse;
    default: return Domain::kAny;
  }
}

// --------------------------------------------------- non-contiguous layouts

// A [rows, cols] view of a fresh [cols, rows] tensor (strides [1, rows]).
inline Tensor RandomTransposed(int64_t rows, int64_t cols, DType dtype, Domain domain = Domain::kAny,
                               Device device = Device::cpu()) {
  return RandomTensor({cols, rows}, dtype, domain, device).transpose(0, 1);
}

// A [rows, cols] window (narrow of both dims, non-zero offset) of a larger tensor.
inline Tensor RandomNarrowed(int64_t rows, int64_t cols, DType dtype, Domain domain = Domain::kAny,
                             Device device = Device::cpu()) {
  return RandomTensor({rows + 3, cols + 5}, dtype, domain, device).narrow(0, 1, rows).narrow(1, 2, cols);
}

// ------------------------------------------------------ reference evaluator

using Operand = std::variant<Tensor, double>;

inline std::string Describe(const Tensor& t) {
  return absl::StrCat(DTypeName(t.dtype()), ShapeToString(t.shape()), "(strides ", ShapeToString(t.strides()),
                      ", offset ", t.storage_offset(), ") on ", t.device().str());
}

inline std::string Describe(const std::vector<Operand>& xs) {
  std::vector<std::string> parts;
  for (const Operand& x : xs) {
    if (const Tensor* t = std::get_if<Tensor>(&x)) {
      parts.push_back(Describe(*t));
    } else {
      parts.push_back(absl::StrCat("scalar ", std::get<double>(x)));
    }
  }
  return absl::StrJoin(parts, ", ");
}

// `v` converted to `dtype` as a stored value of it reads back.
inline double RoundTo(DType dtype, double v) {
  switch (dtype) {
    case DType::kFloat32: return static_cast<float>(v);
    case DType::kFloat16: return HalfToFloat(FloatToHalf(static_cast<float>(v)));
    case DType::kBFloat16: return BFloat16ToFloat(FloatToBFloat16(static_cast<float>(v)));
    case DType::kInt32: return static_cast<double>(static_cast<int32_t>(v));
    case DType::kInt64: return static_cast<double>(static_cast<int64_t>(v));
    case DType::kBool: return v != 0 ? 1.0 : 0.0;
  }
  return v;
}

// PyTorch's promote_types, written out here independently of tensor/dtype.cc
// so that the tests check the library's promotion rather than restate it.
inline DType PromoteRef(DType a, DType b) {
  if (a == b) return a;
  auto category = [](DType d) { return d == DType::kBool ? 0 : (IsFloating(d) ? 2 : 1); };
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  if (category(a) == 1) return DType::kInt64;  // i32 with i64
  return DType::kFloat32;                      // two different float types
}

// The dtype the operands are converted to, and the result's, for `op`.
struct RefDTypes {
  DType input;
  DType result;
};

inline RefDTypes ExpectedDTypes(graph::Op op, const std::vector<Operand>& xs, DType cast_to) {
  const graph::OpInfo& info = graph::Info(op);
  const bool where = info.dtype_rule == graph::DTypeRule::kWhere;
  bool have_tensor = false, have_scalar = false;
  DType common = DType::kBool;
  for (size_t k = 0; k < xs.size(); ++k) {
    if (where && k == 0) continue;
    if (const Tensor* t = std::get_if<Tensor>(&xs[k])) {
      common = have_tensor ? PromoteRef(common, t->dtype()) : t->dtype();
      have_tensor = true;
    } else {
      have_scalar = true;
    }
  }
  // A double scalar is a "weak" float: it keeps a float tensor's dtype.
  if (have_scalar && (!have_tensor || !IsFloating(common))) common = DType::kFloat32;
  switch (info.dtype_rule) {
    case graph::DTypeRule::kFloat: {
      const DType d = IsFloating(common) ? common : DType::kFloat32;
      return {d, d};
    }
    case graph::DTypeRule::kCompare: return {common, DType::kBool};
    case graph::DTypeRule::kCast: return {common, cast_to};
    default: return {common, common};
  }
}

inline Shape BroadcastRef(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      if (s[i] != 1) {
        EXPECT_TRUE(o == 1 || o == s[i]) << "test bug: shapes do not broadcast";
        o = s[i];
      }
    }
  }
  return out;
}

struct Expected {
  Shape shape;
  DType dtype = DType::kFloat32;
  std::vector<double> values;  // row-major, each already rounded to `dtype`
};

// `op` over broadcast `xs` in float64: each operand is read as stored, converted
// to the dtype the op computes in, passed through the table's reference, and
// the result rounded to the result dtype. `cast_to` is kCast's target.
inline Expected Reference(graph::Op op, const std::vector<Operand>& xs, DType cast_to = DType::kFloat32) {
  const graph::OpInfo& info = graph::Info(op);
  const RefDTypes dtypes = ExpectedDTypes(op, xs, cast_to);
  const bool where = info.dtype_rule == graph::DTypeRule::kWhere;
  std::vector<Shape> shapes;
  for (const Operand& x : xs) {
    if (const Tensor* t = std::get_if<Tensor>(&x)) shapes.push_back(t->shape());
  }
  Expected want{.shape = BroadcastRef(shapes), .dtype = dtypes.result};
  const int64_t n = Numel(want.shape);
  const size_t rank = want.shape.size();

  // Per operand: its values and, per output dim, its element stride (0 where broadcast).
  std::vector<std::vector<double>> values(xs.size());
  std::vector<std::vector<int64_t>> strides(xs.size(), std::vector<int64_t>(rank, 0));
  for (size_t k = 0; k < xs.size(); ++k) {
    const DType want_dtype = (where && k == 0) ? DType::kBool : dtypes.input;
    if (const Tensor* t = std::get_if<Tensor>(&xs[k])) {
      values[k] = t->to_double_vector();
      const Shape& s = t->shape();
      int64_t stride = 1;
      for (size_t i = s.size(); i-- > 0;) {
        strides[k][rank - s.size() + i] = s[i] == 1 ? 0 : stride;
        stride *= s[i];
      }
    } else {
      values[k] = {std::get<double>(xs[k])};
    }
    // Tensors are converted to the op's input dtype; a scalar is a constant
    // held in the compute type (float32 for every float dtype).
    const DType to = std::holds_alternative<Tensor>(xs[k]) ? want_dtype : ComputeDType(want_dtype);
    for (double& v : values[k]) v = RoundTo(to, v);
  }
  want.values.resize(n);
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    double args[3] = {0, 0, 0};
    for (size_t k = 0; k < xs.size(); ++k) {
      int64_t pos = 0;
      for (size_t d = 0; d < rank; ++d) pos += index[d] * strides[k][d];
      args[k] = values[k][pos];
    }
    want.values[i] = RoundTo(want.dtype, info.reference(args[0], args[1], args[2]));
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < want.shape[d]) break;
      index[d] = 0;
    }
  }
  return want;
}

// ------------------------------------------------- the CPU and CUDA twice

// A TEST_P suite run on the CPU and on CUDA (skipped without a device):
// bodies read device(); instantiate with ::testing::Values(false, true),
// OnEachDevice::Name (test names end in /Cpu and /Cuda).
class OnEachDevice : public ::testing::TestWithParam<bool> {
 public:
  static std::string Name(const ::testing::TestParamInfo<bool>& info) { return info.param ? "Cuda" : "Cpu"; }

 protected:
  void SetUp() override {
    if (GetParam() && !cuda_available()) GTEST_SKIP() << "no usable CUDA device";
  }
  Device device() const { return GetParam() ? Device::cuda() : Device::cpu(); }
};

// -------------------------------------------------------------- comparison

// Largest allowed |got - want| / max(1, |want|): one rounding of the result
// dtype plus float32 math-library error; exact for integers and bools.
inline double Tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 1e-5;
    case DType::kFloat16: return 1e-3;
    case DType::kBFloat16: return 1e-2;
    default: return 0;
  }
}

// The message of the fusebox::Error `call` throws ("" when it throws none).
template <typename F>
std::string ErrorOf(F call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline std::string MultiIndex(int64_t flat, const Shape& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  return absl::StrCat("[", absl::StrJoin(index, ", "), "]");
}

// Checks dtype, shape and every value of `got` against `want`. NaN matches
// only NaN, infinities only themselves. `what` names the op and its inputs.
inline ::testing::AssertionResult AllClose(const Tensor& got, const Expected& want, const std::string& what) {
  auto fail = [&] {
    return ::testing::AssertionFailure() << what << " (seed " << Seed() << "): ";
  };
  if (!got.defined()) return fail() << "result is an undefined tensor";
  if (got.dtype() != want.dtype) {
    return fail() << "dtype " << DTypeName(got.dtype()) << ", expected " << DTypeName(want.dtype);
  }
  if (got.shape() != want.shape) {
    return fail() << "shape " << ShapeToString(got.shape()) << ", expected " << ShapeToString(want.shape);
  }
  const std::vector<double> values = got.to_double_vector();
  if (values.size() != want.values.size()) {
    return fail() << values.size() << " values read back, expected " << want.values.size();
  }
  const double tol = Tolerance(want.dtype);
  double max_err = 0;
  int64_t first_bad = -1, bad = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const double g = values[i], w = want.values[i];
    bool ok;
    double err = 0;
    if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g)) {
      ok = g == w;
    } else {
      err = std::fabs(g - w) / std::max(1.0, std::fabs(w));
      ok = err <= tol;
      max_err = std::max(max_err, err);
    }
    if (!ok) {
      ++bad;
      if (first_bad < 0) first_bad = static_cast<int64_t>(i);
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return fail() << bad << " of " << values.size() << " elements differ; first at flat index " << first_bad
                << " = " << MultiIndex(first_bad, want.shape) << " of " << DTypeName(want.dtype)
                << ShapeToString(want.shape) << ": got " << values[first_bad] << ", expected "
                << want.values[first_bad] << " (max normalized error " << max_err << ", tolerance " << tol << ")";
}

}  // namespace fusebox::test_util
