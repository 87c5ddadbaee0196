// Row reductions on the GPU (backend/cuda/row_printer.h) against float64
// references: softmax, layer_norm, rms_norm, sum, max and argmax over row
// lengths that take every layout (warp per row, 256 to 1024 threads per row,
// looped rows; groups of 4 or 2 elements or none, or groups aligned to
// memory on odd rows), and over a view whose
// pointer is 4 bytes past 16-byte alignment, which takes the scalar path of
// a vectorized kernel. Skips without a device.
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "backend/tuning.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

using Row = std::vector<double>;

// fn over each row of a rows x cols row-major matrix; each row gives `out`
// values (cols for row-wise ops, 1 for reductions).
std::vector<double> MapRows(const std::vector<double>& x, int64_t rows, int64_t cols,
                            const std::function<Row(const Row&)>& fn) {
  std::vector<double> out;
  for (int64_t r = 0; r < rows; ++r) {
    const Row got = fn(Row(x.begin() + r * cols, x.begin() + (r + 1) * cols));
    out.insert(out.end(), got.begin(), got.end());
  }
  return out;
}

double Mean(const Row& r) {
  double s = 0;
  for (double v : r) s += v;
  return s / static_cast<double>(r.size());
}

// rms_norm over each row (eps 1e-6) times the weight w.
std::vector<double> RmsNormRef(const std::vector<double>& x, const std::vector<double>& w, int64_t rows, int64_t cols) {
  return MapRows(x, rows, cols, [&](const Row& r) {
    double ms = 0;
    for (double v : r) ms += v * v;
    const double inv = 1.0 / std::sqrt(ms / static_cast<double>(r.size()) + 1e-6);
    Row out;
    for (size_t j = 0; j < r.size(); ++j) out.push_back(r[j] * inv * w[j]);
    return out;
  });
}

// Past 16384 the re-read rows are held in registers (20000) and shared
// memory (40000, 65536) of a 1024-thread block.
const std::vector<int64_t> kCols = {1, 7, 33, 1000, 1023, 1024, 1026, 2048, 3000, 4096, 4100, 8192, 12288, 16384, 20000,
                                    40000, 65536};

// Each op compiled for cuda on x (and, for norms, weight and bias), against
// its float64 reference.
void CheckRowOps(const Tensor& x, const Tensor& w, const Tensor& b, int64_t rows, int64_t cols) {
  const std::vector<double> xv = x.to_double_vector(), wv = w.to_double_vector(), bv = b.to_double_vector();
  const double tol = 2e-6 * std::sqrt(static_cast<double>(cols)) + 1e-6;
  auto softmax_fn = compile([](const Tensor& t) { return ManualSoftmax(t); });
  ExpectClose(softmax_fn(x).to_vector(), SoftmaxRef(xv, rows, cols), tol);

  // Rows on chip hold exp(x - max) after softmax's sum pass, x - max after
  // log_softmax's, and keep x where the output reads it too
  // (backend/cuda/held_row_values.h).
  auto log_softmax_fn = compile([](const Tensor& t) {
    Tensor shifted = t - max(t, -1, /*keepdim=*/true);
    return shifted - log(sum(exp(shifted), -1, /*keepdim=*/true));
  });
  const std::vector<double> softmax_ref = SoftmaxRef(xv, rows, cols);
  std::vector<double> log_softmax_ref, softmax_plus_ref;
  for (size_t i = 0; i < xv.size(); ++i) {
    log_softmax_ref.push_back(std::log(softmax_ref[i]));
    softmax_plus_ref.push_back(softmax_ref[i] + 2 * xv[i]);
  }
  ExpectClose(log_softmax_fn(x).to_vector(), log_softmax_ref, 10 * tol);
  auto softmax_plus_fn = compile([](const Tensor& t) { return ManualSoftmax(t) + t * 2.0; });
  ExpectClose(softmax_plus_fn(x).to_vector(), softmax_plus_ref, 10 * tol);

  auto layer_norm_fn = compile([](const Tensor& t, const Tensor& w, const Tensor& b) {
    return layer_norm(t, {t.shape().back()}, w, b, 1e-5);
  });
  ExpectClose(layer_norm_fn(x, w, b).to_vector(), MapRows(xv, rows, cols, [&](const Row& r) {
                const double m = Mean(r);
                double var = 0;
                for (double v : r) var += (v - m) * (v - m);
                const double inv = 1.0 / std::sqrt(var / static_cast<double>(r.size()) + 1e-5);
                Row out;
                for (size_t j = 0; j < r.size(); ++j) out.push_back((r[j] - m) * inv * wv[j] + bv[j]);
                return out;
              }),
              10 * tol);

  auto rms_norm_fn = compile([](const Tensor& t, const Tensor& w) { return rms_norm(t, {t.shape().back()}, w, 1e-6); });
  ExpectClose(rms_norm_fn(x, w).to_vector(), RmsNormRef(xv, wv, rows, cols), 10 * tol);

  auto sum_fn = compile([](const Tensor& t) { return sum(t, -1); });
  ExpectClose(sum_fn(x).to_vector(), MapRows(xv, rows, cols, [](const Row& r) { return Row{Mean(r) * r.size()}; }),
              10 * tol);
  auto max_fn = compile([](const Tensor& t) { return max(t, -1); });
  ExpectClose(max_fn(x).to_vector(),
              MapRows(xv, rows, cols, [](const Row& r) { return Row{*std::max_element(r.begin(), r.end())}; }), 0);
  auto argmax_fn = compile([](const Tensor& t) { return argmax(t, -1); });
  EXPECT_EQ(argmax_fn(x).to_double_vector(), MapRows(xv, rows, cols, [](const Row& r) {
              return Row{static_cast<double>(std::max_element(r.begin(), r.end()) - r.begin())};
            }));
}

