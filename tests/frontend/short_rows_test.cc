// Reductions over short last-dim rows, which CUDA gives a few lanes of a warp
// each (CudaLanesPerRow, backend/cuda/row_layout.h: 1 to 32 lanes, 32 / L
// rows per warp): sum, max, argmax, softmax, log_softmax, layer_norm and
// rms_norm over rows of 1 to 100 elements, f32 and bf16, with row counts that
// leave a warp's and a block's last rows past the end, eager and compiled,
// against float64. The CUDA test skips without a device; the CPU test runs a
// subset (test_main also NVRTC-compiles each kernel's CUDA twin).
#include <algorithm>
#include <vector>

#include "tests/frontend/reduction_test_util.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using namespace reduction_test;  // NOLINT

// Lengths that take every lane count under 32: 1-7 a thread per row; 16 two
// lanes in bf16 (groups of 8), four in f32 (groups of 4), as 17; 37 and 63
// eight; 100 sixteen.
const std::vector<int64_t> kLengths = {1, 2, 3, 5, 7, 16, 17, 37, 63, 100};

// Every op over x = [rows, len], compiled (one kernel each) and, with
// `eager`, eagerly too.
void CheckShortRows(int64_t rows, int64_t len, DType dtype, const Device& device, bool eager) {
  SCOPED_TRACE(absl::StrCat(DTypeName(dtype), "[", rows, ", ", len, "]"));
  const Tensor x = RandomTensor({rows, len}, dtype, Domain::kAny, device);
  Check("sum(-1)", [](const Tensor& t) { return sum(t, -1); }, x, RefSum(x, {-1}, false), 1, eager);
  Check("max(-1)", [](const Tensor& t) { return max(t, -1); }, x, RefReduce(x, {-1}, false, dtype, MaxOf), 1, eager);
  // PyTorch's argmax: the first index of the maximum (bf16 rows have ties).
  Check("argmax(-1)", [](const Tensor& t) { return argmax(t, -1); }, x,
        RefReduce(x, {-1}, false, kI64,
                  [](const Row& r) { return static_cast<double>(std::max_element(r.begin(), r.end()) - r.begin()); }),
        1, eager);  // over a size-1 dim every index is 0: a constant, stored by a fill kernel (no reduction)
  Check("softmax(-1)", [](const Tensor& t) { return softmax(t, -1); }, x, RefSoftmax(x, -1), 1, eager);
  Check("log_softmax(-1)", [](const Tensor& t) { return log_softmax(t, -1); }, x, RefRowwise(x, {-1}, LogSoftmaxOf), 1,
        eager);
  const Tensor w = RandomTensor({len}, dtype, Domain::kAny, device), b = RandomTensor({len}, dtype, Domain::kAny, device);
  Check("layer_norm(w, b)", [&](const Tensor& t) { return layer_norm(t, {len}, w, b, 1e-5); }, x,
        RefNorm(x, 1, 1e-5, w, b), 1, eager);
  Check("rms_norm(w)", [&](const Tensor& t) { return rms_norm(t, {len}, w, 1e-6); }, x,
        RefNorm(x, 1, 1e-6, w, {}, /*rms=*/true), 1, eager);
}

// 1 row: one lane group of one warp; 3: a warp's rows past the third skip
// the row (and its shuffles); 1001: many blocks, the last one partly empty.
TEST(ShortRowsCudaTest, MatchFloat64OverLengthsRowCountsAndDtypes) {
  SKIP_WITHOUT_CUDA();
  for (int64_t rows : {1, 3, 1001}) {
    for (int64_t len : kLengths) {
      // Eagerly once per length: its decomposed ops are many small compiles.
      for (DType dtype : {kF32, kBF16}) CheckShortRows(rows, len, dtype, Device::cuda(), rows == 1001 && dtype == kF32);
    }
  }
}

// A row count that is a multiple of no lane group but fills several blocks
// of every layout: 32 rows per block of 8-lane rows, 256 of 1-lane rows.
TEST(ShortRowsCudaTest, SeveralBlocksWithAPartialLast) {
  SKIP_WITHOUT_CUDA();
  for (int64_t len : {3, 37}) CheckShortRows(4099, len, kF32, Device::cuda(), /*eager=*/false);
}

// A run-time row count (CompileOptions::dynamic): one kernel of 8-lane rows
// serves 5 and 300 rows, the grid following the count.
void CheckRunTimeRows(const Device& device) {
  auto fn = compile([](const Tensor& t) { return softmax(t, -1); }, CompileOptions{.dynamic = true});
  for (int64_t rows : {5, 300, 33}) {
    SCOPED_TRACE(rows);
    const Tensor x = RandomTensor({rows, 37}, kF32, Domain::kAny, device);
    EXPECT_TRUE(Close(fn(x), RefSoftmax(x, -1), absl::StrCat("softmax of [", rows, ", 37]")));
  }
  EXPECT_EQ(fn.stats().plan_compiles, 1);
}

TEST(ShortRowsCudaTest, RunTimeRowCounts) {
  SKIP_WITHOUT_CUDA();
  CheckRunTimeRows(Device::cuda());
}

// The same checks on the CPU, fewer of them (each kernel runs the host
// compiler): the references and tolerances hold, and the kernels' CUDA
// twins compile.
TEST(ShortRowsCpuTest, MatchFloat64) {
  for (int64_t len : {1, 2, 5, 17, 37, 100}) CheckShortRows(3, len, kF32, Device::cpu(), /*eager=*/len == 37);
  for (int64_t len : {7, 37}) CheckShortRows(1001, len, kBF16, Device::cpu(), /*eager=*/false);
  CheckRunTimeRows(Device::cpu());
}

}  // namespace
}  // namespace fusebox
