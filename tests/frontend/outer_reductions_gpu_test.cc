// Multi-pass reductions over dim 0 and a middle dim on the GPU against
// float64 references: softmax, log_softmax, layer_norm and rms_norm written
// over a [A, R, B] tensor reduced over R, in both CUDA layouts: one kernel
// (backend/cuda/outer_reduction.h) on shapes that take every variant of it
// (columns held over a cluster, held by one block, reloaded each pass, short
// columns, a last tile partly past the end, 16-bit columns, a run-time column
// count), and the split into a launch per pass (split_printer.h) on the same
// shapes wherever their columns split, softmax's sums folded online with
// their max (backend/online_exp_sums.h) or in a pass of their own.
// The same checks run on the CPU, where the references and tolerances are
// proven without a GPU. Skips the CUDA cases without a device.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/tuning.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

struct Dims {
  int64_t a, r, b;  // x is [a, r, b] (a == 0: the 2-D [r, b]), reduced over r
};

Shape ShapeOf(const Dims& d) {
  return d.a == 0 ? Shape{d.r, d.b} : Shape{d.a, d.r, d.b};
}
int64_t Dim(const Dims& d) { return d.a == 0 ? 0 : 1; }

// fn over each column (a, b) of x, given as the column's r values; writes
// the column's r results back.
std::vector<double> MapColumns(const std::vector<double>& x, const Dims& d,
                               const std::function<std::vector<double>(const std::vector<double>&)>& fn) {
  const int64_t a = std::max<int64_t>(d.a, 1);
  std::vector<double> out(x.size());
  std::vector<double> column(d.r);
  for (int64_t i = 0; i < a; ++i) {
    for (int64_t k = 0; k < d.b; ++k) {
      for (int64_t j = 0; j < d.r; ++j) column[j] = x[(i * d.r + j) * d.b + k];
      const std::vector<double> got = fn(column);
      for (int64_t j = 0; j < d.r; ++j) out[(i * d.r + j) * d.b + k] = got[j];
    }
  }
  return out;
}

std::vector<double> SoftmaxColumn(const std::vector<double>& c) {
  double m = -INFINITY, s = 0;
  for (double v : c) m = std::max(m, v);
  for (double v : c) s += std::exp(v - m);
  std::vector<double> out;
  for (double v : c) out.push_back(std::exp(v - m) / s);
  return out;
}

Tensor LayerNormOver(const Tensor& x, int64_t dim, const Tensor& w, const Tensor& b) {
  Tensor centered = x - mean(x, dim, /*keepdim=*/true);
  return centered * rsqrt(mean(centered * centered, dim, /*keepdim=*/true) + 1e-5) * w + b;
}
Tensor RmsNormOver(const Tensor& x, int64_t dim, const Tensor& w) {
  return x * rsqrt(mean(x * x, dim, /*keepdim=*/true) + 1e-6) * w;
}

// The four ops compiled on `device` against float64; `tol` scales with the
// column length (float sums) or is the 16-bit dtype's. On CUDA, softmax's
// schedule names the layout: `schedule` ("outer-tiles", "partial launches"
// of a split, or "online exp sums" of a split that folds them online).
void CheckOuterOps(Device device, const Dims& d, DType dtype, const std::string& schedule = "outer-tiles") {
  SCOPED_TRACE(absl::StrCat(d.a, "x", d.r, "x", d.b, " ", DTypeName(dtype), " on ", device.str(), ", ", schedule));
  const uint64_t seed = FreshSeed();
  const Shape shape = ShapeOf(d);
  Shape weight_shape(shape.size(), 1);
  weight_shape[Dim(d)] = d.r;  // per position along the reduced dim
  Tensor x = randn(shape, Device::cpu(), seed).to(dtype);
  Tensor w = randn(weight_shape, Device::cpu(), seed + 1).to(dtype);
  Tensor b = randn(weight_shape, Device::cpu(), seed + 2).to(dtype);
  const std::vector<double> xv = x.to_double_vector(), wv = w.to_double_vector(), bv = b.to_double_vector();
  const bool half = dtype != DType::kFloat32;
  const double tol = half ? 2e-2 : 1e-5 * std::sqrt(static_cast<double>(d.r)) + 1e-5;
  const int64_t dim = Dim(d);
  auto got = [&](const Tensor& t) { return t.to(Device::cpu()).to(DType::kFloat32).to_vector(); };
  x = x.to(device);
  w = w.to(device);
  b = b.to(device);

  auto softmax_fn = compile([dim](const Tensor& t) { return softmax(t, dim); });
  const std::vector<double> softmax_ref = MapColumns(xv, d, SoftmaxColumn);
  ExpectClose(got(softmax_fn(x)), softmax_ref, tol);
  if (device.is_cuda()) {
    ASSERT_EQ(softmax_fn.kernels().size(), 1u);
    EXPECT_THAT(softmax_fn.kernels()[0].schedule, ::testing::HasSubstr(schedule));
  }

  auto log_softmax_fn = compile([dim](const Tensor& t) { return log_softmax(t, dim); });
  std::vector<double> log_ref;
  for (double v : softmax_ref) log_ref.push_back(std::log(v));
  ExpectClose(got(log_softmax_fn(x)), log_ref, 4 * tol);

  // The column's position j along r reads w and b at j.
  auto layer_norm_fn = compile([dim](const Tensor& t, const Tensor& w, const Tensor& b) { return LayerNormOver(t, dim, w, b); });
  ExpectClose(got(layer_norm_fn(x, w, b)), MapColumns(xv, d, [&](const std::vector<double>& c) {
                double m = 0, var = 0;
                for (double v : c) m += v;
                m /= static_cast<double>(c.size());
                for (double v : c) var += (v - m) * (v - m);
                const double inv = 1.0 / std::sqrt(var / static_cast<double>(c.size()) + 1e-5);
                std::vector<double> out;
                for (size_t j = 0; j < c.size(); ++j) out.push_back((c[j] - m) * inv * wv[j] + bv[j]);
                return out;
              }),
              10 * tol);

  auto rms_norm_fn = compile([dim](const Tensor& t, const Tensor& w) { return RmsNormOver(t, dim, w); });
  ExpectClose(got(rms_norm_fn(x, w)), MapColumns(xv, d, [&](const std::vector<double>& c) {
                double ms = 0;
                for (double v : c) ms += v * v;
                const double inv = 1.0 / std::sqrt(ms / static_cast<double>(c.size()) + 1e-6);
                std::vector<double> out;
                for (size_t j = 0; j < c.size(); ++j) out.push_back(c[j] * inv * wv[j]);
                return out;
              }),
              10 * tol);
}

