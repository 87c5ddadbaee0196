// Tensors: creation, host round trips of every dtype (f16/bf16 rounding,
// Inf/NaN), dtype conversion, and views (shape, strides, offset, shared
// storage, values), contiguous(), item() and device moves.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace fusebox {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using test_util::Domain;
using test_util::RandomTensor;
using test_util::RandomValues;

constexpr DType kF32 = DType::kFloat32, kF16 = DType::kFloat16, kBF16 = DType::kBFloat16, kI32 = DType::kInt32,
                kI64 = DType::kInt64, kBool = DType::kBool;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Same storage (no copy) as `base`.
bool SharesStorage(const Tensor& view, const Tensor& base) {
  return view.impl().storage != nullptr && view.impl().storage == base.impl().storage;
}

// Values of `base` (row-major over `base_shape`) read through a strided view.
std::vector<double> Gather(const std::vector<double>& base, const Shape& shape, const Strides& strides,
                           int64_t offset) {
  std::vector<double> out;
  const int64_t n = Numel(shape);
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t pos = offset;
    for (size_t d = 0; d < shape.size(); ++d) pos += index[d] * strides[d];
    out.push_back(base[pos]);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

// Checks `view` against `base` read through (shape, strides, offset), and no copy.
void ExpectView(const Tensor& view, const Tensor& base, const Shape& shape, const Strides& strides, int64_t offset) {
  EXPECT_EQ(view.shape(), shape);
  EXPECT_EQ(view.strides(), strides);
  EXPECT_EQ(view.storage_offset(), offset);
  EXPECT_TRUE(SharesStorage(view, base)) << "a view copied its data";
  EXPECT_EQ(view.dtype(), base.dtype());
  EXPECT_EQ(view.to_double_vector(), Gather(base.to_double_vector(), shape, strides, offset));
}

// ----------------------------------------------------------- round trips

TEST(TensorTest, Float32RoundTripIsExact) {
  std::vector<float> values(37);
  for (float& v : values) v = static_cast<float>(test_util::RandomValue(kF32, Domain::kAny) * 1e3);
  values[0] = std::numeric_limits<float>::infinity();
  values[1] = -std::numeric_limits<float>::infinity();
  values[2] = std::numeric_limits<float>::denorm_min();
  values[3] = -0.0f;
  const Tensor t = Tensor::from_vector(values, {37});
  EXPECT_EQ(t.dtype(), kF32);
  EXPECT_EQ(t.shape(), Shape{37});
  EXPECT_EQ(t.device(), Device::cpu());
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.to_vector(), values);
  EXPECT_TRUE(std::signbit(t.to_vector()[3]));
  const std::vector<float> nan = Tensor::from_vector(std::vector<float>{NAN}, {1}).to_vector();
  EXPECT_TRUE(std::isnan(nan[0]));
}

TEST(TensorTest, IntegerRoundTripsAreExact) {
  std::vector<int32_t> i32(50);
  for (int32_t& v : i32) v = static_cast<int32_t>(test_util::Rng()());
  i32[0] = std::numeric_limits<int32_t>::min();
  i32[1] = std::numeric_limits<int32_t>::max();
  const Tensor a = Tensor::from_vector(i32, {5, 10});
  EXPECT_EQ(a.dtype(), kI32);
  const std::vector<double> back = a.to_double_vector();
  for (size_t i = 0; i < i32.size(); ++i) EXPECT_EQ(back[i], i32[i]) << i;

  // int64 beyond float's and int32's range, but exact in double.
  std::vector<int64_t> i64 = {0, -1, int64_t{1} << 40, -(int64_t{1} << 52) + 3, 123456789012345};
  const Tensor b = Tensor::from_vector(i64, {5});
  EXPECT_EQ(b.dtype(), kI64);
  const std::vector<double> bback = b.to_double_vector();
  for (size_t i = 0; i < i64.size(); ++i) EXPECT_EQ(static_cast<int64_t>(bback[i]), i64[i]) << i;
  EXPECT_EQ(static_cast<int64_t>(b.narrow(0, 2, 1).item()), int64_t{1} << 40);
}

