// Float32 reductions over 2^24 to 2^25+ elements (issue 22): sums, means,
// var, softmax and logsumexp over one long row, row sums of long rows and
// column sums of long columns, eager and compiled, against float64 sums of
// the same float32 terms, on the CPU and (skipping without one) the GPU. A
// single float accumulator stalls at 2^24 (sum(ones(2^25)) gave 2^24) and
// drifts long before; the kernels must stay at float32 rounding, so the
// tolerance is a few units of 2^-24 of the sum of |terms|, times sqrt(log2 n).
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/fusebox.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using Fn = std::function<Tensor(const Tensor&)>;

constexpr int64_t kLong = (int64_t{1} << 25) + 3;  // full reductions: 128 MiB of f32
constexpr int64_t kRow = (int64_t{1} << 24) + (1 << 20) + 5;  // rows and columns, two of each

// Relative to the sum of |terms|: float32 rounding with a cascade's depth.
double Tol(int64_t n) { return 4 * 0x1p-24 * std::sqrt(std::log2(static_cast<double>(n))); }

class LongReductionTest : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    if (GetParam().is_cuda()) {
      SKIP_WITHOUT_CUDA();
    }
  }
  Device device() const { return GetParam(); }

  // Fresh uniform [0, 1) values on the host (the reference reads them) and
  // their copy on the device under test.
  static Tensor HostRand(const Shape& shape) { return rand(shape, Device::cpu(), test_util::Rng()()); }
  static const float* Data(const Tensor& host) { return static_cast<const float*>(host.const_data_ptr()); }

  // fn(x), eagerly and compiled, element k within tol * scale[k] of want[k].
  void ExpectAccurate(const std::string& label, const Fn& fn, const Tensor& x, const std::vector<double>& want,
                      const std::vector<double>& scale, double tol) {
    auto compiled = compile([&](const Tensor& a) { return fn(a); });
    for (bool eager : {true, false}) {
      const std::vector<float> got = (eager ? fn(x) : compiled(x)).to_vector();
      ASSERT_EQ(got.size(), want.size()) << label;
      int64_t bad = 0;
      for (size_t k = 0; k < want.size(); ++k) {
        const double err = std::abs(static_cast<double>(got[k]) - want[k]);
        if (!(err <= tol * scale[k]) && bad++ < 3) {
          ADD_FAILURE() << label << (eager ? " [eager]" : " [compiled]") << " on " << device().str() << " [" << k
                        << "]: got " << got[k] << ", want " << want[k] << " (error " << err / scale[k]
                        << " of the scale, tolerance " << tol << ")";
        }
      }
    }
  }
};

// The float64 sum and sum of |.| of term(k) over k in [0, n).
struct Sums {
  double sum = 0, abs = 0;
};
Sums SumOf(int64_t n, const std::function<double(int64_t)>& term) {
  Sums s;
  for (int64_t k = 0; k < n; ++k) {
    const double v = term(k);
    s.sum += v;
    s.abs += std::abs(v);
  }
  return s;
}

TEST_P(LongReductionTest, FullSumAndMeanOfOnes) {
  const Tensor x = ones({kLong}, device());
  const double n = static_cast<double>(kLong);
  ExpectAccurate("sum(ones)", [](const Tensor& t) { return sum(t); }, x, {n}, {n}, Tol(kLong));
  ExpectAccurate("mean(ones)", [](const Tensor& t) { return mean(t); }, x, {1.0}, {1.0}, Tol(kLong));
}

TEST_P(LongReductionTest, FullSumsOfRandomValues) {
  const Tensor host = HostRand({kLong});
  const Tensor x = host.to(device());
  const float* v = Data(host);
  // Shifts rounded to float32 as the kernel rounds them: uniform, nonzero
  // mean (the stall), zero mean (cancellation, judged against sum |terms|).
  for (double shift : {0.0, 1.0, -0.5}) {
    const Sums s = SumOf(kLong, [&](int64_t k) { return static_cast<double>(v[k] + static_cast<float>(shift)); });
    const std::string tag = "(rand + " + absl::StrCat(shift) + ")";
    ExpectAccurate("sum" + tag, [shift](const Tensor& t) { return sum(t + shift); }, x, {s.sum}, {s.abs},
                   Tol(kLong));
    if (shift == 1.0) {
      const double n = static_cast<double>(kLong);
      ExpectAccurate("mean" + tag, [shift](const Tensor& t) { return mean(t + shift); }, x, {s.sum / n},
                     {s.abs / n}, Tol(kLong));
    }
  }
}