TEST(OuterReductionsGpuTest, MatchFloat64OverEveryVariant) {
  SKIP_WITHOUT_CUDA();
  backend::ScopedTuning one_kernel({{backend::Knob::kOuterSplit, 0}});
  for (const Dims& d : std::vector<Dims>{
           {0, 16411, 1023},  // held over a cluster of 8
           {0, 1031, 263},    // held, a cluster of 2-4 to fill the device
           {0, 37, 4099},     // short columns: idle lanes
           {0, 70001, 40},    // reloaded each pass
           {0, 3001, 33},     // the last tile holds one column
           {5, 3001, 37},     // a middle dim
           {3, 16411, 31},    // a middle dim, held over a cluster
       }) {
    CheckOuterOps(Device::cuda(), d, DType::kFloat32);
  }
  CheckOuterOps(Device::cuda(), {0, 4099, 517}, DType::kBFloat16);
  CheckOuterOps(Device::cuda(), {0, 16411, 255}, DType::kBFloat16);  // held in half-sector tiles
  CheckOuterOps(Device::cuda(), {2, 1031, 129}, DType::kFloat16);
}

// The split: columns of at least 128 rows, over few enough columns that a
// block per 256 of them leaves the device short (row_spread.cc).
TEST(OuterReductionsGpuTest, SplitIntoALaunchPerPassMatchesFloat64) {
  SKIP_WITHOUT_CUDA();
  backend::ScopedTuning split({{backend::Knob::kOuterSplit, 2}});
  for (const Dims& d : std::vector<Dims>{
           {0, 16411, 1023},  // 121 chunks, each past one run of 128 rows
           {0, 1031, 263},    // a partial last tile of 256 columns
           {0, 70001, 40},    // long chunks
           {0, 3001, 33},
           {5, 3001, 37},     // a middle dim
           {3, 16411, 31},
           {0, 131, 301},     // two chunks, the last a short tail
       }) {
    CheckOuterOps(Device::cuda(), d, DType::kFloat32, "online exp sums");
  }
  // 16-bit columns fold online too, with the rule's 4 lanes per column.
  CheckOuterOps(Device::cuda(), {0, 4099, 517}, DType::kBFloat16, "online exp sums");
  CheckOuterOps(Device::cuda(), {2, 1031, 129}, DType::kFloat16, "4 lanes per column");
  // Knob::kColumnLanes forced: 1, 2 or 4 threads share each column's chunk,
  // for every op (the rule gives norms 1).
  for (int64_t lanes : {1, 2, 4}) {
    backend::ScopedTuning shared({{backend::Knob::kColumnLanes, lanes}});
    const std::string named = lanes > 1 ? absl::StrCat(lanes, " lanes per column") : "online exp sums";
    CheckOuterOps(Device::cuda(), {0, 16411, 1023}, DType::kFloat32, named);
    CheckOuterOps(Device::cuda(), {0, 131, 301}, DType::kFloat32, named);  // lanes past a short chunk's end
    CheckOuterOps(Device::cuda(), {5, 3001, 37}, DType::kFloat32, named);
    CheckOuterOps(Device::cuda(), {0, 4099, 517}, DType::kBFloat16, named);
  }
  // Knob::kOnlineExpSums 0: the sum in a pass (a launch) of its own.
  backend::ScopedTuning two_pass({{backend::Knob::kOnlineExpSums, 0}});
  CheckOuterOps(Device::cuda(), {0, 16411, 1023}, DType::kFloat32, "2 partial launches");
  CheckOuterOps(Device::cuda(), {0, 70001, 40}, DType::kFloat32, "2 partial launches");
}