TEST(TensorTest, DoubleRoundTripsOfEveryDType) {
  const std::vector<double> values = RandomValues(64, kF32, Domain::kAny);
  for (DType dtype : {kF32, kF16, kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor t = Tensor::from_vector(values, {8, 8}, dtype);
    EXPECT_EQ(t.dtype(), dtype);
    const std::vector<double> back = t.to_double_vector();
    const std::vector<float> back_f = t.to_vector();
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(back[i], test_util::RoundTo(dtype, values[i])) << i;
      EXPECT_EQ(back_f[i], static_cast<float>(back[i])) << i;
      EXPECT_NEAR(back[i], values[i], std::fabs(values[i]) * test_util::Tolerance(dtype)) << i;
    }
  }
  // Integers truncate toward zero, as a C++ cast does; bool is "!= 0".
  const std::vector<double> mixed = {2.75, -2.75, 0.0, 7.0, -0.5, 1e9};
  EXPECT_THAT(Tensor::from_vector(mixed, {6}, kI32).to_double_vector(), ElementsAre(2, -2, 0, 7, 0, 1e9));
  EXPECT_THAT(Tensor::from_vector(mixed, {6}, kI64).to_double_vector(), ElementsAre(2, -2, 0, 7, 0, 1e9));
  EXPECT_THAT(Tensor::from_vector(mixed, {6}, kBool).to_double_vector(), ElementsAre(1, 1, 0, 1, 1, 1));
  EXPECT_THAT(Tensor::from_vector(std::vector<double>{0, 1, 0}, {3}, kBool).to_vector(), ElementsAre(0, 1, 0));
}

TEST(TensorTest, HalfRoundingOfKnownValues) {
  // float16: 10 mantissa bits, round to nearest even, max 65504, subnormals to 2^-24.
  const std::vector<double> in = {0.1, 1.0 / 3, 1.0 + 0x1p-11, 1.0 + 3 * 0x1p-11, 65504, 65519, 65520,
                                  -70000, 0x1p-24, 0x1p-26, 5.9604644775390625e-08 * 1.5, 2049};
  const std::vector<double> want = {0.0999755859375, 0.333251953125, 1.0, 1.001953125, 65504, 65504, kInf,
                                    -kInf, 0x1p-24, 0.0, 0x1p-23, 2048};
  const std::vector<double> got = Tensor::from_vector(in, {12}, kF16).to_double_vector();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << "float16(" << in[i] << ")";
    EXPECT_EQ(got[i], HalfToFloat(FloatToHalf(static_cast<float>(in[i])))) << in[i];
  }
}

TEST(TensorTest, BFloat16RoundingOfKnownValues) {
  // bfloat16: 7 mantissa bits, float32's exponent range, round to nearest even.
  const std::vector<double> in = {0.1, 1.0 + 0x1p-8, 1.0 + 3 * 0x1p-8, 3.0e38, -1e-30, 257, 65504, 1e39};
  const std::vector<double> want = {0.10009765625, 1.0, 1.015625, 0x1.c4p+127, -0x1.44p-100,
                                    256, 65536, kInf};
  const std::vector<double> got = Tensor::from_vector(in, {8}, kBF16).to_double_vector();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << "bfloat16(" << in[i] << ")";
    EXPECT_EQ(got[i], BFloat16ToFloat(FloatToBFloat16(static_cast<float>(in[i])))) << in[i];
  }
}

