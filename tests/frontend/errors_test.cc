// User mistakes raise fusebox::Error with a message that names the op and the
// shapes, dtypes and devices involved, so the user can fix the call.
#include <string>
#include <vector>

#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace fusebox {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::ThrowsMessage;
using test_util::RandomTensor;

TEST(ErrorsTest, MismatchedBroadcastShapes) {
  const Tensor a = RandomTensor({3, 4}, DType::kFloat32);
  const Tensor b = RandomTensor({5, 4}, DType::kFloat32);
  EXPECT_THAT([&] { (void)(a + b); },
              ThrowsMessage<Error>(AllOf(HasSubstr("add"), HasSubstr("cannot be broadcast"), HasSubstr("[3, 4]"),
                                         HasSubstr("[5, 4]"), HasSubstr("float32"), HasSubstr("cpu"))));
  EXPECT_THAT([&] { (void)maximum(a, b.to(DType::kInt32)); },
              ThrowsMessage<Error>(AllOf(HasSubstr("maximum"), HasSubstr("float32[3, 4]"), HasSubstr("int32[5, 4]"))));
  const Tensor c = RandomTensor({3, 1}, DType::kBool);
  EXPECT_THAT([&] { (void)where(c, a, b); },
              ThrowsMessage<Error>(AllOf(HasSubstr("where"), HasSubstr("bool[3, 1]"), HasSubstr("[5, 4]"))));
}

TEST(ErrorsTest, BroadcastErrorInsideCompileLeavesNoCaptureBehind) {
  auto f = compile([](const Tensor& a, const Tensor& b) { return exp(a) * b; });
  const Tensor a = RandomTensor({2, 3}, DType::kFloat32);
  EXPECT_THAT([&] { (void)f(a, RandomTensor({4}, DType::kFloat32)); },
              ThrowsMessage<Error>(AllOf(HasSubstr("mul"), HasSubstr("[2, 3]"), HasSubstr("[4]"))));
  // Eager ops after the failed call run at once (no capture left installed)...
  const Tensor e = exp(a);
  EXPECT_FALSE(e.is_lazy());
  // ...and the compiled function still works on good input.
  const Tensor b = RandomTensor({3}, DType::kFloat32);
  const std::vector<double> got = f(a, b).to_double_vector();
  const std::vector<double> av = a.to_double_vector(), bv = b.to_double_vector();
  ASSERT_EQ(got.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(got[i], std::exp(av[i]) * bv[i % 3], 1e-5 * std::exp(3.0)) << i;
}

TEST(ErrorsTest, ArithmeticOnBoolIsRejected) {
  const Tensor flags = RandomTensor({4}, DType::kBool);
  EXPECT_THAT([&] { (void)neg(flags); },
              ThrowsMessage<Error>(AllOf(HasSubstr("neg"), HasSubstr("bool"), HasSubstr("[4]"))));
  EXPECT_THAT([&] { (void)(-flags); }, ThrowsMessage<Error>(HasSubstr("neg")));
  EXPECT_THAT([&] { (void)abs(flags); },
              ThrowsMessage<Error>(AllOf(HasSubstr("abs"), HasSubstr("bool[4]"), HasSubstr("cpu"))));
  EXPECT_THAT([&] { (void)(flags + flags); },
              ThrowsMessage<Error>(AllOf(HasSubstr("add"), HasSubstr("bool[4]"))));
  // The message says what to do instead, and that is enough to fix it.
  EXPECT_THAT([&] { (void)relu(flags); }, ThrowsMessage<Error>(HasSubstr(".to(")));
  EXPECT_NO_THROW((void)neg(flags.to(DType::kInt32)));
}

TEST(ErrorsTest, CpuTensorWithCudaTensor) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Tensor cpu = RandomTensor({2, 2}, DType::kFloat32);
  const Tensor gpu = RandomTensor({2, 2}, DType::kFloat32, test_util::Domain::kAny, Device::cuda());
  EXPECT_THAT([&] { (void)(cpu * gpu); },
              ThrowsMessage<Error>(AllOf(HasSubstr("mul"), HasSubstr("cpu"), HasSubstr("cuda:0"),
                                         HasSubstr("[2, 2]"), HasSubstr(".to(Device)"))));
  EXPECT_THAT([&] { (void)where(gt(gpu, 0.0), cpu, gpu); },
              ThrowsMessage<Error>(AllOf(HasSubstr("where"), HasSubstr("cpu"), HasSubstr("cuda:0"))));
}

TEST(ErrorsTest, CudaWithoutADevice) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_THAT([] { (void)zeros({2}, Device::cuda()); }, ThrowsMessage<Error>(HasSubstr("cuda:0")));
}

TEST(ErrorsTest, FromVectorWithWrongElementCount) {
  EXPECT_THAT([] { (void)Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5}, {2, 3}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("from_vector"), HasSubstr("5 values"), HasSubstr("[2, 3]"),
                                         HasSubstr("6 elements"))));
  EXPECT_THAT([] { (void)Tensor::from_vector(std::vector<int32_t>{1, 2}, {3}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("from_vector"), HasSubstr("[3]"))));
  EXPECT_THAT([] { (void)Tensor::from_vector(std::vector<double>{1}, {2, -1}, DType::kFloat16); },
              ThrowsMessage<Error>(AllOf(HasSubstr("from_vector"), HasSubstr("[2, -1]"))));
}

