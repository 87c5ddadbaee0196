// Helpers shared by reductions_test.cc, normalization_test.cc and
// short_rows_test.cc: float64 references of reductions and row-wise
// normalizations computed from a tensor's stored values
// (Tensor::to_double_vector), a comparison with per-element error bounds, and
// a runner that checks an op eagerly and as a compiled function.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace fusebox::reduction_test {

using test_util::Domain;
using test_util::RandomTensor;

constexpr DType kF32 = DType::kFloat32, kF16 = DType::kFloat16, kBF16 = DType::kBFloat16, kI32 = DType::kInt32,
                kI64 = DType::kInt64, kBool = DType::kBool;

using Row = std::vector<double>;
using RowFn = std::function<double(const Row&)>;
using Fn = std::function<Tensor(const Tensor&)>;

// What a result must be:
//   |got - value| <= RelTol(dtype) * max(floor, |value|) + slack + 4 subnormal steps.
struct Want {
  Shape shape;
  DType dtype = kF32;
  std::vector<double> values;
  std::vector<double> slack;  // absolute, per element: the float32 accumulation error allowed
  double floor = 1;
};

// One rounding of the result (and a few float32 ones before it); results are
// computed in float32 whatever the float dtype. Integers are exact.
inline double RelTol(DType dtype) {
  switch (dtype) {
    case kF32: return 1e-5;
    case kF16: return 2e-3;
    case kBF16: return 1e-2;
    default: return 0;
  }
}

// The spacing of the dtype's subnormals: near zero a rounding is absolute.
inline double DenormMin(DType dtype) {
  switch (dtype) {
    case kF32: return 0x1p-149;
    case kF16: return 0x1p-24;
    case kBF16: return 0x1p-133;
    default: return 0;
  }
}

// Sorted dims, negatives wrapped; empty means all.
inline std::vector<int64_t> Axes(int64_t rank, std::vector<int64_t> dims) {
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  }
  for (int64_t& d : dims) d = d < 0 ? d + rank : d;
  std::sort(dims.begin(), dims.end());
  return dims;
}

// Per element of the keepdim result (row-major), the row-major indices of the
// elements of a `shape` tensor that reduce into it over `axes`, in order.
inline std::vector<std::vector<int64_t>> Slices(const Shape& shape, const std::vector<int64_t>& axes) {
  Shape kept = shape;
  for (int64_t d : axes) kept[d] = 1;
  std::vector<std::vector<int64_t>> slices(Numel(kept));
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t i = 0; i < Numel(shape); ++i) {
    int64_t out = 0;
    for (size_t d = 0; d < shape.size(); ++d) out = out * kept[d] + (kept[d] == 1 ? 0 : index[d]);
    slices[out].push_back(i);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return slices;
}

// `fn` of each slice of x over `dims`, rounded to `dtype`; `slack` of the slice
// is the absolute error allowed beyond the result's rounding.
inline Want RefReduce(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, DType dtype, const RowFn& fn,
                      const RowFn& slack = nullptr) {
  const std::vector<int64_t> axes = Axes(x.dim(), dims);
  const std::vector<double> v = x.to_double_vector();
  Want want{.dtype = dtype};
  for (int64_t d = 0; d < x.dim(); ++d) {
    const bool reduced = std::binary_search(axes.begin(), axes.end(), d);
    if (!reduced) want.shape.push_back(x.shape()[d]);
    if (reduced && keepdim) want.shape.push_back(1);
  }
  for (const std::vector<int64_t>& slice : Slices(x.shape(), axes)) {
    Row row;
    for (int64_t i : slice) row.push_back(v[i]);
    want.values.push_back(test_util::RoundTo(dtype, fn(row)));
    want.slack.push_back(slack && IsFloating(dtype) ? slack(row) : 0);
  }
  return want;
}

