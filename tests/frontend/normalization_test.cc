// softmax, log_softmax, layer_norm and rms_norm through the public API, eager
// and compiled, against float64 references computed here: rows and columns,
// row lengths, non-contiguous inputs, bf16/f16, -inf and NaN rows, affine
// parts, one and two normalized dims, shape errors. A GPU variant reruns a
// subset on Device::cuda(), and rows too long for one block (thread-block
// clusters on sm_90+), and skips without a device.
#include "backend/cuda/cuda_cluster.h"
#include "backend/cuda/driver.h"
#include "fusion/plan.h"
#include "tests/frontend/reduction_test_util.h"

namespace fusebox {
namespace {

using namespace reduction_test;  // NOLINT
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::ThrowsMessage;

// ----------------------------------------------------------------- softmax

TEST(NormalizationSoftmaxTest, RowsAndColumns) {
  for (int64_t len : {1, 7, 33, 1025}) {
    SCOPED_TRACE(absl::StrCat("rows of ", len));
    const Tensor x = RandomTensor({3, len}, kF32);
    Check("softmax(-1)", [](const Tensor& t) { return softmax(t, -1); }, x, RefSoftmax(x, -1));
    Check("log_softmax(-1)", [](const Tensor& t) { return log_softmax(t, -1); }, x,
          RefRowwise(x, {-1}, LogSoftmaxOf));
  }
  for (int64_t len : {7, 1000}) {
    SCOPED_TRACE(absl::StrCat("columns of ", len));
    const Tensor x = RandomTensor({len, 5}, kF32);
    Check("softmax(0)", [](const Tensor& t) { return softmax(t, 0); }, x, RefSoftmax(x, 0));
    Check("log_softmax(0)", [](const Tensor& t) { return log_softmax(t, 0); }, x, RefRowwise(x, {0}, LogSoftmaxOf));
  }
  // A middle dim of a 3-d tensor, and a long single row.
  const Tensor x3 = RandomTensor({2, 9, 4}, kF32);
  Check("softmax(1)", [](const Tensor& t) { return softmax(t, 1); }, x3, RefSoftmax(x3, 1));
  const Tensor row = RandomTensor({1, 4097}, kF32);
  Check("softmax(-1) of one row", [](const Tensor& t) { return softmax(t, -1); }, row, RefSoftmax(row, -1));
  // Rows sum to one.
  for (double s : sum(softmax(RandomTensor({4, 33}, kF32), -1), -1).to_double_vector()) EXPECT_NEAR(s, 1.0, 1e-5);
}

TEST(NormalizationSoftmaxTest, NonContiguousAndLarge) {
  const Tensor t = test_util::RandomTransposed(6, 33, kF32);
  const Tensor n = test_util::RandomNarrowed(6, 33, kF32);
  for (const Tensor& x : {t, n}) {
    Check("softmax(-1)", [](const Tensor& a) { return softmax(a, -1); }, x, RefSoftmax(x, -1));
    Check("log_softmax(0)", [](const Tensor& a) { return log_softmax(a, 0); }, x, RefRowwise(x, {0}, LogSoftmaxOf));
  }
  // Values far beyond exp's float32 range: the max shift must happen.
  const Tensor big = RandomTensor({3, 33}, kF32) * 100.0 + 500.0;
  Check("softmax(-1) of ~500", [](const Tensor& a) { return softmax(a, -1); }, big, RefSoftmax(big, -1));
  Check("log_softmax(-1) of ~500", [](const Tensor& a) { return log_softmax(a, -1); }, big,
        RefRowwise(big, {-1}, LogSoftmaxOf));
}

TEST(NormalizationSoftmaxTest, InfinitiesAndNan) {
  // Rows: some -inf (0 there), all -inf (NaN, as PyTorch), a NaN, a +inf.
  const std::vector<double> v = {-INFINITY, 1,         -INFINITY, 2,   -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                                 0.5,       NAN,       -1,        3,   INFINITY,  0,         1,         2};
  const Tensor x = Tensor::from_vector(v, {4, 4}, kF32);
  const Want want = RefSoftmax(x, -1);
  Check("softmax(-1) with infinities", [](const Tensor& t) { return softmax(t, -1); }, x, want);
  Check("log_softmax(-1) with infinities", [](const Tensor& t) { return log_softmax(t, -1); }, x,
        RefRowwise(x, {-1}, LogSoftmaxOf));
  const std::vector<double> got = softmax(x, -1).to_double_vector();
  EXPECT_EQ(got[0], 0.0);
  EXPECT_EQ(got[2], 0.0);
  EXPECT_NEAR(got[1] + got[3], 1.0, 1e-6);
  for (int k = 4; k < 12; ++k) EXPECT_TRUE(std::isnan(got[k])) << k;
  const std::vector<double> lse = logsumexp(x, {-1}).to_double_vector();
  EXPECT_EQ(lse[1], -INFINITY);
  EXPECT_TRUE(std::isnan(lse[2]));
  EXPECT_EQ(lse[3], INFINITY);
}

// ---------------------------------------------------------------- norms

TEST(NormalizationLayerNormTest, AffineOrNotOverOneAndTwoDims) {
  for (int64_t len : {1, 33, 1000}) {
    SCOPED_TRACE(len);
    const Tensor x = RandomTensor({4, len}, kF32);
    const Tensor w = RandomTensor({len}, kF32), b = RandomTensor({len}, kF32);
    Check("layer_norm", [&](const Tensor& t) { return layer_norm(t, {len}); }, x, RefNorm(x, 1, 1e-5, {}, {}));
    Check("layer_norm(w, b)", [&](const Tensor& t) { return layer_norm(t, {len}, w, b); }, x,
          RefNorm(x, 1, 1e-5, w, b));
    Check("layer_norm(w)", [&](const Tensor& t) { return layer_norm(t, {len}, w); }, x, RefNorm(x, 1, 1e-5, w, {}));
    Check("layer_norm(b), eps 0.1", [&](const Tensor& t) { return layer_norm(t, {len}, Tensor(), b, 0.1); }, x,
          RefNorm(x, 1, 0.1, {}, b));
  }
  const Tensor x = RandomTensor({3, 5, 7}, kF32);
  const Tensor w = RandomTensor({5, 7}, kF32), b = RandomTensor({5, 7}, kF32);
  Check("layer_norm [5, 7]", [&](const Tensor& t) { return layer_norm(t, {5, 7}); }, x, RefNorm(x, 2, 1e-5, {}, {}));
  Check("layer_norm [5, 7] (w, b)", [&](const Tensor& t) { return layer_norm(t, {5, 7}, w, b); }, x,
        RefNorm(x, 2, 1e-5, w, b));
  Check("layer_norm [7]", [&](const Tensor& t) { return layer_norm(t, {7}); }, x, RefNorm(x, 1, 1e-5, {}, {}));
  // Non-contiguous input; a constant row normalizes to zeros (plus bias).
  const Tensor tr = test_util::RandomTransposed(6, 33, kF32);
  Check("layer_norm transposed", [](const Tensor& t) { return layer_norm(t, {33}); }, tr, RefNorm(tr, 1, 1e-5, {}, {}));
  const Tensor flat = Tensor::from_vector(std::vector<double>(2 * 33, 2.5), {2, 33}, kF32);
  Check("layer_norm of a constant row", [](const Tensor& t) { return layer_norm(t, {33}); }, flat,
        RefNorm(flat, 1, 1e-5, {}, {}));
}

TEST(NormalizationRmsNormTest, WeightAndDefaultEps) {
  for (int64_t len : {7, 1000}) {
    SCOPED_TRACE(len);
    const Tensor x = RandomTensor({4, len}, kF32), w = RandomTensor({len}, kF32);
    const double eps = 0x1p-23;  // torch.finfo(torch.float32).eps
    Check("rms_norm(w)", [&](const Tensor& t) { return rms_norm(t, {len}, w); }, x, RefNorm(x, 1, eps, w, {}, true));
    Check("rms_norm", [&](const Tensor& t) { return rms_norm(t, {len}); }, x, RefNorm(x, 1, eps, {}, {}, true));
  }
  const Tensor x = RandomTensor({2, 3, 5}, kF32), w = RandomTensor({3, 5}, kF32);
  Check("rms_norm [3, 5], eps 0.5", [&](const Tensor& t) { return rms_norm(t, {3, 5}, w, 0.5); }, x,
        RefNorm(x, 2, 0.5, w, {}, true));
  // Tiny values: eps dominates, so the default eps is visible.
  const Tensor tiny = Tensor::from_vector(std::vector<double>{1e-4, -1e-4, 1e-4, 1e-4}, {1, 4}, kF32);
  Check("rms_norm of 1e-4", [](const Tensor& t) { return rms_norm(t, {4}); }, tiny,
        RefNorm(tiny, 1, 0x1p-23, {}, {}, true));
}

// ------------------------------------------------------------ bf16 and f16

// Inputs as stored, math in float32, one rounding of the result: PyTorch's
// accuracy, relative 1e-2 (bf16) and 2e-3 (f16).
TEST(NormalizationHalfTest, Softmax) {
  for (DType dtype : {kBF16, kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor x = RandomTensor({3, 1000}, dtype);
    Check("softmax(-1)", [](const Tensor& t) { return softmax(t, -1); }, x, RefSoftmax(x, -1));
    Check("log_softmax(-1)", [](const Tensor& t) { return log_softmax(t, -1); }, x, RefRowwise(x, {-1}, LogSoftmaxOf));
    const Tensor c = RandomTensor({33, 4}, dtype);
    Check("softmax(0)", [](const Tensor& t) { return softmax(t, 0); }, c, RefSoftmax(c, 0));
  }
}

TEST(NormalizationHalfTest, LayerNormAndRmsNorm) {
  for (DType dtype : {kBF16, kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor x = RandomTensor({3, 1000}, dtype);
    const Tensor w = RandomTensor({1000}, dtype), b = RandomTensor({1000}, dtype);
    Check("layer_norm(w, b)", [&](const Tensor& t) { return layer_norm(t, {1000}, w, b); }, x,
          RefNorm(x, 1, 1e-5, w, b));
    const double eps = dtype == kBF16 ? 0x1p-7 : 0x1p-10;  // torch.finfo(dtype).eps
    Check("rms_norm(w)", [&](const Tensor& t) { return rms_norm(t, {1000}, w); }, x, RefNorm(x, 1, eps, w, {}, true));
  }
}

TEST(NormalizationErrorsTest, MessagesNameTheOp) {
  const Tensor x = RandomTensor({4, 6}, kF32);
  EXPECT_THAT([&] { (void)layer_norm(x, {5}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("layer_norm"), HasSubstr("[5]"), HasSubstr("[4, 6]"))));
  EXPECT_THAT([&] { (void)layer_norm(x, {3, 4, 6}); }, ThrowsMessage<Error>(HasSubstr("layer_norm")));
  EXPECT_THAT([&] { (void)layer_norm(x, {6}, RandomTensor({5}, kF32)); },
              ThrowsMessage<Error>(AllOf(HasSubstr("layer_norm"), HasSubstr("weight"))));
  EXPECT_THAT([&] { (void)layer_norm(x, {6}, Tensor(), RandomTensor({4, 6}, kF32)); },
              ThrowsMessage<Error>(AllOf(HasSubstr("layer_norm"), HasSubstr("bias"))));
  EXPECT_THAT([&] { (void)rms_norm(x, {4}); }, ThrowsMessage<Error>(AllOf(HasSubstr("rms_norm"), HasSubstr("[4]"))));
  const Tensor ints = RandomTensor({4, 6}, kI32);
  EXPECT_THAT([&] { (void)softmax(ints, -1); }, ThrowsMessage<Error>(AllOf(HasSubstr("softmax"), HasSubstr("int32"))));
  EXPECT_THAT([&] { (void)layer_norm(ints, {6}); }, ThrowsMessage<Error>(HasSubstr("layer_norm")));
  EXPECT_THAT([&] { (void)softmax(x, 2); }, ThrowsMessage<Error>(HasSubstr("softmax")));
  auto f = compile([](const Tensor& t) { return layer_norm(t, {5}); });
  EXPECT_THAT([&] { (void)f(x); }, ThrowsMessage<Error>(HasSubstr("layer_norm")));
}

// ---------------------------------------------------------------------- GPU

TEST(NormalizationCudaTest, SoftmaxAndLayerNorm) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda();
  for (const Shape& shape : std::vector<Shape>{{3, 1}, {5, 33}, {4, 1025}, {2, 4097}, {64, 1000}}) {
    for (DType dtype : {kF32, kBF16}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), ShapeToString(shape)));
      const Tensor x = RandomTensor(shape, dtype, Domain::kAny, gpu);
      Check("softmax(-1)", [](const Tensor& t) { return softmax(t, -1); }, x, RefSoftmax(x, -1));
      Check("softmax(0)", [](const Tensor& t) { return softmax(t, 0); }, x, RefSoftmax(x, 0));
      Check("log_softmax(-1)", [](const Tensor& t) { return log_softmax(t, -1); }, x, RefRowwise(x, {-1}, LogSoftmaxOf));
      const int64_t len = shape[1];
      const Tensor w = RandomTensor({len}, dtype, Domain::kAny, gpu), b = RandomTensor({len}, dtype, Domain::kAny, gpu);
      Check("layer_norm(w, b)", [&](const Tensor& t) { return layer_norm(t, {len}, w, b); }, x,
            RefNorm(x, 1, 1e-5, w, b));
      Check("rms_norm(w)", [&](const Tensor& t) { return rms_norm(t, {len}, w); }, x,
            RefNorm(x, 1, dtype == kF32 ? 0x1p-23 : 0x1p-7, w, {}, true));
    }
  }
  const Tensor t = test_util::RandomTransposed(33, 1025, kF32, Domain::kAny, gpu);
  Check("softmax(-1) transposed", [](const Tensor& a) { return softmax(a, -1); }, t, RefSoftmax(t, -1));
  const Tensor inf = Tensor::from_vector(std::vector<double>{-INFINITY, 1, -INFINITY, -INFINITY}, {2, 2}, kF32, gpu);
  Check("softmax(-1) with -inf", [](const Tensor& a) { return softmax(a, -1); }, inf, RefSoftmax(inf, -1));
}

