// CustomOp: a user's CPU function as an op. What the function receives, where
// its outputs go, the graph break it is inside compile(), its errors, and that
// the user's own exceptions pass through and leave compile() usable.
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

std::string At(int line) { return absl::StrCat("custom_op_test.cc:", line); }

// How the function saw one input: "cpu contiguous", "cuda:0 strided lazy", ...
std::string HowSeen(const Tensor& t) {
  return absl::StrCat(t.device().str(), t.is_contiguous() ? " contiguous" : " strided", t.is_lazy() ? " lazy" : "");
}

// Running sums in row-major order and the element count: nothing fusebox can capture.
CustomOp MakeCumsum(const std::string& name, std::vector<std::string>* seen) {
  return CustomOp(name, [seen](const std::vector<Tensor>& in) {
    for (const Tensor& t : in) seen->push_back(HowSeen(t));
    std::vector<double> values = in[0].to_double_vector();
    std::partial_sum(values.begin(), values.end(), values.begin());
    return std::vector<Tensor>{Tensor::from_vector(values, in[0].shape(), DType::kFloat32),
                               full({}, static_cast<double>(values.size()))};
  });
}

TEST(CustomOpTest, GetsConcreteContiguousHostInputsAndReturnsItsOutputs) {
  std::vector<std::string> seen;
  const CustomOp cumsum = MakeCumsum("test_cumsum_eager", &seen);
  EXPECT_EQ(cumsum.name(), "test_cumsum_eager");
  const Tensor x = randn({3, 4}, Device::cpu(), FreshSeed()).transpose(0, 1);
  const std::vector<Tensor> out = cumsum({x});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_THAT(seen, ElementsAre("cpu contiguous"));
  std::vector<double> want = x.to_double_vector();
  std::partial_sum(want.begin(), want.end(), want.begin());
  ExpectClose(out[0].to_vector(), want, 1e-6);
  EXPECT_EQ(out[1].item(), 12);
  // No inputs: the outputs stay on the CPU.
  const CustomOp constant("test_constant", [](const std::vector<Tensor>&) {
    return std::vector<Tensor>{full({2}, 7.0)};
  });
  const std::vector<Tensor> made = constant({});
  EXPECT_EQ(made[0].device(), Device::cpu());
  EXPECT_THAT(made[0].to_vector(), ElementsAre(7.0f, 7.0f));
}

TEST(CustomOpTest, InsideCompileItIsAGraphBreakAndItsBodyRunsEagerly) {
  std::vector<std::string> seen;
  bool body_result_lazy = true;
  const CustomOp exp_op("test_exp_op", [&](const std::vector<Tensor>& in) {
    seen.push_back(HowSeen(in[0]));
    Tensor out = exp(in[0]);
    body_result_lazy = out.is_lazy();
    return std::vector<Tensor>{out};
  });
  int line = 0;
  auto fn = [&](const Tensor& x) {
    const Tensor y = x * 2.0;
    const Tensor e = (line = __LINE__, exp_op({y}))[0];
    return e + 1.0;
  };
  auto compiled = compile(fn);
  const Tensor x = randn({5, 7}, Device::cpu(), FreshSeed());
  const Tensor got = compiled(x);
  EXPECT_THAT(seen, ElementsAre("cpu contiguous"));  // y, computed by the first graph
  EXPECT_FALSE(body_result_lazy);
  EXPECT_EQ(got.to_vector(), fn(x).to_vector());
  EXPECT_EQ(compiled.stats().graphs, 2);
  EXPECT_EQ(compiled.stats().graph_breaks, 1);
  EXPECT_THAT(compiled.explain(),
              HasSubstr(absl::StrCat("ended by: op 'test_exp_op' has no codegen (custom op) at ", At(line))));
  // The body's exp ran eagerly: neither captured graph has it.
  for (const std::string& name : Names(compiled.kernels())) EXPECT_THAT(name, ::testing::Not(HasSubstr("exp")));

  auto whole = compile(fn, CompileOptions{.fullgraph = true});
  std::string message;
  try {
    whole(x);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_THAT(message, HasSubstr(absl::StrCat("graph break with fullgraph=true: op 'test_exp_op' has no codegen "
                                              "(custom op) at ",
                                              At(line))));
}

TEST(CustomOpTest, MistakesAreErrorsThatNameTheOp) {
  auto identity = [](const std::vector<Tensor>& in) { return in; };
  EXPECT_THAT([&] { CustomOp("", identity); }, ThrowsMessage<Error>(HasSubstr("CustomOp: the name is empty")));
  EXPECT_THAT([&] { CustomOp("test_null", nullptr); },
              ThrowsMessage<Error>(HasSubstr("CustomOp 'test_null': the function is empty")));
  {
    const CustomOp first("test_twice", identity);
    const CustomOp copy = first;  // copies share the one registration
    EXPECT_EQ(copy.name(), "test_twice");
    EXPECT_THAT([&] { CustomOp("test_twice", identity); },
                ThrowsMessage<Error>(AllOf(HasSubstr("CustomOp 'test_twice'"), HasSubstr("already registered"))));
  }
  // Once every copy is gone, the name is free again.
  const CustomOp again("test_twice", identity);
  EXPECT_THAT([&] { (void)again({Tensor::from_vector({1.0f}, {1}), Tensor()}); },
              ThrowsMessage<Error>(HasSubstr("custom op 'test_twice': input 1 is an undefined Tensor")));
  const CustomOp broken("test_undefined_output", [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0], Tensor()};
  });
  EXPECT_THAT([&] { (void)broken({Tensor::from_vector({1.0f}, {1})}); },
              ThrowsMessage<Error>(HasSubstr("custom op 'test_undefined_output': output 1 returned by its function "
                                             "is an undefined Tensor")));
}

