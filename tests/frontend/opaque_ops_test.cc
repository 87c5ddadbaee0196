// Ops with no codegen (sort, nonzero): eager results against a reference for
// every dtype, and inside compile() a graph break at the caller's line that
// explain(), stats() and fullgraph report, with results equal to eager.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using test_util::Domain;
using test_util::RandomTensor;
using test_util::Seed;

constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16,
                                DType::kInt32,   DType::kInt64,   DType::kBool};
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

std::string At(int line) { return absl::StrCat("opaque_ops_test.cc:", line); }

// Fresh values with ties (a coarse grid), and for floats NaNs and signed zeros.
Tensor SortInput(const Shape& shape, DType dtype) {
  std::vector<double> values = test_util::RandomValues(Numel(shape), dtype, Domain::kCoarse);
  if (IsFloating(dtype)) {
    for (size_t i = 0; i < values.size(); ++i) {
      if (i % 7 == 3) values[i] = kNan;
      if (i % 11 == 5) values[i] = -0.0;
    }
  }
  return Tensor::from_vector(values, shape, dtype);
}

bool Same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// sort's result is right when each row of indices is a permutation, values
// are x at those indices, in order (NaN above all numbers), and ties keep
// their input order: together these pin down the one stable sort.
void ExpectSorted(const Tensor& x, int64_t dim, bool descending, const Tensor& values, const Tensor& indices) {
  SCOPED_TRACE(absl::StrCat(DTypeName(x.dtype()), ShapeToString(x.shape()), " dim ", dim,
                            descending ? " descending" : " ascending", " seed ", Seed()));
  ASSERT_EQ(values.shape(), x.shape());
  ASSERT_EQ(indices.shape(), x.shape());
  ASSERT_EQ(values.dtype(), x.dtype());
  ASSERT_EQ(indices.dtype(), DType::kInt64);
  const std::vector<double> xv = x.to_double_vector(), vv = values.to_double_vector(),
                            iv = indices.to_double_vector();
  const int64_t d = dim < 0 ? dim + std::max<int64_t>(x.dim(), 1) : dim;
  const int64_t size = x.dim() == 0 ? 1 : x.shape()[d];
  int64_t inner = 1;
  for (int64_t k = d + 1; k < x.dim(); ++k) inner *= x.shape()[k];
  const int64_t rows = size * inner == 0 ? 0 : x.numel() / size;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = (r / inner) * size * inner + r % inner;
    std::vector<bool> seen(size, false);
    for (int64_t j = 0; j < size; ++j) {
      const int64_t at = base + j * inner;
      const int64_t from = static_cast<int64_t>(iv[at]);
      ASSERT_TRUE(from >= 0 && from < size && !seen[from]) << "indices are not a permutation at " << at;
      seen[from] = true;
      ASSERT_TRUE(Same(vv[at], xv[base + from * inner])) << "value at " << at << " is not x[index]";
      if (j == 0) continue;
      const double prev = vv[at - inner], cur = vv[at];
      if (Same(prev, cur)) {
        ASSERT_LT(iv[at - inner], iv[at]) << "tie out of input order (not stable) at " << at;
      } else if (descending) {
        ASSERT_TRUE(std::isnan(prev) || (!std::isnan(cur) && prev > cur)) << "out of order at " << at;
      } else {
        ASSERT_TRUE(std::isnan(cur) || (!std::isnan(prev) && prev < cur)) << "out of order at " << at;
      }
    }
  }
}

TEST(OpaqueOpsTest, SortMatchesAStableReferenceForEveryDtypeShapeDimAndOrder) {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{}, {0, -1}},   {{0}, {0}},           {{1}, {-1}},         {{37}, {0}},
      {{5, 0}, {0, 1}}, {{6, 9}, {0, 1, -2}}, {{3, 4, 5}, {0, 1, -1}},
  };
  for (DType dtype : kAllDTypes) {
    for (const auto& [shape, dims] : cases) {
      const Tensor x = SortInput(shape, dtype);
      for (int64_t dim : dims) {
        for (bool descending : {false, true}) {
          const auto [values, indices] = sort(x, dim, descending);
          ExpectSorted(x, dim, descending, values, indices);
        }
      }
    }
  }
}