TEST(ErrorsTest, ReshapeToAnIncompatibleSize) {
  const Tensor x = RandomTensor({2, 3}, DType::kFloat32);
  EXPECT_THAT([&] { (void)x.reshape({4, 4}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("reshape"), HasSubstr("[4, 4]"), HasSubstr("6 elements"))));
  EXPECT_THAT([&] { (void)x.reshape({4, -1}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("reshape"), HasSubstr("[4, -1]"), HasSubstr("6 elements"))));
  EXPECT_THAT([&] { (void)x.view({-1, -1}); }, ThrowsMessage<Error>(HasSubstr("only one dimension can be -1")));
}

TEST(ErrorsTest, ItemOnAMultiElementTensor) {
  const Tensor x = RandomTensor({2, 3}, DType::kFloat32);
  EXPECT_THAT([&] { (void)x.item(); },
              ThrowsMessage<Error>(AllOf(HasSubstr("item()"), HasSubstr("6 elements"), HasSubstr("[2, 3]"))));
  EXPECT_THAT([] { (void)zeros({0}).item(); }, ThrowsMessage<Error>(HasSubstr("0 elements")));
}

TEST(ErrorsTest, ViewOfANonViewableLayout) {
  const Tensor t = RandomTensor({2, 3}, DType::kFloat32).transpose(0, 1);  // [3, 2], strides [1, 3]
  EXPECT_THAT([&] { (void)t.view({6}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("view"), HasSubstr("[3, 2]"), HasSubstr("strides [1, 3]"),
                                         HasSubstr("[6]"), HasSubstr("reshape()"))));
  EXPECT_NO_THROW((void)t.reshape({6}));  // copies instead
}

TEST(ErrorsTest, GeluWithAnUnknownApproximation) {
  const Tensor x = RandomTensor({3}, DType::kFloat32);
  EXPECT_THAT([&] { (void)gelu(x, "bogus"); },
              ThrowsMessage<Error>(AllOf(HasSubstr("gelu"), HasSubstr("\"bogus\""), HasSubstr("\"tanh\""),
                                         HasSubstr("\"none\""))));
}

TEST(ErrorsTest, BadViewArguments) {
  const Tensor x = RandomTensor({2, 3}, DType::kFloat32);
  EXPECT_THAT([&] { (void)x.transpose(0, 2); },
              ThrowsMessage<Error>(AllOf(HasSubstr("transpose"), HasSubstr("dimension 2"), HasSubstr("rank 2"))));
  EXPECT_THAT([&] { (void)x.permute({0, 0}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("permute"), HasSubstr("repeated"))));
  EXPECT_THAT([&] { (void)x.permute({0}); }, ThrowsMessage<Error>(AllOf(HasSubstr("permute"), HasSubstr("rank 2"))));
  EXPECT_THAT([&] { (void)x.expand({4, 3}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("expand"), HasSubstr("[2, 3]"), HasSubstr("[4, 3]"))));
  EXPECT_THAT([&] { (void)x.expand({3}); }, ThrowsMessage<Error>(HasSubstr("fewer dims")));
  EXPECT_THAT([&] { (void)x.narrow(1, 2, 2); },
              ThrowsMessage<Error>(AllOf(HasSubstr("narrow"), HasSubstr("size 3"))));
  EXPECT_THAT([&] { (void)x.unsqueeze(4); }, ThrowsMessage<Error>(HasSubstr("unsqueeze")));
}

TEST(ErrorsTest, UndefinedTensor) {
  const Tensor undefined;
  const Tensor x = RandomTensor({2}, DType::kFloat32);
  EXPECT_THAT([&] { (void)(x + undefined); }, ThrowsMessage<Error>(AllOf(HasSubstr("add"), HasSubstr("undefined"))));
  EXPECT_THAT([&] { (void)undefined.shape(); }, ThrowsMessage<Error>(HasSubstr("undefined")));
  EXPECT_EQ(undefined.str(), "Tensor(undefined)");
}

TEST(ErrorsTest, NegativeSizes) {
  EXPECT_THAT([] { (void)zeros({2, -3}); }, ThrowsMessage<Error>(HasSubstr("[2, -3]")));
  EXPECT_THAT([] { (void)arange(-1); }, ThrowsMessage<Error>(AllOf(HasSubstr("arange"), HasSubstr("-1"))));
  EXPECT_THAT([] { (void)Tensor::empty({-1}, DType::kInt32); }, ThrowsMessage<Error>(HasSubstr("empty")));
}

TEST(ErrorsTest, MessagesAreUserErrorsNotInternalOnes) {
  const Tensor a = RandomTensor({3, 4}, DType::kFloat32);
  EXPECT_THAT([&] { (void)(a + RandomTensor({5, 4}, DType::kFloat32)); },
              ThrowsMessage<Error>(Not(HasSubstr("internal"))));
}

}  // namespace
}  // namespace fusebox