TEST(TensorTest, InfAndNanSurviveEveryFloatDType) {
  const std::vector<double> specials = {kInf, -kInf, NAN, -NAN, 0.0, -0.0};
  for (DType dtype : {kF32, kF16, kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const std::vector<double> got = Tensor::from_vector(specials, {6}, dtype).to_double_vector();
    EXPECT_EQ(got[0], kInf);
    EXPECT_EQ(got[1], -kInf);
    EXPECT_TRUE(std::isnan(got[2]));
    EXPECT_TRUE(std::isnan(got[3]));
    EXPECT_EQ(got[4], 0.0);
    EXPECT_FALSE(std::signbit(got[4]));
    EXPECT_TRUE(std::signbit(got[5]));
  }
}

TEST(TensorTest, EmptyTensors) {
  for (const Shape& shape : std::vector<Shape>{{0}, {3, 0}, {0, 5, 2}}) {
    const Tensor t = Tensor::from_vector(std::vector<float>{}, shape);
    EXPECT_EQ(t.numel(), 0);
    EXPECT_EQ(t.shape(), shape);
    EXPECT_TRUE(t.to_vector().empty());
    EXPECT_TRUE(t.is_contiguous());
  }
}

// ------------------------------------------------------------- factories

TEST(TensorTest, RandnIsDeterministicPerSeedAndStandardNormal) {
  const uint64_t seed = test_util::Rng()();
  const Tensor a = randn({100000}, Device::cpu(), seed);
  const Tensor b = randn({100000}, Device::cpu(), seed);
  const Tensor c = randn({100000}, Device::cpu(), seed + 1);
  EXPECT_EQ(a.dtype(), kF32);
  const std::vector<float> av = a.to_vector();
  EXPECT_EQ(av, b.to_vector());
  EXPECT_NE(av, c.to_vector());
  double sum = 0, sq = 0;
  for (float v : av) sum += v, sq += double{v} * v;
  const double mean = sum / av.size(), stddev = std::sqrt(sq / av.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.02);  // standard error 0.003
  EXPECT_NEAR(stddev, 1.0, 0.02);
  // A prefix of the same seed's stream: shape does not change the values.
  EXPECT_EQ(randn({2, 5}, Device::cpu(), seed).to_vector(), std::vector<float>(av.begin(), av.begin() + 10));
}

TEST(TensorTest, RandIsUniformInUnitInterval) {
  const uint64_t seed = test_util::Rng()();
  const std::vector<float> v = rand({20000}, Device::cpu(), seed).to_vector();
  EXPECT_EQ(v, rand({20000}, Device::cpu(), seed).to_vector());
  double sum = 0;
  for (float x : v) {
    ASSERT_GE(x, 0.0f);
    ASSERT_LT(x, 1.0f);
    sum += x;
  }
  EXPECT_NEAR(sum / v.size(), 0.5, 0.01);
}

TEST(TensorTest, ZerosOnesFullArange) {
  for (DType dtype : {kF32, kF16, kBF16, kI32, kI64, kBool}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor z = zeros({2, 3}, Device::cpu(), dtype);
    const Tensor o = ones({4}, Device::cpu(), dtype);
    EXPECT_EQ(z.dtype(), dtype);
    EXPECT_EQ(z.shape(), (Shape{2, 3}));
    EXPECT_EQ(z.strides(), (Strides{3, 1}));
    EXPECT_THAT(z.to_double_vector(), ElementsAre(0, 0, 0, 0, 0, 0));
    EXPECT_EQ(o.dtype(), dtype);
    EXPECT_THAT(o.to_double_vector(), ElementsAre(1, 1, 1, 1));
    const Tensor a = arange(5, Device::cpu(), dtype);
    EXPECT_EQ(a.dtype(), dtype);
    if (dtype != kBool) EXPECT_THAT(a.to_double_vector(), ElementsAre(0, 1, 2, 3, 4));
  }
  EXPECT_THAT(full({3}, -2.5).to_vector(), ElementsAre(-2.5f, -2.5f, -2.5f));
  EXPECT_THAT(full({2}, 7.9, Device::cpu(), kI32).to_double_vector(), ElementsAre(7, 7));
  EXPECT_THAT(full({2}, 0.1, Device::cpu(), kBF16).to_double_vector(), ElementsAre(0.10009765625, 0.10009765625));
  EXPECT_EQ(arange(3).dtype(), kI64);  // as in PyTorch
  EXPECT_EQ(arange(0).numel(), 0);
  EXPECT_EQ(zeros({}).numel(), 1);
  EXPECT_EQ(zeros({}).dim(), 0);
}

// ------------------------------------------------------------ conversions

TEST(TensorTest, ToDTypeConverts) {
  const std::vector<double> values = {2.75, -2.75, 0.0, -0.5, 3.0, 1e-3};
  const Tensor x = Tensor::from_vector(values, {6}, kF32);
  const Tensor as_i32 = x.to(kI32);
  EXPECT_EQ(as_i32.dtype(), kI32);
  EXPECT_THAT(as_i32.to_double_vector(), ElementsAre(2, -2, 0, 0, 3, 0));  // truncation, as in PyTorch
  const Tensor as_bool = x.to(kBool);
  EXPECT_EQ(as_bool.dtype(), kBool);
  EXPECT_THAT(as_bool.to_double_vector(), ElementsAre(1, 1, 0, 1, 1, 1));
  EXPECT_THAT(as_bool.to(kF32).to_vector(), ElementsAre(1, 1, 0, 1, 1, 1));
  const Tensor to_bf16 = Tensor::from_vector(std::vector<float>{0.1f, 1.0f + 0x1p-8f, 257}, {3}).to(kBF16);
  EXPECT_EQ(to_bf16.dtype(), kBF16);
  EXPECT_THAT(to_bf16.to_double_vector(), ElementsAre(0.10009765625, 1.0, 256));
  const Tensor big = Tensor::from_vector(std::vector<int64_t>{2049, -3, int64_t{1} << 33}, {3});
  EXPECT_THAT(big.to(kF16).to_double_vector(), ElementsAre(2048, -3, kInf));

  // A random round trip through a wider type is exact.
  const Tensor h = RandomTensor({257}, kF16);
  EXPECT_EQ(h.to(kF32).to(kF16).to_double_vector(), h.to_double_vector());
  // Converting to the same dtype is free: the same tensor.
  EXPECT_EQ(x.to(kF32).data_ptr(), x.data_ptr());
}

TEST(TensorTest, ToDeviceCpuIsIdentity) {
  const Tensor x = RandomTensor({3, 4}, kF32);
  const Tensor y = x.to(Device::cpu());
  EXPECT_EQ(y.impl_ptr(), x.impl_ptr());
  EXPECT_EQ(y.data_ptr(), x.data_ptr());
}

TEST(TensorTest, ToCudaAndBack) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Tensor x = RandomTensor({5, 7}, kBF16).transpose(0, 1);
  const Tensor g = x.to(Device::cuda());
  EXPECT_EQ(g.device(), Device::cuda());
  EXPECT_EQ(g.shape(), (Shape{7, 5}));
  EXPECT_EQ(g.to(Device::cpu()).to_double_vector(), x.to_double_vector());
  EXPECT_EQ(g.to_double_vector(), x.to_double_vector());
}