TEST(OpaqueOpsTest, SortByHandNanLastAscendingFirstDescendingTiesInInputOrder) {
  const Tensor x = Tensor::from_vector({3.0, kNan, -1.0, 3.0, kNan, 0.0, -0.0}, {7}, DType::kFloat32);
  const auto [up, up_index] = sort(x);
  EXPECT_THAT(up_index.to_double_vector(), ElementsAre(2, 5, 6, 0, 3, 1, 4));
  const std::vector<float> up_values = up.to_vector();
  EXPECT_FALSE(std::signbit(up_values[1]));  // 0.0 then -0.0: equal, so in input order
  EXPECT_TRUE(std::signbit(up_values[2]));
  const auto [down, down_index] = sort(x, 0, /*descending=*/true);
  EXPECT_THAT(down_index.to_double_vector(), ElementsAre(1, 4, 0, 3, 5, 6, 2));
  EXPECT_TRUE(std::isnan(down.to_vector()[0]));
  // int64 keys beyond 2^53 (where doubles merge neighbours) keep their order.
  // Written bytewise: from_vector goes through doubles.
  const int64_t big = int64_t{1} << 53, keys[] = {big + 1, big, -big - 1, -big};
  const Tensor wide = Tensor::empty({4}, DType::kInt64);
  std::memcpy(wide.data_ptr(), keys, sizeof(keys));
  const auto [v, i] = sort(wide);
  EXPECT_THAT(i.to_double_vector(), ElementsAre(2, 3, 1, 0));
}

TEST(OpaqueOpsTest, SortOfNonContiguousViewsAndBadDims) {
  for (DType dtype : {DType::kFloat32, DType::kInt64}) {
    const Tensor t = test_util::RandomTransposed(6, 5, dtype, Domain::kCoarse);
    const Tensor n = test_util::RandomNarrowed(4, 7, dtype, Domain::kCoarse);
    for (const Tensor& x : {t, n}) {
      for (int64_t dim : {0, 1}) {
        const auto [values, indices] = sort(x, dim, dim == 1);
        ExpectSorted(x, dim, dim == 1, values, indices);
      }
    }
  }
  const Tensor x = RandomTensor({2, 3}, DType::kFloat32);
  EXPECT_THAT([&] { (void)sort(x, 2); }, ThrowsMessage<Error>(HasSubstr("sort: dimension 2 is out of range")));
  EXPECT_THAT([&] { (void)sort(Tensor()); }, ThrowsMessage<Error>(HasSubstr("sort: the input is an undefined")));
}

// nonzero's reference: flat positions of non-zero values, as [row, col, ...].
std::vector<double> NonzeroRef(const std::vector<double>& values, const Shape& shape) {
  std::vector<double> out;
  for (size_t flat = 0; flat < values.size(); ++flat) {
    if (values[flat] == 0) continue;  // NaN != 0: NaN counts as non-zero
    std::vector<double> index(shape.size());
    int64_t rest = static_cast<int64_t>(flat);
    for (size_t d = shape.size(); d-- > 0;) index[d] = static_cast<double>(rest % shape[d]), rest /= shape[d];
    out.insert(out.end(), index.begin(), index.end());
  }
  return out;
}

