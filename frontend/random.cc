// The process-wide generator and the random ops (frontend/random.h). A random
// op records iota (each element's position), two stride-0 views of its state
// input (seed and offset at every position) and a rand/randn node over them;
// the kernel computes Philox there, so nothing is generated on the host.
#include "frontend/random.h"

#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/driver.h"
#include "frontend/capture.h"
#include "frontend/ops.h"
#include "tensor/layout.h"
#include "tensor/mutex.h"

namespace fusebox {
namespace {

using graph::NodeId;
using graph::Op;

constexpr uint64_t kDefaultSeed = 67280421310721ULL;  // PyTorch's default_rng_seed_val

struct Generator {
  Mutex mu;
  uint64_t seed ABSL_GUARDED_BY(mu) = kDefaultSeed;
  uint64_t offset ABSL_GUARDED_BY(mu) = 0;
};

Generator& TheGenerator() {
  static Generator* generator = new Generator;  // never destroyed: used until exit
  return *generator;
}

// `op` (rand or randn) over `shape`, drawn with a fresh generator state.
Tensor RandomValues(Op op, const Shape& shape, Device device, const char* name) {
  CheckedNumel(shape, name, sizeof(float));
  const Tensor state = frontend::NextGeneratorStateTensor(device);
  frontend::OpRecorder recorder;
  frontend::CaptureSession& session = recorder.session();
  session.UseDevice(device, name);
  const NodeId words = session.Operand(state);
  auto word = [&](int64_t k) {  // word k of the state at every position
    return session.AddNode(graph::Node{.op = Op::kView, .dtype = DType::kInt64, .shape = shape, .inputs = {words},
                                       .strides = Strides(shape.size(), 0), .offset = k});
  };
  const NodeId seed = word(0), offset = word(1);
  const NodeId position = session.AddNode(graph::Node{.op = Op::kIota, .dtype = DType::kInt64, .shape = shape});
  const NodeId values = session.AddNode(
      graph::Node{.op = op, .dtype = DType::kFloat32, .shape = shape, .inputs = {position, seed, offset}});
  return recorder.Finish(values, device, name);
}

// The seeded form: std::mt19937_64 on the host, as fusebox always did.
template <typename Distribution>
Tensor HostRandom(const Shape& shape, Device device, uint64_t seed, const char* name, Distribution dist) {
  std::vector<float> values(static_cast<size_t>(CheckedNumel(shape, name, sizeof(float))));
  std::mt19937_64 gen(seed);
  for (float& v : values) v = dist(gen);
  return Tensor::from_vector(values, shape, device);
}

// Uniform [0, 1) in x's memory order (the layout dropout's result takes, as
// PyTorch's empty_like(x)), viewed in x's dims.
Tensor UniformLike(const Tensor& x) {
  const Strides strides = PreserveStrides(x.shape(), x.strides());
  const auto order = MemoryOrder(x.shape(), strides);  // empty: row-major
  if (order.empty()) return RandomValues(Op::kRandUniform, x.shape(), x.device(), "dropout");
  Shape memory_shape;
  for (int64_t d : order) memory_shape.push_back(x.shape()[d]);
  const Tensor u = RandomValues(Op::kRandUniform, memory_shape, x.device(), "dropout");
  std::vector<int64_t> inverse(order.size());
  for (size_t k = 0; k < order.size(); ++k) inverse[order[k]] = static_cast<int64_t>(k);
  return u.permute(inverse);
}

}  // namespace

void manual_seed(uint64_t seed) {
  Generator& g = TheGenerator();
  MutexLock lock(&g.mu);
  g.seed = seed;
  g.offset = 0;
}

uint64_t initial_seed() {
  Generator& g = TheGenerator();
  MutexLock lock(&g.mu);
  return g.seed;
}

Tensor rand(const Shape& shape, Device device, std::optional<uint64_t> seed) {
  if (seed) return HostRandom(shape, device, *seed, "rand", std::uniform_real_distribution<float>(0.0f, 1.0f));
  return RandomValues(Op::kRandUniform, shape, device, "rand");
}

Tensor randn(const Shape& shape, Device device, std::optional<uint64_t> seed) {
  if (seed) return HostRandom(shape, device, *seed, "randn", std::normal_distribution<float>(0.0f, 1.0f));
  return RandomValues(Op::kRandNormal, shape, device, "randn");
}

Tensor dropout(const Tensor& x, double p, bool training) {
  FUSEBOX_ENSURE(x.defined(), "dropout: x is an undefined Tensor");
  FUSEBOX_ENSURE(p >= 0 && p <= 1, "dropout: probability has to be between 0 and 1, but got ", p);
  FUSEBOX_ENSURE(IsFloating(x.dtype()), "dropout: x must be a floating tensor, got ", DTypeName(x.dtype()),
                 "; convert first, e.g. x.to(DType::kFloat32)");
  if (!training || p == 0 || x.numel() == 0) return x;
  if (p == 1) return x * 0.0;
  const Tensor keep = ge(UniformLike(x), p);
  return where(keep, x * (1.0 / (1.0 - p)), x * 0.0);
}

namespace frontend {

GeneratorState NextGeneratorState() {
  Generator& g = TheGenerator();
  MutexLock lock(&g.mu);
  return {.seed = g.seed, .offset = g.offset++};
}

Tensor NextGeneratorStateTensor(Device device) {
  const GeneratorState state = NextGeneratorState();
  const int64_t words[2] = {static_cast<int64_t>(state.seed), static_cast<int64_t>(state.offset)};
  Tensor t = Tensor::empty({2}, DType::kInt64, device);
  if (device.is_cuda()) {
    // Queued behind the work before it, with no wait (a synchronous copy
    // would wait for the device at every random op).
    ThrowIfError(cuda::Driver::Get().CopyHostToDeviceAsync(device.index, reinterpret_cast<CUdeviceptr>(UncheckedDataPtr(t)),
                                                            words, sizeof words));
  } else {
    std::memcpy(UncheckedDataPtr(t), words, sizeof words);
  }
  t.impl().rng_state = true;
  return t;
}

Tensor Iota(const Shape& shape, Device device) {
  CheckedNumel(shape, "iota", sizeof(int64_t));
  OpRecorder recorder;
  recorder.session().UseDevice(device, "iota");
  return recorder.Finish(recorder.session().AddNode(graph::Node{.op = Op::kIota, .dtype = DType::kInt64, .shape = shape}),
                         device, "iota");
}

}  // namespace frontend
}  // namespace fusebox