// `fn` maps each slice of x over `dims` to as many values, in place: the
// result has x's shape and dtype.
// `slack`, where given: the absolute float32 error allowed per element of a
// row's result (a function of the row, as `fn`).
inline Want RefRowwise(const Tensor& x, const std::vector<int64_t>& dims, const std::function<Row(const Row&)>& fn,
                       const std::function<Row(const Row&)>& slack = {}) {
  const std::vector<double> v = x.to_double_vector();
  Want want{.shape = x.shape(), .dtype = x.dtype(), .values = std::vector<double>(v.size()),
            .slack = std::vector<double>(v.size(), 0)};
  for (const std::vector<int64_t>& slice : Slices(x.shape(), Axes(x.dim(), dims))) {
    Row row;
    for (int64_t i : slice) row.push_back(v[i]);
    const Row out = fn(row);
    const Row allowed = slack ? slack(row) : Row();
    for (size_t k = 0; k < slice.size(); ++k) {
      want.values[slice[k]] = test_util::RoundTo(x.dtype(), out[k]);
      if (!allowed.empty()) want.slack[slice[k]] = allowed[k];
    }
  }
  return want;
}

inline double SumOf(const Row& r) {
  double s = 0;
  for (double e : r) s += e;
  return s;
}
inline double AbsSumOf(const Row& r) {
  double s = 0;
  for (double e : r) s += std::fabs(e);
  return s;
}
inline double ProdOf(const Row& r) {
  double p = 1;
  for (double e : r) p *= e;
  return p;
}
inline double MaxOf(const Row& r) {
  double m = -INFINITY;
  for (double e : r) m = std::isnan(e) || std::isnan(m) ? NAN : std::max(m, e);
  return m;
}
inline double MinOf(const Row& r) {
  double m = INFINITY;
  for (double e : r) m = std::isnan(e) || std::isnan(m) ? NAN : std::min(m, e);
  return m;
}
inline double MeanOf(const Row& r) { return SumOf(r) / static_cast<double>(r.size()); }
inline double VarOf(const Row& r, double correction) {
  const double m = MeanOf(r);
  double ss = 0;
  for (double e : r) ss += (e - m) * (e - m);
  return ss / std::max(0.0, static_cast<double>(r.size()) - correction);
}
inline double LogSumExpOf(const Row& r) {
  double m = MaxOf(r);
  if (std::isinf(m)) m = 0;
  double s = 0;
  for (double e : r) s += std::exp(e - m);
  return std::log(s) + m;
}

// Row-wise normalizations (normalization_test.cc, short_rows_test.cc).
inline Row SoftmaxOf(const Row& r) {
  const double m = MaxOf(r);
  double s = 0;
  for (double e : r) s += std::exp(e - m);
  Row out;
  for (double e : r) out.push_back(std::exp(e - m) / s);
  return out;
}

inline Row LogSoftmaxOf(const Row& r) {
  const double m = MaxOf(r);
  double s = 0;
  for (double e : r) s += std::exp(e - m);
  Row out;
  for (double e : r) out.push_back(e - m - std::log(s));
  return out;
}

// Softmax values span many magnitudes: compare them relative to themselves.
inline Want RefSoftmax(const Tensor& x, int64_t dim) {
  Want want = RefRowwise(x, {dim}, SoftmaxOf);
  want.floor = 0;
  return want;
}

// (x - mean) / sqrt(biased var + eps) [* w] [+ b] over the trailing dims of
// `normalized`; rms: x / sqrt(mean(x^2) + eps) [* w].
inline Want RefNorm(const Tensor& x, int64_t normalized, double eps, const Tensor& w, const Tensor& b,
                    bool rms = false) {
  std::vector<int64_t> dims;
  for (int64_t k = normalized; k > 0; --k) dims.push_back(-k);
  const std::vector<double> wv = w.defined() ? w.to_double_vector() : std::vector<double>();
  const std::vector<double> bv = b.defined() ? b.to_double_vector() : std::vector<double>();
  // A row's mean (0 for rms) and 1 / std.
  auto stats = [&](const Row& r) {
    const double m = rms ? 0 : MeanOf(r);
    double ss = 0;
    for (double e : r) ss += (e - m) * (e - m);
    return std::pair<double, double>(m, 1 / std::sqrt(ss / static_cast<double>(r.size()) + eps));
  };
  return RefRowwise(x, dims, [&](const Row& r) {
    const auto [m, inv] = stats(r);
    Row out;
    for (size_t k = 0; k < r.size(); ++k) {
      out.push_back((r[k] - m) * inv * (wv.empty() ? 1 : wv[k]) + (bv.empty() ? 0 : bv[k]));
    }
    return out;
  }, [&](const Row& r) {
    // x - mean in float32 is off by a few ulps of |x| + |mean|, which the
    // normalization scales by 1 / std: short rows of near-equal values
    // (layer_norm over 2 elements) are ill-conditioned in any float32 kernel.
    const auto [m, inv] = stats(r);
    Row slack;
    for (size_t k = 0; k < r.size(); ++k) {
      slack.push_back(2e-6 * (std::fabs(r[k]) + std::fabs(m)) * inv * (wv.empty() ? 1 : std::fabs(wv[k])));
    }
    return slack;
  });
}

