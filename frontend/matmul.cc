#include "frontend/matmul.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "backend/extern_kernels.h"
#include "frontend/capture.h"
#include "frontend/ops.h"
#include "fusion/plan.h"
#include "tensor/creation.h"

namespace fusebox {
namespace {

std::atomic<bool> epilogue_fusion{true};

std::string Describe(const Tensor& t) {
  return absl::StrCat(DTypeName(t.dtype()), ShapeToString(t.shape()), " on ", t.device().str());
}

// Whether x's dims before the last merge into one as a view: each one's
// stride is the next (size > 1) dim's stride times that dim's size.
bool LeadingDimsMerge(const Tensor& x) {
  if (x.numel() == 0) return true;
  int64_t want = -1;  // the stride the next outer dim needs; -1: any
  for (int64_t d = x.dim() - 2; d >= 0; --d) {
    if (x.shape()[d] == 1) continue;
    if (want >= 0 && x.strides()[d] != want) return false;
    want = x.strides()[d] * x.shape()[d];
  }
  return true;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  FUSEBOX_ENSURE(a.defined() && b.defined(), "matmul: an operand is an undefined Tensor");
  FUSEBOX_ENSURE(a.device() == b.device(), "matmul: expected both tensors on one device, got ", Describe(a), " and ",
                 Describe(b), "; move them with .to(Device) first");
  FUSEBOX_ENSURE(a.dtype() == b.dtype(), "matmul: expected one dtype, got ", Describe(a), " and ", Describe(b),
                 "; convert one with .to(DType)");
  const DType dtype = a.dtype();
  FUSEBOX_ENSURE(dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16,
                 "matmul: supports float32, bfloat16 and float16, got ", Describe(a));
  FUSEBOX_ENSURE(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least 1 dim, got ", Describe(a),
                 " and ", Describe(b));
  // As torch.matmul: a 1-D a is one row, a 1-D b one column, and that dim
  // is dropped from the result.
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a, b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  const int64_t m = a2.shape()[a2.dim() - 2], k = a2.shape()[a2.dim() - 1];
  const int64_t k2 = b2.shape()[b2.dim() - 2], n = b2.shape()[b2.dim() - 1];
  FUSEBOX_ENSURE(k == k2, "matmul: inner sizes differ: ", Describe(a), " @ ", Describe(b), " (", k, " != ", k2, ")");
  Shape batch;
  FUSEBOX_ENSURE(BroadcastShapes(Shape(a2.shape().begin(), a2.shape().end() - 2),
                                 Shape(b2.shape().begin(), b2.shape().end() - 2), &batch),
                 "matmul: batch sizes cannot be broadcast: ", Describe(a), " @ ", Describe(b));
  Shape result = batch;
  if (a.dim() > 1) result.push_back(m);
  if (b.dim() > 1) result.push_back(n);
  // Checked before any operand is copied: a broadcast [2^40, 1] @ [1, 2^40] overflows.
  CheckedNumel(result, "matmul", DTypeSize(dtype));
  if (k == 0) return zeros(result, a.device(), dtype);  // an empty sum: as PyTorch

  // The GEMM node reads [rows, cols] operands, or [batch, rows, cols] with one
  // batch stride (0 broadcasts). The broadcast batch dims fold into that one
  // dim as a view where the strides allow it (contiguous, a transposed matrix,
  // an expanded batch); reshape copies the operand where they do not.
  int64_t batch_numel = 1;
  for (int64_t s : batch) batch_numel *= s;
  Shape node_shape = {m, n};
  if (!batch.empty()) node_shape.insert(node_shape.begin(), batch_numel);
  auto operand = [&](const Tensor& t, int64_t rows, int64_t cols) {
    // A concrete matrix the GEMM cannot read as a (transposed) dense one is
    // copied first; lazy ones are stored by a kernel before the GEMM.
    const int64_t r = t.dim();
    const bool dense = t.is_lazy() || fusion::GemmReadsInPlace(rows, cols, t.strides()[r - 2], t.strides()[r - 1]);
    Tensor out = dense ? t : t.contiguous();
    if (batch.empty()) return out;
    Shape full = batch;
    full.push_back(rows);
    full.push_back(cols);
    out = out.expand(full);
    return batch.size() == 1 ? out : out.reshape({batch_numel, rows, cols});
  };
  const Tensor lhs = operand(a2, m, k), rhs = operand(b2, k, n);

  frontend::OpRecorder recorder;
  frontend::CaptureSession& session = recorder.session();
  // scalar: 1 lets the fuser put the ops after the GEMM into its epilogue.
  graph::Node node{.op = graph::Op::kMatmul, .dtype = dtype, .shape = node_shape, .scalar = matmul_epilogue_fusion() ? 1.0 : 0.0};
  node.inputs.push_back(session.Operand(lhs));
  node.inputs.push_back(session.Operand(rhs));
  const Tensor out = recorder.Finish(session.AddNode(std::move(node)), a.device(), "matmul");
  return result == node_shape ? out : out.view(result);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  FUSEBOX_ENSURE(x.defined() && weight.defined(), "linear: x and weight must be defined Tensors");
  FUSEBOX_ENSURE(weight.dim() == 2, "linear: weight must be 2-D [out, in], got ", Describe(weight));
  FUSEBOX_ENSURE(x.dim() >= 1, "linear: x must have at least 1 dim [..., in], got ", Describe(x));
  FUSEBOX_ENSURE(x.shape().back() == weight.shape()[1], "linear: x's last size ", x.shape().back(),
                 " != weight's in_features ", weight.shape()[1], " (", Describe(x), ", weight ", Describe(weight), ")");
  const int64_t out = weight.shape()[0];
  FUSEBOX_ENSURE(!bias.defined() || (bias.dim() == 1 && bias.shape()[0] == out), "linear: bias must be [", out,
                 "], got ", bias.defined() ? Describe(bias) : "");
  Shape result(x.shape().begin(), x.shape().end() - 1);
  result.push_back(out);
  // As torch: x's rows fold into one 2-D GEMM [rows, in] where its strides
  // allow that as a view; otherwise the batched matmul takes x as it lies.
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.shape()[d];
  const Tensor x2 = x.dim() == 2 || !LeadingDimsMerge(x) ? x : x.view({rows, x.shape().back()});
  Tensor y = matmul(x2, weight.transpose(0, 1));
  // The bias is added before viewing back, so the GEMM's epilogue can take it.
  if (bias.defined()) y = y + bias;
  return y.shape() == result ? y : y.view(result);
}

void set_matmul_epilogue_fusion(bool on) { epilogue_fusion.store(on, std::memory_order_relaxed); }
bool matmul_epilogue_fusion() { return epilogue_fusion.load(std::memory_order_relaxed); }

void set_matmul_allow_tf32(bool allow) { backend::SetMatmulAllowTf32(allow); }
bool matmul_allow_tf32() { return backend::MatmulAllowTf32(); }

}  // namespace fusebox
