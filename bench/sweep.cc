#include "bench/sweep.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/workloads.h"

namespace fusebox::bench {
namespace {

constexpr int64_t kBig = int64_t{1} << 24;  // elements of a grid's large shapes
int64_t Odd(int64_t n) { return std::max<int64_t>(n, 1) | 1; }

Tensor Gelu(const Tensor& x) { return 0.5 * x * (1.0 + tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * pow(x, 3.0)))); }
Tensor GeluOfSum(const Tensor& x, const Tensor& column) { return Gelu(x + column); }
Tensor Copy(const Tensor& x) { return x.clone(); }

// The reductions and normalizations over dim D, as a user writes them: the
// built-in op where PyTorch has one for that dim, else written out.
template <int D>
Tensor Sum(const Tensor& x) {
  return sum(x, D);
}
template <int D>
Tensor Softmax(const Tensor& x) {
  return softmax(x, D);
}
template <int D>
Tensor LogSoftmax(const Tensor& x) {
  return log_softmax(x, D);
}
template <int D>
Tensor LayerNorm(const Tensor& x, const Tensor& w, const Tensor& b) {
  if (D == -1) return layer_norm(x, {x.size(-1)}, w, b, 1e-5);
  Tensor centered = x - mean(x, D, /*keepdim=*/true);
  return centered * rsqrt(mean(centered * centered, D, /*keepdim=*/true) + 1e-5) * w + b;
}
template <int D>
Tensor RmsNorm(const Tensor& x, const Tensor& w) {
  if (D == -1) return rms_norm(x, {x.size(-1)}, w, 1e-6);
  return x * rsqrt(mean(x * x, D, /*keepdim=*/true) + 1e-6) * w;
}

template <int D>
WorkloadFn ForDim(SweepOp op) {
  switch (op) {
    case SweepOp::kSum: return Fn1{Sum<D>};
    case SweepOp::kSoftmax: return Fn1{Softmax<D>};
    case SweepOp::kLogSoftmax: return Fn1{LogSoftmax<D>};
    case SweepOp::kLayerNorm: return Fn3{LayerNorm<D>};
    case SweepOp::kRmsNorm: return Fn2{RmsNorm<D>};
    case SweepOp::kGelu:
    case SweepOp::kCopy: break;
  }
  return Fn1{Gelu};
}

}  // namespace

WorkloadFn SweepFunction(const SweepCase& c) {
  if (c.op == SweepOp::kCopy) return Fn1{Copy};
  if (c.op == SweepOp::kGelu) return c.layout == SweepLayout::kBroadcast ? WorkloadFn{Fn2{GeluOfSum}} : Fn1{Gelu};
  if (c.dim == -1) return ForDim<-1>(c.op);
  return c.dim == 0 ? ForDim<0>(c.op) : ForDim<1>(c.op);
}

namespace {

// The tensor `shape` in `layout`, drawn from `seed`.
Tensor InLayout(const Shape& shape, SweepLayout layout, Device device, DType dtype, uint64_t seed, bool uninitialized) {
  auto draw = [&](const Shape& s) { return uninitialized ? Tensor::empty(s, dtype, device) : randn(s, device, seed).to(dtype); };
  switch (layout) {
    case SweepLayout::kTransposed: return draw({shape[1], shape[0]}).transpose(0, 1);
    case SweepLayout::kPermuted: return draw({shape[2], shape[0], shape[1]}).permute({1, 2, 0});
    case SweepLayout::kSliced: {
      Shape wide = shape;
      wide.back() += 3;
      return draw(wide).narrow(-1, 1, shape.back());
    }
    case SweepLayout::kContiguous:
    case SweepLayout::kBroadcast: break;
  }
  return draw(shape);
}

// The grid of one class: each shape in f32 and bf16, the first also in f16.
void AddClass(std::vector<SweepCase>* out, const std::string& cls, SweepOp op, SweepLayout layout, int64_t dim,
              const std::vector<Shape>& shapes) {
  for (size_t i = 0; i < shapes.size(); ++i) {
    for (DType d : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
      if (d == DType::kFloat16 && i != 0) continue;
      out->push_back({cls, op, layout, shapes[i], dim, d});
    }
  }
}

}  // namespace

const char* SweepOpName(SweepOp op) {
  const char* names[] = {"gelu", "sum", "softmax", "log_softmax", "layer_norm", "rms_norm", "copy"};
  return names[static_cast<int>(op)];
}

const char* SweepLayoutName(SweepLayout layout) {
  const char* names[] = {"contiguous", "transposed", "permuted", "sliced", "broadcast"};
  return names[static_cast<int>(layout)];
}

std::string SweepCase::name() const {
  return absl::StrCat(cls, " [", absl::StrJoin(shape, ", "), "] ", DTypeName(dtype));
}