// Float32 accumulation of n terms of total magnitude A: allow 1e-6 * A
// (a random walk of roundings stays far below; a lost element does not).
inline Want RefSum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const DType out = IsFloating(x.dtype()) ? x.dtype() : kI64;
  return RefReduce(x, dims, keepdim, out, SumOf, [](const Row& r) { return 1e-6 * AbsSumOf(r); });
}
inline Want RefMean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return RefReduce(x, dims, keepdim, x.dtype(), MeanOf,
                   [](const Row& r) { return 1e-6 * AbsSumOf(r) / std::max<size_t>(1, r.size()); });
}
inline Want RefVar(const Tensor& x, const std::vector<int64_t>& dims, double correction, bool keepdim) {
  return RefReduce(
      x, dims, keepdim, x.dtype(), [correction](const Row& r) { return VarOf(r, correction); },
      [correction](const Row& r) { return 1e-6 * std::fabs(VarOf(r, correction)) + 1e-6 * std::fabs(MeanOf(r)); });
}

// Checks dtype, shape and every value; NaN matches only NaN, infinities only themselves.
inline ::testing::AssertionResult Close(const Tensor& got, const Want& want, const std::string& what) {
  auto fail = [&] { return ::testing::AssertionFailure() << what << " (seed " << test_util::Seed() << "): "; };
  if (!got.defined()) return fail() << "result is an undefined tensor";
  if (got.dtype() != want.dtype) return fail() << "dtype " << DTypeName(got.dtype()) << ", expected " << DTypeName(want.dtype);
  if (got.shape() != want.shape) {
    return fail() << "shape " << ShapeToString(got.shape()) << ", expected " << ShapeToString(want.shape);
  }
  const std::vector<double> values = got.to_double_vector();
  if (values.size() != want.values.size()) return fail() << values.size() << " values, expected " << want.values.size();
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const double g = values[i], w = want.values[i];
    bool ok;
    if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g)) {
      ok = g == w;
    } else {
      const double allowed =
          RelTol(want.dtype) * std::max(want.floor, std::fabs(w)) + want.slack[i] + 4 * DenormMin(want.dtype);
      ok = std::fabs(g - w) <= allowed;
      if (allowed > 0) worst = std::max(worst, std::fabs(g - w) / allowed);
    }
    if (!ok && bad++ == 0) first = static_cast<int64_t>(i);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return fail() << bad << " of " << values.size() << " elements differ; first at "
                << test_util::MultiIndex(first, want.shape) << " of " << DTypeName(want.dtype)
                << ShapeToString(want.shape) << ": got " << values[first] << ", expected " << want.values[first]
                << " (worst error " << worst << " x allowed)";
}

// `fn(x)` eagerly (unless `eager` is false: a decomposed op's eager kernels
// are many compiles) and as a compiled function of x, each against `want`.
// The compiled call must launch `kernels` kernels (-1: any number).
inline void Check(const std::string& label, const Fn& fn, const Tensor& x, const Want& want, int kernels = 1,
                  bool eager = true) {
  const std::string what = absl::StrCat(label, " of ", test_util::Describe(x));
  if (eager) {
    const Tensor result = fn(x);
    EXPECT_TRUE(Close(result, want, what + " [eager]"));
    EXPECT_FALSE(result.is_lazy()) << what;
    EXPECT_EQ(result.device(), x.device()) << what;
  }
  auto compiled = compile([&](const Tensor& a) { return fn(a); });
  const Tensor got = compiled(x);
  EXPECT_TRUE(Close(got, want, what + " [compiled]"));
  EXPECT_EQ(got.device(), x.device()) << what;
  if (kernels >= 0) EXPECT_EQ(compiled.kernels().size(), static_cast<size_t>(kernels)) << what << "\n" << compiled.explain();
}

}  // namespace fusebox::reduction_test