void CheckRowLengths(Device device, int64_t rows, const std::vector<int64_t>& lengths) {
  for (int64_t cols : lengths) {
    SCOPED_TRACE(cols);
    const uint64_t seed = FreshSeed();
    Tensor x = randn({rows, cols}, Device::cpu(), seed).to(device);
    Tensor w = randn({cols}, Device::cpu(), seed + 1).to(device);
    Tensor b = randn({cols}, Device::cpu(), seed + 2).to(device);
    CheckRowOps(x, w, b, rows, cols);
  }
}

// Offsets of one float: contiguous rows whose pointer is 4 bytes off
// 16-byte alignment (x and w), beside an aligned b.
void CheckMisalignedViews(Device device, const std::vector<int64_t>& lengths) {
  const int64_t rows = 19;
  for (int64_t cols : lengths) {
    SCOPED_TRACE(cols);
    const uint64_t seed = FreshSeed();
    Tensor flat = randn({rows * cols + 1}, Device::cpu(), seed).to(device);
    Tensor x = flat.slice(0, 1, rows * cols + 1).view({rows, cols});
    Tensor w = randn({cols + 1}, Device::cpu(), seed + 1).to(device).slice(0, 1, cols + 1);
    Tensor b = randn({cols}, Device::cpu(), seed + 2).to(device);
    CheckRowOps(x, w, b, rows, cols);
  }
}

TEST(RowReductionsGpuTest, MatchFloat64OverRowLengths) {
  SKIP_WITHOUT_CUDA();
  CheckRowLengths(Device::cuda(), /*rows=*/37, kCols);  // not a multiple of a block's 8 warps
}

TEST(RowReductionsGpuTest, MisalignedViewTakesTheScalarPath) {
  SKIP_WITHOUT_CUDA();
  CheckMisalignedViews(Device::cuda(), {1024, 4096, 8192, 20000, 65536});
}