std::vector<SweepCase> SweepCases(bool quick) {
  // Large shapes hold about 2^24 elements (past the L2 in every dtype); one
  // small one per class, where launches and tails show.
  const int64_t big = quick ? (int64_t{1} << 14) : kBig;
  const std::vector<int64_t> rows_of = quick ? std::vector<int64_t>{1, 37, 1031} : std::vector<int64_t>{1, 37, 1031, 16411, 262147};
  const std::vector<int64_t> reduced_of = quick ? std::vector<int64_t>{37, 1031} : std::vector<int64_t>{37, 1031, 16411};
  std::vector<Shape> last, first, middle;
  for (int64_t n : rows_of) last.push_back({Odd(big / n), n});
  last.push_back({129, 1031});
  for (int64_t n : reduced_of) first.push_back({n, Odd(big / n)});
  first.push_back({1031, 129});
  for (int64_t n : reduced_of) middle.push_back({33, n, Odd(big / (33 * n))});
  middle.push_back({5, 129, 33});
  const int64_t side = Odd(static_cast<int64_t>(std::sqrt(static_cast<double>(big))));
  const std::vector<Shape> square = {{side, side + 2}, {129, 1031}};
  const std::vector<Shape> cube = {{33, 1031, Odd(big / (33 * 1031))}, {5, 129, 33}};

  std::vector<SweepCase> cases;
  AddClass(&cases, "copy/contiguous", SweepOp::kCopy, SweepLayout::kContiguous, -1, square);
  for (SweepLayout layout : {SweepLayout::kContiguous, SweepLayout::kTransposed, SweepLayout::kPermuted,
                             SweepLayout::kSliced, SweepLayout::kBroadcast}) {
    AddClass(&cases, absl::StrCat("gelu/", SweepLayoutName(layout)), SweepOp::kGelu, layout, -1,
             layout == SweepLayout::kPermuted ? cube : square);
  }
  for (SweepOp op : {SweepOp::kSum, SweepOp::kSoftmax, SweepOp::kLogSoftmax, SweepOp::kLayerNorm, SweepOp::kRmsNorm}) {
    const std::string name = SweepOpName(op);
    AddClass(&cases, name + "/last", op, SweepLayout::kContiguous, -1, last);
    AddClass(&cases, name + "/dim0", op, SweepLayout::kContiguous, 0, first);
    AddClass(&cases, name + "/middle", op, SweepLayout::kContiguous, 1, middle);
  }
  return cases;
}

std::vector<Tensor> MakeSweepInputs(const SweepCase& c, Device device, uint64_t seed, bool uninitialized) {
  auto draw = [&](const Shape& s, uint64_t k) {
    return uninitialized ? Tensor::empty(s, c.dtype, device) : randn(s, device, seed + k).to(c.dtype);
  };
  std::vector<Tensor> inputs = {InLayout(c.shape, c.layout, device, c.dtype, seed, uninitialized)};
  if (c.layout == SweepLayout::kBroadcast) inputs.push_back(draw({c.shape[0], 1}, 1));
  if (c.op == SweepOp::kLayerNorm || c.op == SweepOp::kRmsNorm) {
    // Weight (and bias) along the normalized dim, 1 elsewhere; [n] for the last.
    const int64_t rank = static_cast<int64_t>(c.shape.size());
    const int64_t d = c.dim < 0 ? c.dim + rank : c.dim;
    Shape s = c.dim == -1 ? Shape{c.shape.back()} : Shape(c.shape.size(), 1);
    if (c.dim != -1) s[d] = c.shape[d];
    inputs.push_back(draw(s, 2));
    if (c.op == SweepOp::kLayerNorm) inputs.push_back(draw(s, 3));
  }
  return inputs;
}

Tensor RunSweepOp(const SweepCase& c, const std::vector<Tensor>& inputs) { return Invoke(SweepFunction(c), inputs); }

SweepResult RunSweepCase(const SweepCase& c, Device device, const TimingPlan& plan, double cache_bytes,
                         uint64_t seed) {
  SweepResult r;
  r.c = c;
  try {
    std::vector<std::vector<Tensor>> sets = {MakeSweepInputs(c, device, seed)};
    const Tensor eager = RunSweepOp(c, sets[0]);
    for (const Tensor& t : sets[0]) r.bytes += static_cast<double>(t.numel()) * DTypeSize(t.dtype());
    r.bytes += static_cast<double>(eager.numel()) * DTypeSize(eager.dtype());
    const int count = RotationSets(r.bytes, cache_bytes, plan.max_input_sets);
    for (int s = 1; s < count; ++s) sets.push_back(MakeSweepInputs(c, device, seed + 10 * s));

    CompiledWorkload compiled(SweepFunction(c));
    Tensor got;
    r.compiled.cold_ms = TimeOnceMs(device, [&] { got = compiled(sets[0]); });
    for (const KernelInfo& k : compiled.kernels()) r.kernel_names.push_back(k.name);
    r.kernels = static_cast<int>(r.kernel_names.size());
    const std::vector<double> want = eager.to_double_vector(), have = got.to_double_vector();
    double scale = 1;
    for (size_t i = 0; i < want.size(); ++i) {
      scale = std::max(scale, std::fabs(want[i]));
      r.max_diff = std::max(r.max_diff, std::fabs(want[i] - have[i]));
    }
    r.max_diff /= scale;
    const double tol = c.dtype == DType::kFloat32 ? 1e-5 : 1.0 / 64;
    if (!(r.max_diff <= tol)) r.error = absl::StrCat("compiled differs from eager by ", r.max_diff, " (tolerance ", tol, ")");
    r.compiled.trials_ms = TimeTrialsMs(device, plan, [&](int call) { (void)compiled(sets[call % sets.size()]); });
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

}  // namespace fusebox::bench