TEST(OpaqueOpsTest, NonzeroMatchesReferenceForEveryDtypeAndShape) {
  for (DType dtype : kAllDTypes) {
    for (const Shape& shape : {Shape{}, Shape{0}, Shape{1}, Shape{13}, Shape{4, 0}, Shape{5, 6}, Shape{2, 3, 4}}) {
      const Tensor x = SortInput(shape, dtype);  // zeros, -0.0 and NaNs among the values
      const std::vector<double> values = x.to_double_vector();
      const int64_t hits = std::count_if(values.begin(), values.end(), [](double v) { return v != 0; });
      const Tensor got = nonzero(x);
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), ShapeToString(shape), " seed ", Seed()));
      EXPECT_EQ(got.dtype(), DType::kInt64);
      EXPECT_EQ(got.shape(), (Shape{hits, static_cast<int64_t>(shape.size())}));
      EXPECT_EQ(got.to_double_vector(), NonzeroRef(values, shape));
    }
  }
  // A 0-d tensor: one row of no indices when non-zero, none when zero.
  EXPECT_EQ(nonzero(full({}, 2.0)).shape(), (Shape{1, 0}));
  EXPECT_EQ(nonzero(full({}, 0.0)).shape(), (Shape{0, 0}));
  // [[0, 1.5], [0, -2]] transposed is [[0, 0], [1.5, -2]].
  EXPECT_THAT(nonzero(Tensor::from_vector({0.0f, 1.5f, 0.0f, -2.0f}, {2, 2}).transpose(0, 1)).to_double_vector(),
              ElementsAre(1, 0, 1, 1));
}

}  // namespace
}  // namespace fusebox