// ------------------------------------------------------------------ views

TEST(TensorTest, TransposeAndPermute) {
  const Tensor base = RandomTensor({2, 3, 4}, kF32);
  EXPECT_EQ(base.strides(), (Strides{12, 4, 1}));
  ExpectView(base.transpose(0, 2), base, {4, 3, 2}, {1, 4, 12}, 0);
  ExpectView(base.transpose(-1, 1), base, {2, 4, 3}, {12, 1, 4}, 0);
  ExpectView(base.permute({1, 2, 0}), base, {3, 4, 2}, {4, 1, 12}, 0);
  ExpectView(base.permute({-1, 0, 1}), base, {4, 2, 3}, {1, 12, 4}, 0);
  EXPECT_FALSE(base.transpose(0, 1).is_contiguous());
  EXPECT_TRUE(base.transpose(1, 1).is_contiguous());
  // transpose twice is the original layout
  EXPECT_TRUE(base.transpose(0, 2).transpose(0, 2).is_contiguous());
}

TEST(TensorTest, ReshapeAndView) {
  const Tensor base = RandomTensor({4, 6}, kI32);
  ExpectView(base.view({2, 2, 6}), base, {2, 2, 6}, {12, 6, 1}, 0);
  ExpectView(base.view({-1}), base, {24}, {1}, 0);
  ExpectView(base.reshape({3, -1}), base, {3, 8}, {8, 1}, 0);
  ExpectView(base.flatten(), base, {24}, {1}, 0);
  // A narrowed tensor whose rows are still dense can merge its outer dims.
  const Tensor rows = base.narrow(0, 1, 2);
  ExpectView(rows.view({12}), base, {12}, {1}, 6);
  // Splitting a transposed dim is a view; merging across the transpose is not.
  const Tensor t = base.transpose(0, 1);  // [6, 4], strides [1, 6]
  ExpectView(t.view({2, 3, 4}), base, {2, 3, 4}, {3, 1, 6}, 0);
  const Tensor copied = t.reshape({24});
  EXPECT_FALSE(SharesStorage(copied, base)) << "reshape of a transposed tensor must copy";
  EXPECT_TRUE(copied.is_contiguous());
  EXPECT_EQ(copied.to_double_vector(), t.to_double_vector());
  EXPECT_EQ(copied.dtype(), kI32);
  EXPECT_EQ(t.flatten().to_double_vector(), t.to_double_vector());
}

