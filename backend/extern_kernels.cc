#include "backend/extern_kernels.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "backend/cpu/blas_gemm.h"
#include "backend/kernel_cost.h"
#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/driver.h"
#include "fusion/plan.h"

namespace fusebox::backend {
namespace {

std::atomic<bool> allow_tf32{false};

// One operand of the GEMM: the first element and the element strides of its
// [batch, rows, cols] view (batch stride 0 when 2-D or broadcast).
struct OperandView {
  const void* ptr = nullptr;
  int64_t batch = 0, row = 0, col = 0;
  Shape shape;
};

// The tensor holding value `id`: stored by an earlier kernel, or a bound input.
const Tensor* Holder(const graph::Graph& g, graph::NodeId id, absl::Span<const Tensor> inputs,
                     const absl::flat_hash_map<graph::NodeId, Tensor>& stored) {
  if (auto it = stored.find(id); it != stored.end()) return &it->second;
  if (g.node(id).op == graph::Op::kInput) return &inputs[g.node(id).input_index];
  return nullptr;
}

absl::StatusOr<OperandView> Resolve(const graph::Graph& g, graph::NodeId id, absl::Span<const Tensor> inputs,
                                    const absl::flat_hash_map<graph::NodeId, Tensor>& stored) {
  absl::StatusOr<ExternOperand> o = ResolveExternOperand(g, id, inputs, stored);
  if (!o.ok()) return o.status();
  const size_t r = o->shape.size();
  return OperandView{.ptr = o->ptr, .batch = r == 3 ? o->strides[0] : 0, .row = o->strides[r - 2],
                     .col = o->strides[r - 1], .shape = o->shape};
}

GemmProblem Problem(const graph::Node& mm, const OperandView& a, const OperandView& b) {
  const size_t r = mm.shape.size();
  GemmProblem p;
  p.batch = r == 3 ? mm.shape[0] : 1;
  p.m = mm.shape[r - 2];
  p.n = mm.shape[r - 1];
  p.k = a.shape[r - 1];
  p.dtype = mm.dtype;
  p.a_batch = a.batch, p.a_row = a.row, p.a_col = a.col;
  p.b_batch = b.batch, p.b_row = b.row, p.b_col = b.col;
  p.c_batch = p.m * p.n, p.c_row = p.n;
  p.allow_tf32 = MatmulAllowTf32();
  return p;
}

GemmEpilogue EpilogueOf(const fusion::GemmChain& chain) {
  if (chain.gelu) return chain.bias >= 0 ? GemmEpilogue::kBiasGelu : GemmEpilogue::kGelu;
  return chain.bias >= 0 ? GemmEpilogue::kBias : GemmEpilogue::kNone;
}

}  // namespace

absl::StatusOr<ExternOperand> ResolveExternOperand(const graph::Graph& g, graph::NodeId id,
                                                   absl::Span<const Tensor> inputs,
                                                   const absl::flat_hash_map<graph::NodeId, Tensor>& stored) {
  const graph::Node& n = g.node(id);
  const Tensor* base = Holder(g, id, inputs, stored);
  Strides strides = base == nullptr ? Strides() : stored.contains(id) ? ContiguousStrides(n.shape) : base->strides();
  int64_t offset = 0;
  if (base == nullptr && n.op == graph::Op::kView) {
    base = Holder(g, n.inputs[0], inputs, stored);
    strides = n.strides;
    offset = n.offset;
    // A view reads its input's row-major value; a strided input's elements
    // lie at its own strides (fusion::AttentionOperandReady let it through).
    if (base != nullptr && !stored.contains(n.inputs[0]) && !base->is_contiguous()) {
      StridedRead read{.shape = n.shape, .strides = n.strides, .offset = n.offset};
      if (!ComposeReads({.shape = base->shape(), .strides = base->strides()}, &read)) {
        return absl::InternalError(absl::StrCat("extern operand %", id, " views a strided input it cannot compose with"));
      }
      strides = std::move(read.strides);
      offset = read.offset;
    }
  }
  if (base == nullptr) return absl::InternalError(absl::StrCat("extern operand %", id, " is not where the plan put it"));
  const void* ptr = static_cast<const char*>(UncheckedDataPtr(*base)) + offset * DTypeSize(base->dtype());
  return ExternOperand{.ptr = ptr, .strides = std::move(strides), .shape = n.shape, .dtype = base->dtype()};
}

absl::StatusOr<ExternPrepared> PrepareExtern(const graph::Graph& g, graph::NodeId id, int arch, bool also_compile_cuda,
                                             const TuningSnapshot& tuning) {
  if (g.node(id).op == graph::Op::kAttention) return PrepareAttention(g, id, arch, also_compile_cuda, tuning);
  return ExternPrepared{};
}

absl::StatusOr<Tensor> RunExtern(const graph::Graph& g, const fusion::GemmChain& chain, absl::Span<const Tensor> inputs,
                                 const absl::flat_hash_map<graph::NodeId, Tensor>& stored, const ExternPrepared& prepared,
                                 std::vector<Shape>* operand_shapes) {
  if (chain.matmul < 0) return RunAttention(g, chain.end, inputs, stored, prepared, operand_shapes);
  return RunMatmul(g, chain, inputs, stored, operand_shapes);
}

std::string DescribeExternStructure(const graph::Graph& g, const fusion::GemmChain& chain, const std::string& name) {
  std::string out = absl::StrCat(name, ": matmul %", chain.matmul, " bias %", chain.bias, " residual %", chain.residual,
                                 chain.gelu ? " gelu" : "", " -> %", chain.end, " ", DTypeName(g.node(chain.end).dtype));
  if (chain.matmul < 0) {
    const AttentionProblem p = AttentionProblemOf(g, chain.end);
    absl::StrAppend(&out, " attention E ", p.e, " ", AttentionMaskName(p.mask));
  }
  return out;
}

void SetMatmulAllowTf32(bool allow) { allow_tf32.store(allow, std::memory_order_relaxed); }
bool MatmulAllowTf32() { return allow_tf32.load(std::memory_order_relaxed); }

absl::StatusOr<Tensor> RunMatmul(const graph::Graph& g, const fusion::GemmChain& chain,
                                 absl::Span<const Tensor> inputs,
                                 const absl::flat_hash_map<graph::NodeId, Tensor>& stored,
                                 std::vector<Shape>* operand_shapes) {
  const graph::Node& mm = g.node(chain.matmul);
  absl::StatusOr<OperandView> a = Resolve(g, mm.inputs[0], inputs, stored);
  if (!a.ok()) return a.status();
  absl::StatusOr<OperandView> b = Resolve(g, mm.inputs[1], inputs, stored);
  if (!b.ok()) return b.status();
  if (operand_shapes != nullptr) *operand_shapes = {a->shape, b->shape};
  GemmProblem p = Problem(mm, *a, *b);
  p.epilogue = EpilogueOf(chain);
  p.residual = chain.residual >= 0;
  const void* bias = chain.bias >= 0 ? UncheckedDataPtr(inputs[g.node(chain.bias).input_index]) : nullptr;
  // The residual is dense in the stored value's order (fusion/gemm_epilogue.h),
  // so it has C's layout; C itself is fresh memory, never the residual's.
  const void* residual = nullptr;
  if (p.residual) {
    const Tensor* r = Holder(g, chain.residual, inputs, stored);
    if (r == nullptr) {
      return absl::InternalError(absl::StrCat("residual %", chain.residual, " is not where the plan put it"));
    }
    residual = UncheckedDataPtr(*r);
  }
  const Device device = g.device();
  Tensor out = Tensor::empty(g.node(chain.end).shape, mm.dtype, device);
  if (out.numel() == 0) return out;
  absl::Status s = device.is_cuda()
                       ? cuda::CublasLtGemm(device.index, p, a->ptr, b->ptr, UncheckedDataPtr(out), bias, residual)
                       : cpu::BlasGemm(p, a->ptr, b->ptr, UncheckedDataPtr(out), bias, residual);
  if (!s.ok()) return s;
  return out;
}

KernelCost ExternKernelCost(const graph::Graph& g, const fusion::GemmChain& chain) {
  if (chain.matmul < 0) return AttentionKernelCost(g, chain.end);
  const graph::Node& mm = g.node(chain.matmul);
  // Elements an operand node reads: a view or an input through its strides;
  // a value stored by an earlier kernel is dense.
  auto elements = [&](graph::NodeId id) {
    const graph::Node& n = g.node(id);
    const bool strided = n.op == graph::Op::kInput || n.op == graph::Op::kView;
    return strided ? DistinctElements(n.shape, n.strides) : Numel(n.shape);
  };
  const size_t r = mm.shape.size();
  const int64_t batch = r == 3 ? mm.shape[0] : 1, m = mm.shape[r - 2], n = mm.shape[r - 1];
  const int64_t k = g.node(mm.inputs[0]).shape.back();
  KernelCost cost;
  int64_t read = elements(mm.inputs[0]) + elements(mm.inputs[1]) + (chain.bias >= 0 ? elements(chain.bias) : 0) +
                 (chain.residual >= 0 ? Numel(g.node(chain.residual).shape) : 0);
  cost.bytes = (read + Numel(g.node(chain.end).shape)) * static_cast<int64_t>(DTypeSize(mm.dtype));
  cost.flops = 2 * batch * m * n * k;
  cost.math = mm.dtype == DType::kFloat32 ? MathPeak::kFloat32 : MathPeak::kTensor16;
  return cost;
}

std::string DescribeExternKernel(const graph::Graph& g, const fusion::GemmChain& chain, const std::string& name,
                                 int arch, const TuningSnapshot& tuning) {
  if (chain.matmul < 0) return DescribeAttention(g, chain.end, name, arch, tuning);
  const graph::NodeId id = chain.matmul;
  const graph::Node& mm = g.node(id);
  const graph::Node& a = g.node(mm.inputs[0]);
  const graph::Node& b = g.node(mm.inputs[1]);
  // "bias_gelu", "bias +residual %3 (C, beta = 1)", "residual %3 (...)"
  std::string steps = EpilogueOf(chain) == GemmEpilogue::kNone ? "" : GemmEpilogueName(EpilogueOf(chain));
  if (chain.residual >= 0) {
    absl::StrAppend(&steps, steps.empty() ? "" : " +", "residual %", chain.residual, " (C, beta = 1)");
  }
  return absl::StrCat("// ", name, ": extern kernel, one ", g.device().is_cuda() ? "cuBLASLt" : "OpenBLAS",
                      " GEMM (no generated code)\n// %", id, " = matmul(%", mm.inputs[0], " ", ShapeToString(a.shape),
                      ", %", mm.inputs[1], " ", ShapeToString(b.shape), ") : ", DTypeName(mm.dtype),
                      ShapeToString(mm.shape), "\n",
                      chain.end == id ? "" : absl::StrCat("// epilogue ", steps, ": stores %", chain.end, "\n"));
}

}  // namespace fusebox::backend
