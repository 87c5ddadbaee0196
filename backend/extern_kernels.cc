#include "backend/extern_kernels.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "backend/cpu/blas_gemm.h"
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

// The chain a matmul kernel computes, from the value it stores (`id`) down
// to the matmul: an activation and a bias add the fuser put in its epilogue
// (fusion/fuse_kernels.cc, EpilogueEnd).
struct Chain {
  graph::NodeId matmul = -1;
  graph::NodeId bias = -1;  // the bias input node, or -1
  GemmEpilogue epilogue = GemmEpilogue::kNone;
};

Chain ChainOf(const graph::Graph& g, graph::NodeId id) {
  Chain c;
  graph::Op act = graph::Op::kCopy;
  if (g.node(id).op == graph::Op::kRelu || g.node(id).op == graph::Op::kGeluTanh) {
    act = g.node(id).op;
    id = g.node(id).inputs[0];
  }
  if (g.node(id).op == graph::Op::kAdd) {
    const graph::Node& add = g.node(id);
    const bool first = g.node(add.inputs[0]).op == graph::Op::kMatmul;
    c.bias = add.inputs[first ? 1 : 0];
    id = add.inputs[first ? 0 : 1];
  }
  c.matmul = id;
  const bool bias = c.bias >= 0;
  if (act == graph::Op::kRelu) c.epilogue = bias ? GemmEpilogue::kBiasRelu : GemmEpilogue::kRelu;
  else if (act == graph::Op::kGeluTanh) c.epilogue = bias ? GemmEpilogue::kBiasGelu : GemmEpilogue::kGelu;
  else if (bias) c.epilogue = GemmEpilogue::kBias;
  return c;
}

}  // namespace

absl::StatusOr<ExternOperand> ResolveExternOperand(const graph::Graph& g, graph::NodeId id,
                                                   absl::Span<const Tensor> inputs,
                                                   const absl::flat_hash_map<graph::NodeId, Tensor>& stored) {
  const graph::Node& n = g.node(id);
  const Tensor* base = nullptr;
  Strides strides;
  int64_t offset = 0;
  if (auto it = stored.find(id); it != stored.end()) {
    base = &it->second;
    strides = ContiguousStrides(n.shape);
  } else if (n.op == graph::Op::kInput) {
    base = &inputs[n.input_index];
    strides = base->strides();
  } else if (n.op == graph::Op::kView) {
    const graph::Node& b = g.node(n.inputs[0]);
    if (auto it = stored.find(n.inputs[0]); it != stored.end()) {
      base = &it->second;
    } else if (b.op == graph::Op::kInput) {
      base = &inputs[b.input_index];
    }
    strides = n.strides;
    offset = n.offset;
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

absl::StatusOr<Tensor> RunExtern(const graph::Graph& g, graph::NodeId id, absl::Span<const Tensor> inputs,
                                 const absl::flat_hash_map<graph::NodeId, Tensor>& stored, const ExternPrepared& prepared,
                                 std::vector<Shape>* operand_shapes) {
  if (g.node(id).op == graph::Op::kAttention) return RunAttention(g, id, inputs, stored, prepared, operand_shapes);
  return RunMatmul(g, id, inputs, stored, operand_shapes);
}

void SetMatmulAllowTf32(bool allow) { allow_tf32.store(allow, std::memory_order_relaxed); }
bool MatmulAllowTf32() { return allow_tf32.load(std::memory_order_relaxed); }

absl::StatusOr<Tensor> RunMatmul(const graph::Graph& g, graph::NodeId id, absl::Span<const Tensor> inputs,
                                 const absl::flat_hash_map<graph::NodeId, Tensor>& stored,
                                 std::vector<Shape>* operand_shapes) {
  const Chain chain = ChainOf(g, id);
  const graph::Node& mm = g.node(chain.matmul);
  absl::StatusOr<OperandView> a = Resolve(g, mm.inputs[0], inputs, stored);
  if (!a.ok()) return a.status();
  absl::StatusOr<OperandView> b = Resolve(g, mm.inputs[1], inputs, stored);
  if (!b.ok()) return b.status();
  if (operand_shapes != nullptr) *operand_shapes = {a->shape, b->shape};
  GemmProblem p = Problem(mm, *a, *b);
  p.epilogue = chain.epilogue;
  const void* bias = chain.bias >= 0 ? UncheckedDataPtr(inputs[g.node(chain.bias).input_index]) : nullptr;
  const Device device = g.device();
  Tensor out = Tensor::empty(mm.shape, mm.dtype, device);
  if (out.numel() == 0) return out;
  absl::Status s = device.is_cuda() ? cuda::CublasLtGemm(device.index, p, a->ptr, b->ptr, UncheckedDataPtr(out), bias)
                                    : cpu::BlasGemm(p, a->ptr, b->ptr, UncheckedDataPtr(out), bias);
  if (!s.ok()) return s;
  return out;
}

std::string DescribeExternKernel(const graph::Graph& g, graph::NodeId value, const std::string& name,
                                 const TuningSnapshot& tuning) {
  if (g.node(value).op == graph::Op::kAttention) return DescribeAttention(g, value, name, tuning);
  const Chain chain = ChainOf(g, value);
  const graph::NodeId id = chain.matmul;
  const graph::Node& mm = g.node(id);
  const graph::Node& a = g.node(mm.inputs[0]);
  const graph::Node& b = g.node(mm.inputs[1]);
  return absl::StrCat("// ", name, ": extern kernel, one ", g.device().is_cuda() ? "cuBLASLt" : "OpenBLAS",
                      " GEMM (no generated code)\n// %", id, " = matmul(%", mm.inputs[0], " ", ShapeToString(a.shape),
                      ", %", mm.inputs[1], " ", ShapeToString(b.shape), ") : ", DTypeName(mm.dtype),
                      ShapeToString(mm.shape), "\n",
                      chain.epilogue == GemmEpilogue::kNone
                          ? ""
                          : absl::StrCat("// epilogue ", GemmEpilogueName(chain.epilogue), ": stores %", value, "\n"));
}

}  // namespace fusebox::backend