TEST(TensorTest, ExpandNarrowSlice) {
  const Tensor base = RandomTensor({3, 1}, kBF16);
  ExpectView(base.expand({3, 4}), base, {3, 4}, {1, 0}, 0);
  ExpectView(base.expand({2, 3, -1}), base, {2, 3, 1}, {0, 1, 1}, 0);
  EXPECT_FALSE(base.expand({3, 4}).is_contiguous());

  const Tensor m = RandomTensor({5, 6}, kF16);
  ExpectView(m.narrow(1, 2, 3), m, {5, 3}, {6, 1}, 2);
  ExpectView(m.narrow(0, -2, 2), m, {2, 6}, {6, 1}, 18);
  ExpectView(m.narrow(0, 1, 3).narrow(1, 1, 4), m, {3, 4}, {6, 1}, 7);
  ExpectView(m.narrow(0, 5, 0), m, {0, 6}, {6, 1}, 30);
  ExpectView(m.slice(1, 1, 4), m, {5, 3}, {6, 1}, 1);
  ExpectView(m.slice(0, -3, 100), m, {3, 6}, {6, 1}, 12);  // clamped like Python slicing
  ExpectView(m.slice(1, 4, 2), m, {5, 0}, {6, 1}, 4);
  EXPECT_TRUE(m.narrow(0, 1, 3).is_contiguous());
  EXPECT_FALSE(m.narrow(1, 1, 3).is_contiguous());
  // The data pointer moves by the offset, in bytes of the dtype.
  EXPECT_EQ(static_cast<char*>(m.narrow(0, 1, 2).data_ptr()) - static_cast<char*>(m.data_ptr()), 6 * 2);
}

TEST(TensorTest, UnsqueezeSqueeze) {
  const Tensor base = RandomTensor({3, 4}, kI64);
  ExpectView(base.unsqueeze(0), base, {1, 3, 4}, {12, 4, 1}, 0);
  ExpectView(base.unsqueeze(1), base, {3, 1, 4}, {4, 4, 1}, 0);
  ExpectView(base.unsqueeze(-1), base, {3, 4, 1}, {4, 1, 1}, 0);
  ExpectView(base.unsqueeze(1).squeeze(1), base, {3, 4}, {4, 1}, 0);
  ExpectView(base.squeeze(0), base, {3, 4}, {4, 1}, 0);  // size 3: unchanged
  EXPECT_TRUE(base.unsqueeze(1).is_contiguous());
  const Tensor t = base.transpose(0, 1).unsqueeze(0);
  EXPECT_EQ(t.shape(), (Shape{1, 4, 3}));
  EXPECT_EQ(t.to_double_vector(), base.transpose(0, 1).to_double_vector());
  const Tensor scalar = Tensor::from_vector(std::vector<float>{2.5f}, {1}).squeeze(0);
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.item(), 2.5);
}

