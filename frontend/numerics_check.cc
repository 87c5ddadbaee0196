#include "frontend/numerics_check.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tensor/mutex.h"
#include "frontend/capture.h"
#include "frontend/input_values.h"
#include "fusion/pipeline.h"
#include "spdlog/spdlog.h"

namespace fusebox::frontend {
namespace {

using graph::NodeId;

// How far a stored value may be from the float32 reference: allclose's
// atol + rtol * |reference|. 16-bit floats round once when stored (at most
// 2^-11 relative for float16, 2^-8 for bfloat16), and a value an earlier
// kernel stored was rounded too: rtol leaves room for a few such roundings.
// Float32 differs only by contractions (fma) and reassociation.
struct Tolerance {
  double atol = 0, rtol = 0;  // integers and bools: exact
};
Tolerance ToleranceFor(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return {1e-5, 1e-4};
    case DType::kFloat16: return {1e-5, 2e-3};
    case DType::kBFloat16: return {1e-5, 1.6e-2};
    default: return {};
  }
}

// |a - b|, with equal infinities and two NaNs agreeing, and a NaN against a
// number infinitely far.
double Difference(double a, double b) {
  if (a == b || (std::isnan(a) && std::isnan(b))) return 0;
  if (std::isnan(a) || std::isnan(b)) return INFINITY;
  return std::fabs(a - b);
}

// The reference's inputs: 16-bit float inputs as float32 copies (the same
// values), so every node reads float32, as the fused kernels compute (a
// recognized attention's f32 kernel takes no 16-bit operand).
std::vector<Tensor> WidenHalfInputs(absl::Span<const Tensor> inputs) {
  std::vector<Tensor> wide(inputs.begin(), inputs.end());
  for (Tensor& t : wide) {
    if (ComputeDType(t.dtype()) != t.dtype()) t = t.to(ComputeDType(t.dtype()));
  }
  return wide;
}

// The reference graph: 16-bit float ops computed and stored in float32, its
// inputs those of WidenHalfInputs (their strides: a strided input's copy is
// compact; views read an input's row-major value, so they stay). Casts keep
// their dtype: a cast to 16 bits is rounding the program asked for. Ids are
// kept, so nodes match the fused plan's.
graph::Graph WidenHalfFloats(const graph::Graph& g, absl::Span<const Tensor> wide_inputs) {
  return g.Rewritten([&](NodeId, graph::Node& n) {
    if (ComputeDType(n.dtype) == n.dtype || n.op == graph::Op::kCast) return;
    n.dtype = ComputeDType(n.dtype);
    if (n.op == graph::Op::kInput) n.strides = wide_inputs[n.input_index].strides();
  });
}

// The unfused executable for `wide`, compiled once per graph (a debug mode:
// the cache is never trimmed).
std::shared_ptr<const backend::Executable> Reference(const graph::Graph& wide) {
  static fusebox::Mutex mu;
  static auto* cache = new absl::flat_hash_map<graph::Graph, std::shared_ptr<const backend::Executable>>();
  {
    fusebox::MutexLock lock(&mu);
    if (auto it = cache->find(wide); it != cache->end()) return it->second;
  }
  std::shared_ptr<const backend::Executable> exe =
      ValueOrThrow(backend::Executable::Compile(fusion::BuildPlan(wide, {}, {.fuse = false})));
  fusebox::MutexLock lock(&mu);
  return cache->emplace(wide, std::move(exe)).first->second;
}

// Both plans come from one captured structure, so their graphs (after dead
// node elimination) number the same nodes alike.
bool SameNodes(const graph::Graph& a, const graph::Graph& b) {
  if (a.size() != b.size()) return false;
  for (NodeId id = 0; id < a.size(); ++id) {
    if (a.node(id).op != b.node(id).op || a.node(id).inputs != b.node(id).inputs) return false;
  }
  return true;
}

// Folds the values `fused` and `reference` of node `id` into `out`;
// `worst_excess` is how far out of tolerance out->worst is. A 16-bit
// attention's kernel rounds its probabilities to 16 bits before P V (every
// tensor-core attention does, torch's too), so its error follows the size
// of the values it averages rather than the result's own, which cancellation
// can bring near zero (on the H100: 0.00096 off at a value of 0.0001 whose
// neighbours reach 1): there atol grows by rtol times the largest reference
// value (`scaled`).
void Compare(NodeId id, DType dtype, bool scaled, const Tensor& fused, const Tensor& reference, KernelNumerics* out,
             double* worst_excess) {
  const std::vector<double> got = fused.to_double_vector(), want = reference.to_double_vector();
  Tolerance tol = ToleranceFor(dtype);
  if (scaled) {
    double largest = 0;
    for (double w : want) largest = std::isfinite(w) ? std::max(largest, std::fabs(w)) : largest;
    tol.atol += tol.rtol * largest;
  }
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double d = Difference(got[i], want[i]);
    out->max_abs = std::max(out->max_abs, d);
    if (std::isfinite(want[i]) && want[i] != 0) out->max_rel = std::max(out->max_rel, d / std::fabs(want[i]));
    const double allowed = tol.atol + tol.rtol * std::fabs(want[i]);
    if (!std::isinf(d) && d <= allowed) continue;
    out->flagged = true;
    const double excess = allowed > 0 ? d / allowed : INFINITY;
    if (out->worst.empty() || excess > *worst_excess) {
      *worst_excess = excess;
      out->worst = absl::StrCat("%", id, "[", i, "]: fused ", got[i], " vs unfused ", want[i], " (", DTypeName(dtype), ")");
    }
  }
}

}  // namespace

