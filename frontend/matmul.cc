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
  FUSEBOX_ENSURE((a.dim() == 2 || a.dim() == 3) && (b.dim() == 2 || b.dim() == 3),
                 "matmul: expects 2-D or 3-D tensors (batched), got ", Describe(a), " and ", Describe(b));
  const int64_t m = a.shape()[a.dim() - 2], k = a.shape()[a.dim() - 1];
  const int64_t k2 = b.shape()[b.dim() - 2], n = b.shape()[b.dim() - 1];
  FUSEBOX_ENSURE(k == k2, "matmul: inner sizes differ: ", Describe(a), " @ ", Describe(b), " (", k, " != ", k2, ")");
  // A concrete operand the GEMM cannot read as a (transposed) dense matrix
  // is copied first; lazy ones are stored by a kernel before the GEMM.
  auto dense = [](const Tensor& t) {
    const int64_t r = t.dim();
    return t.is_lazy() || fusion::GemmReadsInPlace(t.shape()[r - 2], t.shape()[r - 1], t.strides()[r - 2], t.strides()[r - 1]);
  };
  Shape shape = {m, n};
  CheckedNumel(shape, "matmul", DTypeSize(dtype));
  Tensor lhs = dense(a) ? a : a.contiguous(), rhs = dense(b) ? b : b.contiguous();
  if (a.dim() == 3 || b.dim() == 3) {
    const int64_t ba = a.dim() == 3 ? a.shape()[0] : 1, bb = b.dim() == 3 ? b.shape()[0] : 1;
    FUSEBOX_ENSURE(ba == bb || ba == 1 || bb == 1, "matmul: batch sizes cannot be broadcast: ", Describe(a), " @ ",
                   Describe(b));
    const int64_t batch = ba == 1 ? bb : ba;  // broadcasting: 1 grows to the other's size, also to 0
    lhs = lhs.expand({batch, m, k});  // a 2-D or batch-1 side: batch stride 0
    rhs = rhs.expand({batch, k, n});
    shape = {batch, m, n};
    CheckedNumel(shape, "matmul", DTypeSize(dtype));
  }
  if (k == 0) return zeros(shape, a.device(), dtype);  // an empty sum: as PyTorch
  frontend::OpRecorder recorder;
  frontend::CaptureSession& session = recorder.session();
  // scalar: 1 lets the fuser put the ops after the GEMM into its epilogue.
  graph::Node node{.op = graph::Op::kMatmul, .dtype = dtype, .shape = shape, .scalar = matmul_epilogue_fusion() ? 1.0 : 0.0};
  node.inputs.push_back(session.Operand(lhs));
  node.inputs.push_back(session.Operand(rhs));
  return recorder.Finish(session.AddNode(std::move(node)), a.device(), "matmul");
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  FUSEBOX_ENSURE(x.defined() && weight.defined(), "linear: x and weight must be defined Tensors");
  FUSEBOX_ENSURE(weight.dim() == 2, "linear: weight must be 2-D [out, in], got ", Describe(weight));
  FUSEBOX_ENSURE(x.dim() >= 1 && x.dim() <= 3, "linear: x must be 1-D, 2-D or 3-D [..., in], got ", Describe(x));
  FUSEBOX_ENSURE(x.shape().back() == weight.shape()[1], "linear: x's last size ", x.shape().back(),
                 " != weight's in_features ", weight.shape()[1], " (", Describe(x), ", weight ", Describe(weight), ")");
  const Tensor rows = x.dim() == 1 ? x.unsqueeze(0) : x;
  Tensor y = matmul(rows, weight.transpose(0, 1));
  if (bias.defined()) {
    FUSEBOX_ENSURE(bias.dim() == 1 && bias.shape()[0] == weight.shape()[0], "linear: bias must be [",
                   weight.shape()[0], "], got ", Describe(bias));
    y = y + bias;
  }
  return x.dim() == 1 ? y.view({weight.shape()[0]}) : y;
}

void set_matmul_epilogue_fusion(bool on) { epilogue_fusion.store(on, std::memory_order_relaxed); }
bool matmul_epilogue_fusion() { return epilogue_fusion.load(std::memory_order_relaxed); }

void set_matmul_allow_tf32(bool allow) { backend::SetMatmulAllowTf32(allow); }
bool matmul_allow_tf32() { return backend::MatmulAllowTf32(); }

}  // namespace fusebox