TEST(TensorTest, ContiguousOfATransposedView) {
  const Tensor base = RandomTensor({3, 5}, kF32);
  const Tensor t = base.transpose(0, 1);
  ASSERT_FALSE(t.is_contiguous());
  const Tensor c = t.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.shape(), (Shape{5, 3}));
  EXPECT_EQ(c.strides(), (Strides{3, 1}));
  EXPECT_EQ(c.dtype(), kF32);
  EXPECT_FALSE(SharesStorage(c, base));
  const std::vector<double> b = base.to_double_vector(), got = c.to_double_vector();
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(got[i * 3 + j], b[j * 5 + i]) << i << "," << j;
  }
  // Already contiguous: the same tensor, no copy.
  EXPECT_EQ(base.contiguous().data_ptr(), base.data_ptr());
  // Every dtype, and a narrowed + expanded source.
  for (DType dtype : {kF16, kBF16, kI32, kI64, kBool}) {
    const Tensor src = RandomTensor({4, 6}, dtype).narrow(1, 1, 1).expand({4, 3});
    const Tensor dense = src.contiguous();
    EXPECT_TRUE(dense.is_contiguous()) << DTypeName(dtype);
    EXPECT_EQ(dense.dtype(), dtype);
    EXPECT_EQ(dense.to_double_vector(), src.to_double_vector()) << DTypeName(dtype);
  }
}

TEST(TensorTest, CloneCopies) {
  const Tensor x = RandomTensor({4, 4}, kF32);
  const Tensor y = x.clone();
  EXPECT_FALSE(SharesStorage(y, x));
  EXPECT_EQ(y.to_vector(), x.to_vector());
}

TEST(TensorTest, IsContiguous) {
  EXPECT_TRUE(zeros({2, 3}).is_contiguous());
  EXPECT_TRUE(zeros({}).is_contiguous());
  EXPECT_TRUE(zeros({0, 3}).transpose(0, 1).is_contiguous());  // nothing to lay out
  EXPECT_TRUE(zeros({1, 3}).transpose(0, 1).is_contiguous());  // size-1 dims do not count
  EXPECT_FALSE(zeros({2, 3}).transpose(0, 1).is_contiguous());
  EXPECT_FALSE(zeros({2, 3}).narrow(1, 0, 2).is_contiguous());
  EXPECT_FALSE(zeros({2, 3}).narrow(1, 1, 1).is_contiguous());  // [2, 1] with row stride 3
  EXPECT_TRUE(zeros({2, 3}).narrow(0, 1, 1).is_contiguous());
  EXPECT_FALSE(zeros({2, 1}).expand({2, 3}).is_contiguous());
}

TEST(TensorTest, Item) {
  const double v = test_util::RandomValue(kF32, Domain::kAny);
  EXPECT_EQ(Tensor::from_vector(std::vector<double>{v}, {1}, kF32).item(), static_cast<float>(v));
  EXPECT_EQ(Tensor::from_vector(std::vector<double>{v}, {}, kBF16).item(), test_util::RoundTo(kBF16, v));
  EXPECT_EQ(Tensor::from_vector(std::vector<int64_t>{-42}, {1, 1}).item(), -42);
  EXPECT_EQ(ones({}, Device::cpu(), kBool).item(), 1.0);
  const Tensor m = RandomTensor({3, 4}, kI32);
  EXPECT_EQ(m.narrow(0, 2, 1).narrow(1, 3, 1).item(), m.to_double_vector()[11]);
  EXPECT_EQ(m.transpose(0, 1).narrow(0, 1, 1).narrow(1, 2, 1).item(), m.to_double_vector()[2 * 4 + 1]);
}

TEST(TensorTest, MetadataAndStr) {
  const Tensor x = zeros({2, 3}, Device::cpu(), kBF16);
  EXPECT_EQ(x.dim(), 2);
  EXPECT_EQ(x.size(0), 2);
  EXPECT_EQ(x.size(-1), 3);
  EXPECT_EQ(x.numel(), 6);
  EXPECT_EQ(x.str(), "Tensor[2, 3] bfloat16 cpu");
  EXPECT_FALSE(x.is_lazy());
  EXPECT_TRUE(x.defined());
  EXPECT_FALSE(Tensor().defined());
}

}  // namespace
}  // namespace fusebox