// Knob::kAlignedRowGroups 2 (every odd row; 1, the default, takes sums
// only): odd rows in 16-byte groups aligned to memory
// (each row's head and tail masked), over row lengths that take each layout,
// over views whose pointers disagree on alignment (the scalar path), and in
// 16-bit (groups of 8) beside float weights that load element by element.
TEST(RowReductionsGpuTest, OddRowsInAlignedGroupsMatchFloat64) {
  SKIP_WITHOUT_CUDA();
  backend::ScopedTuning aligned({{backend::Knob::kAlignedRowGroups, 2}});
  CheckRowLengths(Device::cuda(), /*rows=*/37, {3, 7, 33, 37, 1023, 1026, 1031, 4099, 8191, 16411, 20001, 65537});
  CheckMisalignedViews(Device::cuda(), {1023, 4099, 20001});
  for (int64_t cols : {37, 1031, 4099, 16411}) {
    SCOPED_TRACE(cols);
    const uint64_t seed = FreshSeed();
    Tensor host = randn({29, cols}, Device::cpu(), seed).to(DType::kBFloat16);
    Tensor w = randn({cols}, Device::cpu(), seed + 1);
    auto softmax_fn = compile([](const Tensor& t) { return ManualSoftmax(t); });
    ExpectClose(softmax_fn(host.to(Device::cuda())).to(DType::kFloat32).to_vector(),
                SoftmaxRef(host.to_double_vector(), 29, cols), 1e-2);
    auto sum_fn = compile([](const Tensor& t) { return sum(t.to(DType::kFloat32), -1); });
    const std::vector<double> xv = host.to_double_vector(), wv = w.to_double_vector();
    ExpectClose(sum_fn(host.to(Device::cuda())).to_vector(),
                MapRows(xv, 29, cols, [](const Row& r) { return Row{Mean(r) * r.size()}; }),
                1e-5 * std::sqrt(static_cast<double>(cols)));
    auto rms_fn = compile([](const Tensor& t, const Tensor& w) { return rms_norm(t, {t.shape().back()}, w, 1e-6); });
    ExpectClose(rms_fn(host.to(Device::cuda()), w.to(Device::cuda())).to(DType::kFloat32).to_vector(),
                RmsNormRef(xv, wv, 29, cols), 2e-2);
  }
  // Run-time row counts.
  auto fn = compile([](const Tensor& t) { return ManualSoftmax(t); }, CompileOptions{.dynamic = true});
  for (int64_t rows : {5, 300}) {
    Tensor host = randn({rows, 4099}, Device::cpu(), FreshSeed());
    ExpectClose(fn(host.to(Device::cuda())).to_vector(), SoftmaxRef(host.to_double_vector(), rows, 4099), 1e-5);
  }
}

// The same checks on the CPU (whose kernels the tests also print as CUDA and
// compile with NVRTC): the references and tolerances hold without a GPU.
TEST(RowReductionsGpuTest, SameChecksOnTheCpu) {
  CheckRowLengths(Device::cpu(), /*rows=*/5, {1, 33, 1026, 12288});
  CheckMisalignedViews(Device::cpu(), {4096});
}

TEST(RowReductionsGpuTest, HalfPrecisionAndRunTimeRows) {
  SKIP_WITHOUT_CUDA();
  for (int64_t cols : {1024, 4096, 8192, 40000}) {
    SCOPED_TRACE(cols);
    Tensor host = randn({24, cols}, Device::cpu(), FreshSeed()).to(DType::kBFloat16);
    auto fn = compile([](const Tensor& t) { return ManualSoftmax(t); });
    const std::vector<double> want = SoftmaxRef(host.to_double_vector(), 24, cols);
    ExpectClose(fn(host.to(Device::cuda())).to(DType::kFloat32).to_vector(), want, 1e-2);
  }
  // The row count as a kernel argument: one kernel serves 5 and 300 rows.
  auto fn = compile([](const Tensor& t) { return ManualSoftmax(t); }, CompileOptions{.dynamic = true});
  for (int64_t rows : {5, 300}) {
    Tensor host = randn({rows, 4096}, Device::cpu(), FreshSeed());
    ExpectClose(fn(host.to(Device::cuda())).to_vector(), SoftmaxRef(host.to_double_vector(), rows, 4096), 1e-5);
  }
}

}  // namespace
}  // namespace fusebox
