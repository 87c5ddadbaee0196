// A compiled function shared by several threads (as a torch.compile'd module
// is): concurrent calls with the same shapes, with changing shapes (dynamic
// dims and recompiles), with replay, with explain()/stats()/kernels() read
// meanwhile, and eager ops from several threads. Each result is checked
// against float64, and the counters must add up. Label `threads`: run under
// ThreadSanitizer with `tests/sanitize.sh thread -L threads`.
#include <atomic>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "frontend/fusebox.h"
#include "gtest/gtest.h"
#include "tests/frontend/attention_ref.h"
#include "tests/workloads.h"

namespace fusebox {
namespace {

using testing_workloads::FreshSeed;

constexpr int kThreads = 4;

Tensor TanhAffine(const Tensor& x) { return tanh(x) * 2.0 + 1.0; }

// Thread results are checked here, not with gtest inside the threads: the
// first wrong element or exception of any thread, and how many calls failed.
class Failures {
 public:
  void Add(const std::string& what) {
    if (count_++ == 0) {
      std::lock_guard<std::mutex> lock(mu_);
      first_ = what;
    }
  }
  int count() const { return count_; }
  std::string first() const {
    std::lock_guard<std::mutex> lock(mu_);
    return first_;
  }

 private:
  std::atomic<int> count_{0};
  mutable std::mutex mu_;
  std::string first_;
};

// Checks got == tanh(x) * 2 + 1 in float64 within float32 tolerances.
void CheckTanhAffine(const Tensor& x, const Tensor& got, Failures* failures) {
  if (got.shape() != x.shape()) return failures->Add("wrong shape " + ShapeToString(got.shape()));
  const std::vector<double> in = x.to_double_vector();
  const std::vector<double> out = got.to_double_vector();
  for (size_t i = 0; i < in.size(); ++i) {
    const double want = std::tanh(in[i]) * 2.0 + 1.0;
    if (!(std::fabs(out[i] - want) <= 1e-5 + 1e-5 * std::fabs(want))) {
      return failures->Add("element " + std::to_string(i) + ": got " + std::to_string(out[i]) + ", want " +
                           std::to_string(want) + " (shape " + ShapeToString(x.shape()) + ")");
    }
  }
}

// Runs body(thread, call) for `calls` calls on each of kThreads threads; an
// exception counts as a failure.
void RunThreads(int calls, Failures* failures, const std::function<void(int, int)>& body) {
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < calls; ++i) {
        try {
          body(t, i);
        } catch (const std::exception& e) {
          failures->Add(std::string("exception: ") + e.what());
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
}

// Every graph's plan was compiled or came from the cache.
void ExpectStatsAddUp(const CompileStats& s, int64_t calls) {
  EXPECT_EQ(s.calls, calls);
  EXPECT_EQ(s.graph_breaks, 0);
  EXPECT_EQ(s.graphs + s.replays + s.eager_calls, calls);
  EXPECT_EQ(s.plan_compiles + s.cache_hits, s.graphs);
  EXPECT_LE(s.repeated_graphs, s.cache_hits);
}

// Calls the compiled TanhAffine `f` `calls` times on each thread, on fresh
// inputs of shape_of(thread, call), checks every result and the counters.
template <typename F>
CompileStats CallFromThreads(F& f, int calls, const std::function<Shape(int, int)>& shape_of) {
  Failures failures;
  RunThreads(calls, &failures, [&](int t, int i) {
    const Tensor x = randn(shape_of(t, i), Device::cpu(), FreshSeed());
    CheckTanhAffine(x, f(x), &failures);
  });
  EXPECT_EQ(failures.count(), 0) << failures.first();
  const CompileStats s = f.stats();
  ExpectStatsAddUp(s, kThreads * calls);
  return s;
}

TEST(Threads, SharedFunctionSameShape) {
  auto f = compile(TanhAffine);
  // The repro: 4 threads x 2000 calls on 8x8.
  const CompileStats s = CallFromThreads(f, 2000, [](int, int) { return Shape{8, 8}; });
  EXPECT_EQ(s.eager_calls, 0);
  ASSERT_EQ(f.kernels().size(), 1u);
}

// Shapes change from call to call and thread to thread: dims turn dynamic,
// graphs recompile, and the seen shapes are updated from every thread.
TEST(Threads, SharedFunctionChangingShapes) {
  for (const std::optional<bool> dynamic : {std::optional<bool>(), std::optional<bool>(false)}) {
    SCOPED_TRACE(dynamic.has_value() ? "dynamic = false" : "automatic dynamic");
    auto f = compile(TanhAffine, CompileOptions{.dynamic = dynamic, .recompile_limit = 1000});
    const CompileStats s =
        CallFromThreads(f, 150, [](int t, int i) { return Shape{2 + (t * 7 + i) % 5, 3 + (i * 3 + t) % 4}; });
    EXPECT_GT(s.plan_compiles, 1);
  }
}

// Past a small recompile limit calls run eagerly; while other threads still
// trace. Every result stays right and every call is counted once.
TEST(Threads, SharedFunctionReachingRecompileLimit) {
  auto f = compile(TanhAffine, CompileOptions{.dynamic = false, .recompile_limit = 3});
  const CompileStats s = CallFromThreads(f, 60, [](int t, int i) { return Shape{1 + (t + i) % 9, 5}; });
  EXPECT_GT(s.eager_calls, 0);
}

// Replay: entries are confirmed and replayed while other threads trace
// (shapes alternate, so each shape needs its own two traced calls).
TEST(Threads, SharedFunctionWithReplay) {
  auto f = compile(TanhAffine, CompileOptions{.replay = true});
  const CompileStats s = CallFromThreads(f, 300, [](int t, int i) { return Shape{8, 4 + 4 * ((t + i) % 3)}; });
  EXPECT_GT(s.replays, 0);
}

// Several tensors in, a pair out, a view argument: the replayed result's
// views must be rebuilt from this call's plan outputs.
TEST(Threads, SharedReplayOfPairResult) {
  auto f = compile([](const Tensor& x, const Tensor& y) { return std::make_pair(x * y, (x + y).transpose(0, 1)); },
                   CompileOptions{.replay = true});
  const int calls = 200;
  Failures failures;
  RunThreads(calls, &failures, [&](int t, int i) {
    const Tensor x = randn({6, 5}, Device::cpu(), FreshSeed());
    const Tensor y = randn({6, 5}, Device::cpu(), FreshSeed());
    const auto [prod, sum_t] = f(x, y);
    const std::vector<double> a = x.to_double_vector(), b = y.to_double_vector();
    const std::vector<double> p = prod.to_double_vector(), q = sum_t.contiguous().to_double_vector();
    if (sum_t.shape() != Shape{5, 6}) return failures.Add("wrong transposed shape");
    for (int r = 0; r < 6; ++r) {
      for (int c = 0; c < 5; ++c) {
        const double want_p = a[r * 5 + c] * b[r * 5 + c], want_q = a[r * 5 + c] + b[r * 5 + c];
        if (std::fabs(p[r * 5 + c] - want_p) > 1e-5 + 1e-5 * std::fabs(want_p) ||
            std::fabs(q[c * 6 + r] - want_q) > 1e-5 + 1e-5 * std::fabs(want_q)) {
          return failures.Add("wrong element at " + std::to_string(r) + ", " + std::to_string(c));
        }
      }
    }
  });
  EXPECT_EQ(failures.count(), 0) << failures.first();
  const CompileStats s = f.stats();
  ExpectStatsAddUp(s, kThreads * calls);
  EXPECT_GT(s.replays, 0);
}

// explain(), explain_dot(), kernels(), numerics() and stats() read while
// other threads call (with changing shapes, so the records keep changing).
TEST(Threads, ReadersWhileCalling) {
  auto f = compile(TanhAffine, CompileOptions{.replay = true});
  std::atomic<bool> done{false};
  Failures failures;
  std::thread reader([&] {
    int64_t last_calls = 0;
    while (!done) {
      const std::string text = f.explain();
      if (text.rfind("compiled function: ", 0) != 0) failures.Add("explain() starts with: " + text.substr(0, 40));
      if (f.explain_dot().find("digraph") == std::string::npos) failures.Add("explain_dot() has no digraph");
      for (const KernelInfo& k : f.kernels()) {
        if (k.name.empty() || k.source.empty()) failures.Add("a kernel without name or source");
      }
      if (!f.numerics().empty()) failures.Add("numerics() without the numerics check");
      const CompileStats s = f.stats();
      if (s.calls < last_calls) failures.Add("stats().calls went down");
      last_calls = s.calls;
    }
  });
  CallFromThreads(f, 200, [](int t, int i) { return Shape{3 + (t + i) % 4, 16}; });
  done = true;
  reader.join();
  EXPECT_EQ(failures.count(), 0) << failures.first();
}

// A function with a graph break: each call captures two graphs, and the
// second graph reads the first one's result. The threads' shapes differ, so
// the sizes are dynamic from the start: with static ones, threads that miss
// the cache at once each compile a static plan before any sees the dim
// marked dynamic, and under load that reached the recompile limit (8) in CI
// (SharedFunctionReachingRecompileLimit covers the limit).
TEST(Threads, SharedFunctionWithGraphBreak) {
  auto f = compile(
      [](const Tensor& x) {
        const Tensor y = exp(x);
        (void)y.to_double_vector();  // a graph break (its value would be a constant: a recompile per call)
        return y * 2.0 + 1.0;
      },
      CompileOptions{.dynamic = true});
  const int calls = 100;
  Failures failures;
  RunThreads(calls, &failures, [&](int t, int i) {
    const Tensor x = randn({4, 3 + t}, Device::cpu(), FreshSeed());
    const Tensor out = f(x);
    const std::vector<double> in = x.to_double_vector(), got = out.to_double_vector();
    for (size_t k = 0; k < in.size(); ++k) {
      const double want = std::exp(in[k]) * 2.0 + 1.0;
      if (std::fabs(got[k] - want) > 1e-5 + 1e-5 * std::fabs(want)) return failures.Add("wrong element");
    }
  });
  EXPECT_EQ(failures.count(), 0) << failures.first();
  const CompileStats s = f.stats();
  EXPECT_EQ(s.calls, kThreads * calls);
  EXPECT_EQ(s.graphs, 2 * kThreads * calls);
  EXPECT_EQ(s.graph_breaks, kThreads * calls);
  EXPECT_EQ(s.plan_compiles + s.cache_hits, s.graphs);
}

// Threads making their first calls at once with a graph no one compiled
// yet: one compiles the plan, the others wait for it (a cache hit each), so
// the function counts one compile and no recompiles, whichever thread wins.
// Each round starts the threads together on a fresh graph (a constant of
// its own), the race the single flight in RunGraph closes.
TEST(Threads, ConcurrentFirstCallsCompileOnce) {
  for (int round = 0; round < 20; ++round) {
    const double shift = 0.5 + round * 1e-3 + static_cast<double>(FreshSeed() % 1000) * 1e-7;
    auto f = compile([shift](const Tensor& x) { return tanh(x) * 2.0 + shift; });
    std::atomic<int> ready{0};
    Failures failures;
    RunThreads(1, &failures, [&](int, int) {
      const Tensor x = randn({8, 16}, Device::cpu(), FreshSeed());
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();
      const std::vector<double> in = x.to_double_vector(), got = f(x).to_double_vector();
      for (size_t k = 0; k < in.size(); ++k) {
        const double want = std::tanh(in[k]) * 2.0 + shift;
        if (std::fabs(got[k] - want) > 1e-5 + 1e-5 * std::fabs(want)) return failures.Add("wrong element");
      }
    });
    EXPECT_EQ(failures.count(), 0) << failures.first();
    const CompileStats s = f.stats();
    EXPECT_EQ(s.calls, kThreads);
    EXPECT_EQ(s.plan_compiles, 1) << "round " << round << "\n" << f.explain();
    EXPECT_EQ(s.cache_hits, kThreads - 1);
  }
}

// Eager ops (one plan per op, shared through the process's plan cache) from
// several threads, on shapes that repeat across threads.
// A compiled call's results reach other threads concrete: their first reads
// (to_vector, an op on them) no longer both adopt the value (a data race on
// the tensor before; TSan saw it in the sanitized build).
TEST(Threads, ResultsOfACompiledCallSharedBetweenThreads) {
  auto f = compile(TanhAffine);
  auto pair = compile([](const Tensor& x) { return std::pair<Tensor, Tensor>{TanhAffine(x), TanhAffine(x).transpose(0, 1)}; },
                      CompileOptions{.replay = true});
  for (int round = 0; round < 20; ++round) {
    const Tensor x = randn({16, 8}, Device::cpu(), FreshSeed());
    const Tensor y = f(x);
    const auto [p, q] = pair(x);
    // Concrete: no pending value left to adopt (is_lazy() is false for a realized one too).
    EXPECT_EQ(y.impl().lazy, nullptr);
    EXPECT_EQ(p.impl().lazy, nullptr) << "round " << round;
    EXPECT_EQ(q.impl().lazy, nullptr) << "round " << round;
    Failures failures;
    RunThreads(1, &failures, [&](int t, int) {
      if (t % 2 == 0) {
        CheckTanhAffine(x, y, &failures);
        CheckTanhAffine(x.transpose(0, 1), q, &failures);
      } else {
        CheckTanhAffine(x, p * 1.0, &failures);  // an op reading the shared result
      }
    });
    ASSERT_EQ(failures.count(), 0) << failures.first();
  }
}

// Attention written by hand whose mask is a tensor judged on its values
// (fusion/input_values.h), shared by threads that pass the triangle, a
// window or a fresh all-true mask: plans for other values are made while
// other threads run the first, and every result follows its own mask.
TEST(Threads, MasksJudgedOnTheirValuesFromSeveralThreads) {
  const int64_t t = 19, e = 64;
  auto random = [&](int64_t rows) { return randn({2, rows, e}, Device::cpu(), FreshSeed()) * 0.3; };
  const Tensor q = random(t), k = random(t), v = random(t);
  auto mask_of = [&](const std::function<bool(int64_t, int64_t, int64_t)>& kept) {
    std::vector<double> values;
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < t; ++j) values.push_back(kept(0, i, j) ? 1.0 : 0.0);
    }
    return Tensor::from_vector(values, {t, t}, DType::kFloat32, Device::cpu());
  };
  const std::function<bool(int64_t, int64_t, int64_t)> kinds[] = {
      [](int64_t, int64_t i, int64_t j) { return j <= i; }, [](int64_t, int64_t, int64_t) { return true; },
      [](int64_t, int64_t i, int64_t j) { return j <= i && j >= i - 2; }};
  std::vector<test_util::Expected> want;
  for (const auto& kept : kinds) {
    want.push_back(test_util::AttentionRef(q, k, v, 0.125, kept, [](int64_t, int64_t, int64_t) { return 0.0; }));
  }
  const Tensor causal = mask_of(kinds[0]), window = mask_of(kinds[2]);
  auto f = compile([](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& m) {
    const Tensor scores = matmul(a, b.transpose(-2, -1)) * 0.125;
    return matmul(softmax(masked_fill(scores, eq(m, 0.0), -INFINITY), -1), c);
  });
  Failures failures;
  RunThreads(12, &failures, [&](int thread, int call) {
    const int kind = (thread + call) % 3;
    const Tensor mask = kind == 0 ? causal : kind == 2 ? window : mask_of(kinds[1]);  // all-true: fresh each call
    const Tensor got = f(q, k, v, mask);
    if (::testing::AssertionResult r = test_util::CloseToAttention(got, want[kind], "attention"); !r) {
      failures.Add(std::string("thread ") + std::to_string(thread) + ", call " + std::to_string(call) + ": " +
                   r.message());
    }
  });
  EXPECT_EQ(failures.count(), 0) << failures.first();
  ExpectStatsAddUp(f.stats(), kThreads * 12);
}

TEST(Threads, EagerOpsFromSeveralThreads) {
  const int calls = 150;
  Failures failures;
  RunThreads(calls, &failures, [&](int t, int i) {
    const Shape shape{1 + (t + i) % 5, 7};
    const Tensor x = randn(shape, Device::cpu(), FreshSeed());
    const Tensor y = randn({1, 7}, Device::cpu(), FreshSeed());
    const Tensor out = exp(x) * y - sum(x, 1, /*keepdim=*/true);
    const std::vector<double> a = x.to_double_vector(), b = y.to_double_vector(), got = out.to_double_vector();
    for (int64_t r = 0; r < shape[0]; ++r) {
      double row = 0;
      for (int c = 0; c < 7; ++c) row += a[r * 7 + c];
      for (int c = 0; c < 7; ++c) {
        const double want = std::exp(a[r * 7 + c]) * b[c] - row;
        if (std::fabs(got[r * 7 + c] - want) > 1e-5 + 1e-4 * std::fabs(want)) return failures.Add("wrong element");
      }
    }
  });
  EXPECT_EQ(failures.count(), 0) << failures.first();
}

}  // namespace
}  // namespace fusebox
