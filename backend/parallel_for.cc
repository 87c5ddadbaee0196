#include "backend/parallel_for.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace fusebox::backend {

void ParallelFor(int64_t n, int64_t cost, const std::function<void(int64_t, int64_t)>& body) {
  // Threads pay off only for work well above their start cost (~10 us each).
  constexpr int64_t kGrain = 1 << 16;
  // glibc reads /sys for the core count on every call: ask once.
  static const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t threads = std::min<int64_t>({cores, n * cost / kGrain, n});
  if (threads <= 1) return body(0, n);
  std::vector<std::thread> pool;
  const int64_t chunk = (n + threads - 1) / threads;
  for (int64_t t = 1; t < threads; ++t) {
    pool.emplace_back(body, t * chunk, std::min(n, (t + 1) * chunk));
  }
  body(0, std::min(n, chunk));
  for (auto& th : pool) th.join();
}

}  // namespace fusebox::backend