TEST_P(LongReductionTest, VarAndLogsumexpOfALongRow) {
  const Tensor host = HostRand({kLong});
  const Tensor x = host.to(device());
  const float* v = Data(host);
  const double n = static_cast<double>(kLong);
  const double m = SumOf(kLong, [&](int64_t k) { return v[k]; }).sum / n;
  const double ss = SumOf(kLong, [&](int64_t k) { return (v[k] - m) * (v[k] - m); }).sum;
  // The squares' own roundings are independent and average out.
  ExpectAccurate("var", [](const Tensor& t) { return var(t); }, x, {ss / (n - 1)}, {ss / (n - 1)}, Tol(kLong));
  float mx = v[0];
  for (int64_t k = 1; k < kLong; ++k) mx = std::max(mx, v[k]);
  const double se = SumOf(kLong, [&](int64_t k) { return std::exp(static_cast<double>(v[k]) - mx); }).sum;
  // A relative error e of the sum is an absolute e in its log; plus the
  // result's own rounding.
  const double lse = mx + std::log(se);
  ExpectAccurate("logsumexp", [](const Tensor& t) { return logsumexp(t, {0}); }, x, {lse}, {1.0},
                 Tol(kLong) + 4 * 0x1p-24 * std::abs(lse));
}

TEST_P(LongReductionTest, SoftmaxOfALongRow) {
  const Tensor host = HostRand({1, kRow});
  const Tensor x = host.to(device());
  const float* v = Data(host);
  float mx = v[0];
  for (int64_t k = 1; k < kRow; ++k) mx = std::max(mx, v[k]);
  std::vector<double> want(kRow);
  for (int64_t k = 0; k < kRow; ++k) want[k] = std::exp(static_cast<double>(v[k]) - mx);
  const double se = SumOf(kRow, [&](int64_t k) { return want[k]; }).sum;
  for (double& w : want) w /= se;
  // Each output carries the sum's relative error plus exp's and the division's.
  ExpectAccurate("softmax", [](const Tensor& t) { return softmax(t, -1); }, x, want, want,
                 Tol(kRow) + 8 * 0x1p-24);
}

TEST_P(LongReductionTest, RowSumsOfLongRows) {
  {
    const Tensor x = ones({2, kRow}, device());
    const double n = static_cast<double>(kRow);
    ExpectAccurate("sum(ones, 1)", [](const Tensor& t) { return sum(t, 1); }, x, {n, n}, {n, n}, Tol(kRow));
  }
  const Tensor host = HostRand({2, kRow});
  const Tensor x = host.to(device());
  const float* v = Data(host);
  std::vector<double> want, scale;
  for (int64_t r = 0; r < 2; ++r) {
    const Sums s = SumOf(kRow, [&](int64_t k) { return static_cast<double>(v[r * kRow + k] + 1.0f); });
    want.push_back(s.sum / kRow);
    scale.push_back(s.abs / kRow);
  }
  ExpectAccurate("mean(rand + 1, 1)", [](const Tensor& t) { return mean(t + 1.0, 1); }, x, want, scale, Tol(kRow));
}

TEST_P(LongReductionTest, ColumnSumsOfLongColumns) {
  {
    const Tensor x = ones({kRow, 2}, device());
    const double n = static_cast<double>(kRow);
    ExpectAccurate("sum(ones, 0)", [](const Tensor& t) { return sum(t, 0); }, x, {n, n}, {n, n}, Tol(kRow));
  }
  const Tensor host = HostRand({kRow, 2});
  const Tensor x = host.to(device());
  const float* v = Data(host);
  std::vector<double> want, scale;
  for (int64_t c = 0; c < 2; ++c) {
    const Sums s = SumOf(kRow, [&](int64_t k) { return static_cast<double>(v[k * 2 + c] + 1.0f); });
    want.push_back(s.sum);
    scale.push_back(s.abs);
  }
  ExpectAccurate("sum(rand + 1, 0)", [](const Tensor& t) { return sum(t + 1.0, 0); }, x, want, scale, Tol(kRow));
}

// Equal terms round the same way at every fold, so a chain's error adds up
// instead of averaging out: the worst case a cascade bounds (its chains sum
// to a few hundred folds).
TEST_P(LongReductionTest, SumsOfAConstant) {
  const double c = static_cast<double>(0.1f);
  const double tol = 8 * Tol(kLong);
  {
    const Tensor x = full({kLong}, 0.1, device());
    const double want = c * static_cast<double>(kLong);
    ExpectAccurate("sum(0.1)", [](const Tensor& t) { return sum(t); }, x, {want}, {want}, tol);
  }
  // 33 columns of 2^21 (ones in f16, times 0.1 in f32, for 2-byte loads):
  // on CUDA a thread per column, each column split into chunks of ~4096
  // rows (no 4-column tiles).
  constexpr int64_t kColumn = (int64_t{1} << 21) + 3, kColumns = 33;
  const Tensor x = ones({kColumn, kColumns}, device(), DType::kFloat16);
  const std::vector<double> want(kColumns, c * static_cast<double>(kColumn));
  ExpectAccurate("sum(0.1 * ones f16, 0)", [](const Tensor& t) { return sum(t.to(DType::kFloat32) * 0.1, 0); }, x,
                 want, want, tol);
}

INSTANTIATE_TEST_SUITE_P(Devices, LongReductionTest, ::testing::Values(Device::cpu(), Device::cuda()),
                         [](const auto& info) { return info.param.is_cuda() ? std::string("cuda") : std::string("cpu"); });

}  // namespace
}  // namespace fusebox
