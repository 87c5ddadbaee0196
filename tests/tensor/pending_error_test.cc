// The pending error check (tensor/pending_error.h) as host logic: probes
// that are not known yet, waiting, failures that repeat, chains of runs
// (the earlier failure wins, passed checks are dropped), and every host read
// of a tensor whose storage carries a failed check throwing; then how runs
// pass a check on (eager and compiled results, in-place writes, views). The
// CUDA flag behind it is tested on the GPU (tests/frontend/data_movement_test.cc).
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "frontend/fusebox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace fusebox {
namespace {

using test_util::ErrorOf;
using test_util::RandomTensor;
using ::testing::HasSubstr;

constexpr DType kF32 = DType::kFloat32;

// A probe of a run that lands when `landed` is set, with `status`.
struct FakeRun {
  bool landed = false;
  absl::Status status;
  int waits = 0, calls = 0;
  PendingError::Probe Probe() {
    return [this](bool wait) -> std::optional<absl::Status> {
      ++calls;
      if (wait) {
        ++waits;
        landed = true;  // waiting lands it
      }
      if (!landed) return std::nullopt;
      return status;
    };
  }
};

TEST(PendingErrorTest, NothingToCheckIsNullAndAKnownPassIsDropped) {
  EXPECT_EQ(PendingError::Join(nullptr, {}), nullptr);
  FakeRun passed{.landed = true};
  std::shared_ptr<PendingError> p = PendingError::Join(passed.Probe(), {});
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(PendingError::Join(nullptr, {p, nullptr}), nullptr);  // polled without waiting: passed
  EXPECT_EQ(passed.waits, 0);
  FakeRun in_flight;
  std::shared_ptr<PendingError> q = PendingError::Join(in_flight.Probe(), {});
  EXPECT_EQ(PendingError::Join(nullptr, {q, q}), q);  // nothing new: the same check
  EXPECT_EQ(in_flight.waits, 0);
}

TEST(PendingErrorTest, PollDoesNotWaitCheckWaitsAndAFailureRepeats) {
  FakeRun run{.status = absl::InvalidArgumentError("gather: index 7 is out of range for dim 0 of size 5")};
  std::shared_ptr<PendingError> p = PendingError::Join(run.Probe(), {});
  EXPECT_FALSE(p->Poll().has_value());
  EXPECT_EQ(run.waits, 0);
  EXPECT_THAT(ErrorOf([&] { p->Check(); }), HasSubstr("index 7 is out of range for dim 0 of size 5"));
  EXPECT_EQ(run.waits, 1);
  const int calls = run.calls;
  EXPECT_THAT(ErrorOf([&] { p->Check(); }), HasSubstr("index 7"));  // again, without asking the run
  EXPECT_EQ(run.calls, calls);
  ASSERT_TRUE(p->Poll().has_value());
  EXPECT_FALSE(p->Poll()->ok());
}

TEST(PendingErrorTest, AChainReportsTheRunItReadAndDropsPassedOnes) {
  FakeRun first{.status = absl::InvalidArgumentError("index_select: index 9 is out of range")};
  FakeRun second;  // passes
  std::shared_ptr<PendingError> a = PendingError::Join(first.Probe(), {});
  std::shared_ptr<PendingError> b = PendingError::Join(second.Probe(), {a});
  EXPECT_THAT(ErrorOf([&] { b->Check(); }), HasSubstr("index 9"));
  // Both passing: checked once each, then fine.
  FakeRun x, y{.status = absl::OkStatus()};
  std::shared_ptr<PendingError> c = PendingError::Join(x.Probe(), {});
  std::shared_ptr<PendingError> d = PendingError::Join(y.Probe(), {c});
  EXPECT_FALSE(d->Poll().has_value());
  x.landed = true;  // the first run lands; the second is still in flight
  EXPECT_FALSE(d->Poll().has_value());
  EXPECT_NO_THROW(d->Check());
  EXPECT_TRUE(d->Poll()->ok());
  // A later run that read d drops it (known to pass).
  FakeRun z;
  std::shared_ptr<PendingError> e = PendingError::Join(z.Probe(), {d});
  z.landed = true;
  EXPECT_NO_THROW(e->Check());
  EXPECT_EQ(z.waits, 1);
}

// Attaches a check failing with `message` to `t`'s storage.
void Fail(const Tensor& t, FakeRun* run, const std::string& message) {
  run->status = absl::InvalidArgumentError(message);
  t.impl().storage->set_pending(PendingError::Join(run->Probe(), {}));
}

TEST(PendingErrorTest, EveryHostReadOfAFailedResultThrows) {
  const Tensor x = RandomTensor({3, 4}, kF32);
  FakeRun run;
  Fail(x, &run, "gather: index 4 is out of range for dim 1 of size 4");
  const Tensor view = x.transpose(0, 1).narrow(0, 1, 2);
  std::vector<std::function<void()>> reads = {
      [&] { x.to_vector(); },
      [&] { x.to_double_vector(); },
      [&] { x.data_ptr(); },
      [&] { x.narrow(0, 0, 1).narrow(1, 0, 1).item(); },
      [&] { std::ostringstream os; os << x; },
      [&] { view.to_vector(); },  // a view shares the storage
      [&] { view.contiguous().to_vector(); },  // and a copy made from it carries the check
      [&] { (x * 2 + 1).to_vector(); },
  };
  for (size_t k = 0; k < reads.size(); ++k) {
    EXPECT_THAT(ErrorOf(reads[k]), HasSubstr("index 4 is out of range for dim 1 of size 4")) << "read " << k;
  }
}

TEST(PendingErrorTest, RunsPassTheCheckOnAndAPassedCheckIsCleared) {
  const Tensor x = RandomTensor({5, 7}, kF32);
  FakeRun run;
  x.impl().storage->set_pending(PendingError::Join(run.Probe(), {}));
  // Eager, compiled and in place: the results carry it without waiting.
  const Tensor eager = exp(x);
  auto f = compile([](const Tensor& a) { return sum(a * 3, -1); });
  const Tensor compiled = f(x);
  const Tensor target = RandomTensor({5, 7}, kF32);
  target.add_(x);
  EXPECT_EQ(run.waits, 0);
  for (const Tensor* t : {&eager, &compiled, &target}) EXPECT_NE(t->impl().storage->pending(), nullptr);
  // The run fails: all of them throw.
  run.status = absl::InvalidArgumentError("embedding: index 11 is out of range for dim 0 of size 10");
  for (const Tensor* t : {&eager, &compiled, &target}) EXPECT_THAT(ErrorOf([&] { t->to_vector(); }), HasSubstr("index 11"));

  // A passing run: the first read clears the check, the values are right.
  const Tensor y = RandomTensor({4}, kF32);
  FakeRun good{.status = absl::OkStatus()};
  y.impl().storage->set_pending(PendingError::Join(good.Probe(), {}));
  const std::vector<float> before = y.to_vector();
  EXPECT_EQ(y.impl().storage->pending(), nullptr);
  const Tensor z = y * 2;
  EXPECT_EQ(z.impl().storage->pending(), nullptr);  // nothing left to pass on
  const std::vector<float> doubled = z.to_vector();
  for (size_t k = 0; k < before.size(); ++k) EXPECT_EQ(doubled[k], before[k] * 2);
  // A fresh result of inputs without a check carries none.
  EXPECT_EQ((RandomTensor({3}, kF32) + 1).impl().storage->pending(), nullptr);
}

}  // namespace
}  // namespace fusebox