bool CheckNumericsFromEnv() {
  static const bool on = [] {
    const char* env = std::getenv("FUSEBOX_CHECK_NUMERICS");
    return env != nullptr && *env != '\0' && std::strcmp(env, "0") != 0;
  }();
  return on;
}

std::string DescribeNumerics(const KernelNumerics& n) {
  return absl::StrCat(absl::StrFormat("max abs error %.3g, max rel error %.3g", n.max_abs, n.max_rel),
                      n.flagged ? absl::StrCat(", FLAGGED: ", n.worst) : "");
}

std::vector<KernelNumerics> CheckNumerics(const graph::Graph& captured, absl::Span<const Tensor> inputs,
                                          const backend::Executable& fused,
                                          const backend::Executable::StoredValues& fused_values) {
  EagerScope eager;  // reading values back must not record into the session being flushed
  const graph::Graph& g = fused.plan().graph;
  backend::Executable::StoredValues reference_values;
  // A debugging aid that cannot run says so and lets the program go on.
  try {
    // Widened after the graph passes: a recognized 16-bit attention is the same node in f32.
    const std::vector<Tensor> wide_inputs = WidenHalfInputs(inputs);
    // A plan that judged a mask on input values judges it the same way here
    // (its guards held for this run: the values are those it read).
    TensorInputValues values(inputs);
    fusion::InputValues* judged = fused.plan().value_guards.empty() ? nullptr : &values;
    std::shared_ptr<const backend::Executable> reference =
        Reference(WidenHalfFloats(fusion::RunGraphPasses(captured, nullptr, judged), wide_inputs));
    if (!SameNodes(g, reference->plan().graph)) {
      spdlog::warn("numerics check skipped: the unfused graph does not match the fused plan's");
      return {};
    }
    ValueOrThrow(reference->Run(wide_inputs, &reference_values));
  } catch (const Error& e) {
    spdlog::warn("numerics check skipped: the unfused reference failed: {}", e.what());
    return {};
  }
  std::vector<KernelNumerics> result;
  for (const fusion::KernelGroup& k : fused.plan().kernels) {
    KernelNumerics n{.kernel = k.name};
    double worst_excess = 0;
    for (NodeId id : k.outputs) {
      auto f = fused_values.find(id);
      auto r = reference_values.find(id);
      if (f != fused_values.end() && r != reference_values.end()) {
        const graph::Node& node = g.node(id);
        const bool scaled = node.op == graph::Op::kAttention && ComputeDType(node.dtype) != node.dtype;
        Compare(id, node.dtype, scaled, f->second, r->second, &n, &worst_excess);
      }
    }
    if (n.flagged) spdlog::warn("numerics check: kernel {} differs from its ops run unfused: {}", n.kernel, DescribeNumerics(n));
    result.push_back(std::move(n));
  }
  return result;
}

}  // namespace fusebox::frontend
