// The attention node as an extern kernel (extern_kernels.h): its problem read
// off the graph, the flash kernel compiled ahead on CUDA, and the run: the
// flash kernel on CUDA, CpuAttention on the host.
#include <optional>

#include "absl/strings/str_cat.h"
#include "backend/cpu/attention.h"
#include "backend/cuda/flash_attention.h"
#include "backend/extern_kernels.h"

namespace fusebox::backend {
namespace {

// The node's mask: causal (its `dim`), or the dtype of its fourth operand.
AttentionMask MaskOf(const graph::Graph& g, const graph::Node& n) {
  if (n.dim == 1) return AttentionMask::kCausal;
  if (n.inputs.size() < 4) return AttentionMask::kNone;
  return g.node(n.inputs[3]).dtype == DType::kBool ? AttentionMask::kBool : AttentionMask::kFloat;
}

// Batch strides of an operand, the node's batch dims right-aligned into the problem's.
std::array<int64_t, kAttentionBatchDims> BatchStrides(const Strides& strides, size_t batch_dims) {
  std::array<int64_t, kAttentionBatchDims> out{};
  for (size_t d = 0; d < batch_dims; ++d) out[kAttentionBatchDims - batch_dims + d] = strides[d];
  return out;
}

}  // namespace

AttentionProblem AttentionProblemOf(const graph::Graph& g, graph::NodeId id) {
  const graph::Node& n = g.node(id);
  const size_t r = n.shape.size();
  FUSEBOX_CHECK(n.op == graph::Op::kAttention && r >= 2 && r - 2 <= kAttentionBatchDims &&
                    (n.axes.empty() || (n.axes.size() == r && n.axes.back() == static_cast<int64_t>(r) - 1)),
                "bad attention node %", id);
  // The problem's [batch..., L, E] dims and the output's strides along them:
  // the node's own (contiguous) dims, reordered where it stores permuted.
  const Strides stored = ContiguousStrides(n.shape);
  Shape shape = n.shape;
  Strides out = stored;
  for (size_t i = 0; i < n.axes.size(); ++i) shape[n.axes[i]] = n.shape[i], out[n.axes[i]] = stored[i];
  AttentionProblem p{.dtype = n.dtype, .l = shape[r - 2], .s = g.node(n.inputs[1]).shape[r - 2],
                     .e = shape[r - 1], .scale = n.scalar, .mask = MaskOf(g, n)};
  for (size_t d = 0; d + 2 < r; ++d) p.batch[kAttentionBatchDims - (r - 2) + d] = shape[d];
  p.o_batch = BatchStrides(out, r - 2), p.o_row = out[r - 2];
  return p;
}

absl::StatusOr<ExternPrepared> PrepareAttention(const graph::Graph& g, graph::NodeId id, int arch,
                                                bool also_compile_cuda, const TuningSnapshot& tuning) {
  const Device device = g.device();
  if (device.is_cpu() && !also_compile_cuda) return ExternPrepared{};
  const AttentionProblem p = AttentionProblemOf(g, id);
  const std::optional<cuda::FlashConfig> config = cuda::FlashConfigFor(p, arch, tuning);
  if (!config) {
    // The frontend and the recognition pass make no other attention node.
    if (device.is_cpu()) return ExternPrepared{};
    return absl::UnimplementedError(absl::StrCat("the fused attention kernel takes bf16, f16 and f32 with head dim "
                                                 "64 or 128 on CUDA, not ", p.ToString()));
  }
  absl::StatusOr<const cuda::FlashKernel*> kernel =
      cuda::GetFlashKernel(*config, device.is_cuda() ? device.index : -1, arch);
  if (!kernel.ok()) return kernel.status();
  return ExternPrepared{.flash = *kernel};
}

absl::StatusOr<Tensor> RunAttention(const graph::Graph& g, graph::NodeId id, absl::Span<const Tensor> inputs,
                                    const absl::flat_hash_map<graph::NodeId, Tensor>& stored,
                                    const ExternPrepared& prepared, std::vector<Shape>* operand_shapes) {
  const graph::Node& n = g.node(id);
  AttentionProblem p = AttentionProblemOf(g, id);
  const size_t r = n.shape.size();
  std::vector<ExternOperand> ops;
  for (graph::NodeId in : n.inputs) {
    absl::StatusOr<ExternOperand> o = ResolveExternOperand(g, in, inputs, stored);
    if (!o.ok()) return o.status();
    const bool is_mask = ops.size() == 3;
    // The CPU reads each operand in its own dtype (the numerics check widens
    // computed values to f32, not inputs); the flash kernel reads p.dtype.
    const DType want = is_mask && p.mask == AttentionMask::kBool ? DType::kBool : p.dtype;
    if (g.device().is_cuda() && o->dtype != want) {
      return absl::InternalError(absl::StrCat("attention %", id, " reads a ", DTypeName(o->dtype), " operand into a ",
                                              DTypeName(p.dtype), " result on CUDA"));
    }
    if (!is_mask && p.e > 1 && o->strides[r - 1] != 1) {
      return absl::InternalError(absl::StrCat("attention operand %", in, " is not unit-stride along E"));
    }
    ops.push_back(*std::move(o));
  }
  if (operand_shapes != nullptr) {
    operand_shapes->clear();
    for (const ExternOperand& o : ops) operand_shapes->push_back(o.shape);
  }
  p.q_batch = BatchStrides(ops[0].strides, r - 2), p.q_row = ops[0].strides[r - 2];
  p.k_batch = BatchStrides(ops[1].strides, r - 2), p.k_row = ops[1].strides[r - 2];
  p.v_batch = BatchStrides(ops[2].strides, r - 2), p.v_row = ops[2].strides[r - 2];
  const void* mask = nullptr;
  if (ops.size() == 4) {
    p.m_batch = BatchStrides(ops[3].strides, r - 2), p.m_row = ops[3].strides[r - 2], p.m_col = ops[3].strides[r - 1];
    mask = ops[3].ptr;
  }
  const Device device = g.device();
  Tensor out = Tensor::empty(n.shape, n.dtype, device);  // the node's shape: p's dims in the stored order
  if (out.numel() == 0) return out;
  void* o = UncheckedDataPtr(out);
  if (device.is_cuda() && prepared.flash == nullptr) {
    return absl::InternalError(absl::StrCat("attention %", id, " has no CUDA kernel"));
  }
  absl::Status s =
      device.is_cuda()
          ? cuda::LaunchFlashAttention(device.index, *prepared.flash, p, ops[0].ptr, ops[1].ptr, ops[2].ptr, mask, o)
          : cpu::CpuAttention(p, ops[0].ptr, ops[1].ptr, ops[2].ptr, mask, o,
                              {ops[0].dtype, ops[1].dtype, ops[2].dtype, ops.size() == 4 ? ops[3].dtype : p.dtype});
  if (!s.ok()) return s;
  return out;
}

std::string DescribeAttention(const graph::Graph& g, graph::NodeId id, const std::string& name,
                              int arch, const TuningSnapshot& tuning) {
  const graph::Node& n = g.node(id);
  const AttentionProblem p = AttentionProblemOf(g, id);
  std::string operands;
  for (graph::NodeId in : n.inputs) {
    absl::StrAppend(&operands, operands.empty() ? "" : ", ", "%", in, " ", ShapeToString(g.node(in).shape));
  }
  std::string out = absl::StrCat("// ", name, ": extern kernel, ",
                                 g.device().is_cuda() ? "the fused flash attention (NVRTC)" : "attention on the CPU",
                                 "\n// %", id, " = attention(", operands, ") : ", DTypeName(n.dtype),
                                 ShapeToString(n.shape), ", scale ", n.scalar, ", ", AttentionMaskName(p.mask), "\n");
  if (const std::optional<cuda::FlashConfig> config = cuda::FlashConfigFor(p, arch, tuning)) {
    absl::StrAppend(&out, cuda::FlashAttentionSource(*config));  // the kernel CUDA runs (a CPU plan's CUDA twin)
  }
  return out;
}

KernelCost AttentionKernelCost(const graph::Graph& g, graph::NodeId id) {
  const AttentionProblem p = AttentionProblemOf(g, id);
  const int64_t heads = p.BatchCount();
  KernelCost cost;
  // q, k, v and the output once each (a mask is not counted: its broadcast
  // form is small next to them); two GEMMs of 2 l s e FLOPs, half of the
  // score matrix under a causal mask (as torch's SDPA benchmarks count).
  cost.bytes = heads * (2 * p.l * p.e + 2 * p.s * p.e) * static_cast<int64_t>(DTypeSize(p.dtype));
  cost.flops = heads * 4 * p.l * p.s * p.e / (p.mask == AttentionMask::kCausal ? 2 : 1);
  cost.math = p.dtype == DType::kFloat32 ? MathPeak::kFloat32 : MathPeak::kTensor16;  // f32 runs on FMA
  return cost;
}

}  // namespace fusebox::backend