// Long rows: persistent up to kPersistentRowLimit, then the looped kernel
// walking the grid, or (sm_90+, rows fewer than the SMs: the 1 and 3 rows
// here, or every row with FUSEBOX_TUNE_CLUSTERS=2) a thread-block cluster per
// row that keeps it in registers (backend/cuda/cuda_cluster.h).
// Odd lengths leave the last block part empty; 1 and 3 rows make a few
// blocks on an idle GPU.
TEST(NormalizationCudaTest, LongRowsOverThreadBlockClusters) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda();
  absl::StatusOr<int> arch = cuda::Driver::Get().ComputeCapability(gpu.index);
  ASSERT_TRUE(arch.ok()) << arch.status();
  absl::StatusOr<int> sms = cuda::Driver::Get().MultiprocessorCount(gpu.index);
  ASSERT_TRUE(sms.ok()) << sms.status();
  // 8192 and 12289 are persistent rows of one block; the others are past
  // kPersistentRowLimit.
  for (const int64_t len : {8192, 12289, 20001, 65536, 100000}) {
    for (const int64_t rows : {1, 3, 37}) {
      for (DType dtype : {kF32, kBF16}) {
        if (dtype == kBF16 && rows != 3) continue;
        SCOPED_TRACE(absl::StrCat(DTypeName(dtype), "[", rows, ", ", len, "]"));
        const Tensor x = RandomTensor({rows, len}, dtype, Domain::kAny, gpu);
        Check("softmax(-1)", [](const Tensor& t) { return softmax(t, -1); }, x, RefSoftmax(x, -1));
        const Tensor w = RandomTensor({len}, dtype, Domain::kAny, gpu), b = RandomTensor({len}, dtype, Domain::kAny, gpu);
        Check("layer_norm(w, b)", [&](const Tensor& t) { return layer_norm(t, {len}, w, b); }, x,
              RefNorm(x, 1, 1e-5, w, b));
        Check("layer_norm", [&](const Tensor& t) { return layer_norm(t, {len}); }, x, RefNorm(x, 1, 1e-5, {}, {}));
        Check("sum(-1)", [](const Tensor& t) { return sum(t, -1); }, x, RefSum(x, {-1}, false));
        // The softmax kernel took the cluster path where the device has one.
        auto f = compile([](const Tensor& t) { return softmax(t, -1); });
        (void)f(x);
        ASSERT_EQ(f.kernels().size(), 1u);
        // Rows a block would loop over (not held on chip) take clusters on
        // sm_90+ where they are fewer than the SMs: 100000 here (20001 and
        // 65536 stay on chip); with FUSEBOX_TUNE_CLUSTERS=2 every long row.
        const int clusters = backend::CurrentTuning().GetInt(backend::Knob::kClusters);
        const bool rule = clusters == 1 && len == 100000 && rows < *sms;
        if (*arch >= 90 && len > fusion::kPersistentRowLimit && (clusters == 2 || rule)) {
          EXPECT_THAT(f.kernels()[0].source, HasSubstr("__cluster_dims__(")) << "sm_" << *arch;
        } else if (clusters == 1) {
          EXPECT_THAT(f.kernels()[0].source, Not(HasSubstr("__cluster_dims__(")));
        }
      }
    }
  }
}