namespace fusebox {
namespace {

using namespace fusebox::testing_workloads;  // NOLINT: shared test helpers

TEST(OpaqueOpsCompileTest, SortBreaksTheGraphAtTheCallersLineAndEqualsEager) {
  int line = 0;
  auto fn = [&line](const Tensor& x) {
    const Tensor y = exp(x);
    auto [values, indices] = (line = __LINE__, sort(y, 1, /*descending=*/true));
    return std::make_tuple(values * 2.0, indices);
  };
  auto compiled = compile(fn);
  const Tensor x = randn({8, 33}, Device::cpu(), FreshSeed());
  const auto [values, indices] = compiled(x);
  EXPECT_FALSE(values.is_lazy());
  const auto [eager_values, eager_indices] = fn(x);
  EXPECT_EQ(values.to_vector(), eager_values.to_vector());
  EXPECT_EQ(indices.to_double_vector(), eager_indices.to_double_vector());
  ExpectSorted(exp(x), 1, true, values * 0.5, indices);
  EXPECT_EQ(compiled.stats().graphs, 2);
  EXPECT_EQ(compiled.stats().graph_breaks, 1);
  EXPECT_THAT(compiled.explain(), HasSubstr("2 graph(s), 1 graph break(s)"));
  EXPECT_THAT(compiled.explain(), HasSubstr(absl::StrCat("ended by: op 'sort' has no codegen at ", At(line))));
  // The second call finds both plans in the cache.
  const CompileStats first = compiled.stats();
  compiled(randn({8, 33}, Device::cpu(), FreshSeed()));
  EXPECT_EQ(compiled.stats().plan_compiles, first.plan_compiles);
  EXPECT_EQ(compiled.stats().cache_hits, first.cache_hits + 2);
  EXPECT_EQ(compiled.stats().graph_breaks, 2);
}

TEST(OpaqueOpsCompileTest, BreakWithNothingCapturedBeforeItIsListedAndCounted) {
  int line = 0;
  // sort() of the input itself (concrete): the graph so far is empty, yet it is a break.
  auto compiled = compile([&line](const Tensor& x) {
    auto [values, indices] = (line = __LINE__, sort(x));
    return tanh(values);
  });
  const Tensor x = randn({50}, Device::cpu(), FreshSeed());
  const Tensor y = compiled(x);
  EXPECT_EQ(y.to_vector(), tanh(std::get<0>(sort(x))).to_vector());
  EXPECT_EQ(compiled.stats().graphs, 1);
  EXPECT_EQ(compiled.stats().graph_breaks, 1);
  EXPECT_THAT(compiled.explain(), HasSubstr(absl::StrCat(
                                      "graph break with no ops captured before it: op 'sort' has no codegen at ",
                                      At(line))));
  // A break after which nothing is captured: one graph, still one break.
  auto ends_with_sort = compile([](const Tensor& x) { return std::get<1>(sort(exp(x))); });
  EXPECT_EQ(ends_with_sort(x).to_double_vector(), std::get<1>(sort(x)).to_double_vector());
  EXPECT_EQ(ends_with_sort.stats().graphs, 1);
  EXPECT_EQ(ends_with_sort.stats().graph_breaks, 1);
  EXPECT_THAT(ends_with_sort.explain(), HasSubstr("1 graph(s), 1 graph break(s)"));
}

TEST(OpaqueOpsCompileTest, NonzeroHasADataDependentShapeAndBreaksTheGraph) {
  int line = 0;
  auto fn = [&line](const Tensor& x) {
    const Tensor positive = gt(x * 3.0, 1.0);
    const Tensor where = (line = __LINE__, nonzero(positive));
    return where + where;
  };
  auto compiled = compile(fn);
  for (int call = 0; call < 3; ++call) {
    const Tensor x = randn({7, 9}, Device::cpu(), FreshSeed());
    const Tensor got = compiled(x);
    EXPECT_EQ(got.shape(), fn(x).shape());
    EXPECT_EQ(got.to_double_vector(), fn(x).to_double_vector());
    std::vector<double> flags;
    for (double v : (x * 3.0).to_double_vector()) flags.push_back(v > 1.0);
    std::vector<double> want = NonzeroRef(flags, {7, 9});
    for (double& v : want) v *= 2;
    EXPECT_EQ(got.to_double_vector(), want);
  }
  EXPECT_EQ(compiled.stats().graphs, 6);
  EXPECT_EQ(compiled.stats().graph_breaks, 3);
  EXPECT_THAT(compiled.explain(), HasSubstr(absl::StrCat("ended by: op 'nonzero' has no codegen at ", At(line))));
}

using test_util::ErrorOf;

TEST(OpaqueOpsCompileTest, FullgraphTurnsTheBreakIntoAnErrorWithReasonAndLine) {
  int line = 0;
  auto sorts = compile([&line](const Tensor& x) { return std::get<0>((line = __LINE__, sort(exp(x)))); },
                       CompileOptions{.fullgraph = true});
  const Tensor x = randn({16}, Device::cpu(), FreshSeed());
  // (The message is taken first: `line` is set while the call runs.)
  const std::string sort_error = ErrorOf([&] { sorts(x); });
  EXPECT_THAT(sort_error,
              HasSubstr(absl::StrCat("graph break with fullgraph=true: op 'sort' has no codegen at ", At(line))));
  auto nonzeros = compile([&line](const Tensor& x) { return (line = __LINE__, nonzero(x)); },
                          CompileOptions{.fullgraph = true});
  const std::string nonzero_error = ErrorOf([&] { nonzeros(x); });
  EXPECT_THAT(nonzero_error,
              HasSubstr(absl::StrCat("graph break with fullgraph=true: op 'nonzero' has no codegen at ", At(line))));
  // Nothing is left installed: eager ops after the failed calls run at once.
  EXPECT_FALSE(exp(x).is_lazy());
}

TEST(OpaqueOpsCudaTest, SortAndNonzeroOfGpuTensorsComeBackOnTheGpu) {
  SKIP_WITHOUT_CUDA();
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kInt64}) {
    const Tensor host = SortInput({9, 130}, dtype);
    const Tensor x = host.to(Device::cuda());
    const auto [values, indices] = sort(x.transpose(0, 1), 0);
    EXPECT_EQ(values.device(), Device::cuda());
    EXPECT_EQ(indices.device(), Device::cuda());
    ExpectSorted(host.transpose(0, 1), 0, false, values, indices);
    const Tensor where = nonzero(x);
    EXPECT_EQ(where.device(), Device::cuda());
    EXPECT_EQ(where.to_double_vector(), NonzeroRef(host.to_double_vector(), {9, 130}));
  }
  auto compiled = compile([](const Tensor& x) {
    auto [values, indices] = sort(x * 2.0, -1, true);
    return values + 1.0;
  });
  const Tensor host = randn({4, 1000}, Device::cpu(), FreshSeed());
  const Tensor got = compiled(host.to(Device::cuda()));
  EXPECT_EQ(got.device(), Device::cuda());
  EXPECT_EQ(got.to_vector(), (std::get<0>(sort(host * 2.0, -1, true)) + 1.0).to_vector());
  EXPECT_EQ(compiled.stats().graphs, 2);
  EXPECT_EQ(compiled.stats().graph_breaks, 1);
}

}  // namespace
}  // namespace fusebox