// The online fold keeps eager's two-pass results where columns hold
// infinities and NaNs: a chunk (and more) of -inf under a finite max, a
// column all -inf (NaN), a +inf (NaN: exp(inf - inf)), a NaN, and -inf
// first in a column whose max comes later. Compiled and eager on the GPU
// must agree element by element, NaNs in the same places.
TEST(OuterReductionsGpuTest, OnlineExpSumsKeepEagersInfinitiesAndNaNs) {
  SKIP_WITHOUT_CUDA();
  backend::ScopedTuning split({{backend::Knob::kOuterSplit, 2}});
  for (const Dims& d : std::vector<Dims>{{0, 16411, 37}, {0, 70001, 40}}) {  // chunks of 64, and of 137 in runs
    SCOPED_TRACE(absl::StrCat(d.r, "x", d.b));
    std::vector<float> host = randn(ShapeOf(d), Device::cpu(), FreshSeed()).to_vector();
    auto at = [&](int64_t j, int64_t k) -> float& { return host[j * d.b + k]; };
    const float inf = INFINITY;
    for (int64_t j = 0; j < 9000; ++j) at(j, 1) = -inf;          // many chunks of -inf, then finite values
    for (int64_t j = 0; j < d.r; ++j) at(j, 2) = -inf;           // all -inf
    at(d.r / 2, 3) = inf;                                        // one +inf
    at(d.r - 1, 4) = NAN;                                        // one NaN, last
    for (int64_t j = 0; j < d.r; j += 2) at(j, 5) = -inf;        // -inf every other row
    at(7, 6) = 80.0f;                                            // a max far above the rest
    at(d.r - 3, 7) = -80.0f;
    at(d.r / 3, 8) = inf;                                        // +inf and NaN in one column
    at(d.r / 3 + 1, 8) = NAN;
    const Tensor x = Tensor::from_vector(host, ShapeOf(d)).to(Device::cuda());
    for (bool log : {false, true}) {
      SCOPED_TRACE(log ? "log_softmax" : "softmax");
      auto op = [log](const Tensor& t) { return log ? log_softmax(t, 0) : softmax(t, 0); };
      auto fn = compile(op);
      const std::vector<float> got = fn(x).to(Device::cpu()).to_vector();
      ASSERT_EQ(fn.kernels().size(), 1u);
      EXPECT_THAT(fn.kernels()[0].schedule, ::testing::HasSubstr("online exp sums"));
      const std::vector<float> want = op(x).to(Device::cpu()).to_vector();
      int64_t mismatches = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const bool same = std::isnan(want[i]) ? std::isnan(got[i])
                          : std::isinf(want[i]) ? got[i] == want[i]
                                                : std::abs(got[i] - want[i]) <= 1e-5 + 1e-4 * std::abs(want[i]);
        if (!same && ++mismatches <= 5) {
          ADD_FAILURE() << "at row " << i / d.b << " column " << i % d.b << ": compiled " << got[i] << ", eager "
                        << want[i];
        }
      }
      EXPECT_EQ(mismatches, 0);
    }
  }
}

TEST(OuterReductionsGpuTest, RunTimeColumnCounts) {
  SKIP_WITHOUT_CUDA();
  // The column count as a kernel argument: one kernel (no cluster) serves both.
  auto fn = compile([](const Tensor& t) { return softmax(t, 0); }, CompileOptions{.dynamic = true});
  for (int64_t cols : {40, 3001}) {
    SCOPED_TRACE(cols);
    Tensor host = randn({2049, cols}, Device::cpu(), FreshSeed());
    ExpectClose(fn(host.to(Device::cuda())).to(Device::cpu()).to_vector(),
                MapColumns(host.to_double_vector(), {0, 2049, cols}, SoftmaxColumn), 1e-5);
  }
}

TEST(OuterReductionsGpuTest, SameChecksOnTheCpu) {
  CheckOuterOps(Device::cpu(), {0, 301, 45}, DType::kFloat32);
  CheckOuterOps(Device::cpu(), {3, 129, 17}, DType::kFloat32);
  CheckOuterOps(Device::cpu(), {0, 257, 33}, DType::kBFloat16);
}

}  // namespace
}  // namespace fusebox