// Few rows too long for a cluster's registers (sm_90+, the rule of
// FUSEBOX_TUNE_CLUSTERS=1): each of a row's 8 blocks loops over its
// share in every pass and the blocks combine through the cluster
// (backend/cuda/cuda_cluster.h, slots 0).
TEST(NormalizationCudaTest, FewLongRowsOverLoopedClusters) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda();
  absl::StatusOr<int> arch = cuda::Driver::Get().ComputeCapability(gpu.index);
  ASSERT_TRUE(arch.ok()) << arch.status();
  for (const int64_t len : {262147, 300001}) {
    for (const int64_t rows : {1, 3, 63}) {
      SCOPED_TRACE(absl::StrCat("[", rows, ", ", len, "]"));
      const Tensor x = RandomTensor({rows, len}, kF32, Domain::kAny, gpu);
      Check("softmax(-1)", [](const Tensor& t) { return softmax(t, -1); }, x, RefSoftmax(x, -1));
      const Tensor w = RandomTensor({len}, kF32, Domain::kAny, gpu), b = RandomTensor({len}, kF32, Domain::kAny, gpu);
      Check("layer_norm(w, b)", [&](const Tensor& t) { return layer_norm(t, {len}, w, b); }, x,
            RefNorm(x, 1, 1e-5, w, b));
      auto f = compile([](const Tensor& t) { return softmax(t, -1); });
      (void)f(x);
      ASSERT_EQ(f.kernels().size(), 1u);
      if (*arch >= 90) EXPECT_THAT(f.kernels()[0].source, HasSubstr("j < fb_end")) << "a looped cluster";
    }
  }
}

}  // namespace
}  // namespace fusebox