struct UserFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

TEST(CustomOpTest, TheFunctionsExceptionsPassThroughAndCompileStaysUsable) {
  bool fail = true;
  const CustomOp flaky("test_flaky", [&](const std::vector<Tensor>& in) {
    if (fail) throw UserFailure("flaky failed");
    return std::vector<Tensor>{in[0] * 3.0};
  });
  const Tensor x = randn({6}, Device::cpu(), FreshSeed());
  // Caught inside the compiled function: capture goes on after it.
  auto recovers = compile([&](const Tensor& x) {
    const Tensor y = exp(x);
    Tensor z = y;
    try {
      z = flaky({y})[0];
    } catch (const UserFailure&) {
    }
    return z + 1.0;
  });
  EXPECT_EQ(recovers(x).to_vector(), (exp(x) + 1.0).to_vector());
  EXPECT_EQ(recovers.stats().graphs, 2);
  // Not caught: the same exception leaves the call, and nothing stays captured.
  auto propagates = compile([&](const Tensor& x) { return flaky({exp(x)})[0] + 1.0; });
  try {
    propagates(x);
    ADD_FAILURE() << "expected UserFailure";
  } catch (const UserFailure& e) {
    EXPECT_STREQ(e.what(), "flaky failed");
  }
  EXPECT_FALSE(exp(x).is_lazy());
  fail = false;
  EXPECT_EQ(propagates(x).to_vector(), (exp(x) * 3.0 + 1.0).to_vector());
  EXPECT_EQ(propagates.stats().calls, 1);  // the call that threw did not finish
  EXPECT_EQ(propagates.stats().graph_breaks, 1);
}

TEST(CustomOpCudaTest, GpuInputsReachTheFunctionOnTheHostAndOutputsGoBack) {
  if (!cuda_available()) GTEST_SKIP() << "no usable CUDA device";
  std::vector<std::string> seen;
  const CustomOp cumsum = MakeCumsum("test_cumsum_cuda", &seen);
  const Tensor host = randn({64, 3}, Device::cpu(), FreshSeed());
  auto compiled = compile([&](const Tensor& x) { return cumsum({tanh(x).transpose(0, 1)})[0] * 2.0; });
  const Tensor x = host.to(Device::cuda());
  const Tensor got = compiled(x);
  EXPECT_EQ(got.device(), Device::cuda());
  EXPECT_THAT(seen, ElementsAre("cpu contiguous"));
  // tanh eagerly on the same GPU: the same kernel expression as the compiled graph's.
  std::vector<double> want = tanh(x).transpose(0, 1).to_double_vector();
  std::partial_sum(want.begin(), want.end(), want.begin());
  for (double& v : want) v *= 2;
  ExpectClose(got.to_vector(), want, 1e-6);
  EXPECT_EQ(compiled.stats().graph_breaks, 1);
}

}  // namespace
}  // namespace fusebox
