// A plan's extern kernels (fusion::KernelKind::kExtern): a matmul node run as
// one vendor GEMM (backend/gemm.h), an attention node as the fused flash
// kernel on CUDA or its CPU twin (backend/attention.h), each over its
// operands where they lie: bound inputs through their strides, values earlier
// kernels stored, and views of those (a transpose or a broadcast batch is a
// stride, never a copy).
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backend/attention.h"
#include "backend/gemm.h"
#include "backend/tuning.h"
#include "fusion/gemm_epilogue.h"
#include "graph/graph.h"
#include "profiler/profiler.h"
#include "tensor/tensor.h"

namespace fusebox::cuda {
struct FlashKernel;  // backend/cuda/flash_attention.h
}

namespace fusebox::backend {

// What an extern kernel compiled ahead: for attention on CUDA the flash
// kernel it launches (also compiled, not loaded, for a CPU plan whose CUDA
// twins are compiled: CI checks it); nothing for a GEMM.
struct ExternPrepared {
  const ::fusebox::cuda::FlashKernel* flash = nullptr;
};
absl::StatusOr<ExternPrepared> PrepareExtern(const graph::Graph& g, graph::NodeId id, int arch, bool also_compile_cuda,
                                             const TuningSnapshot& tuning);

// Runs an extern kernel (fusion::ChainOf: a GEMM and its epilogue, or an
// attention node, chain.matmul < 0) and returns the value it stores,
// `chain.end`: RunMatmul's or RunAttention's.
absl::StatusOr<Tensor> RunExtern(const graph::Graph& g, const fusion::GemmChain& chain, absl::Span<const Tensor> inputs,
                                 const absl::flat_hash_map<graph::NodeId, Tensor>& stored, const ExternPrepared& prepared,
                                 std::vector<Shape>* operand_shapes);

// Where an extern kernel's operand `id` lies: its first element, its element
// strides over the node's shape, and the dtype of the memory it reads.
struct ExternOperand {
  const void* ptr = nullptr;
  Strides strides;
  Shape shape;
  DType dtype = DType::kFloat32;
};
absl::StatusOr<ExternOperand> ResolveExternOperand(const graph::Graph& g, graph::NodeId id,
                                                   absl::Span<const Tensor> inputs,
                                                   const absl::flat_hash_map<graph::NodeId, Tensor>& stored);

// Runs a GEMM kernel: its matmul and the chain after it that the fuser put
// into the GEMM's epilogue (bias, gelu, residual), and returns the value it
// stores, `chain.end` (a fresh contiguous tensor of that node's shape; never
// the residual's memory); `operand_shapes` gets the operands' shapes (for the
// profiler).
absl::StatusOr<Tensor> RunMatmul(const graph::Graph& g, const fusion::GemmChain& chain,
                                 absl::Span<const Tensor> inputs,
                                 const absl::flat_hash_map<graph::NodeId, Tensor>& stored,
                                 std::vector<Shape>* operand_shapes);

// Runs an attention node (graph op `attention`; its value is fresh and contiguous).
absl::StatusOr<Tensor> RunAttention(const graph::Graph& g, graph::NodeId id, absl::Span<const Tensor> inputs,
                                    const absl::flat_hash_map<graph::NodeId, Tensor>& stored,
                                    const ExternPrepared& prepared, std::vector<Shape>* operand_shapes);
// The attention node's problem, operands aside (its sizes, scale, mask and batch dims).
AttentionProblem AttentionProblemOf(const graph::Graph& g, graph::NodeId id);
absl::StatusOr<ExternPrepared> PrepareAttention(const graph::Graph& g, graph::NodeId id, int arch,
                                                bool also_compile_cuda, const TuningSnapshot& tuning);

// The extern kernel's roofline facts (profiler.h KernelCost). A GEMM: A, B,
// the bias and a residual read once (a broadcast operand once), C written
// once; 2 * m * n * k * batch FLOPs on the bf16/f16 tensor cores, or f32
// (TF32 is decided per launch, MatmulAllowTf32 on CUDA). Attention: q, k, v
// and the output once; 4 l s e FLOPs per head, half of them causal.
KernelCost ExternKernelCost(const graph::Graph& g, const fusion::GemmChain& chain);
KernelCost AttentionKernelCost(const graph::Graph& g, graph::NodeId id);

// What an extern kernel computes, without its sizes: its chain's nodes and
// options, the dtype, and attention's head dim and mask (what a dynamic plan
// compares at two sizes; the sizes are read when it runs).
std::string DescribeExternStructure(const graph::Graph& g, const fusion::GemmChain& chain, const std::string& name);
// What c.kernels() shows as an extern kernel's source: the library call (for
// attention on CUDA, the flash kernel's source too).
std::string DescribeExternKernel(const graph::Graph& g, const fusion::GemmChain& chain, const std::string& name,
                                 int arch, const TuningSnapshot& tuning);
std::string DescribeAttention(const graph::Graph& g, graph::NodeId id, const std::string& name,
                              int arch, const TuningSnapshot& tuning);

// Whether f32 matmuls on CUDA may use TF32 (as torch.backends.cuda.matmul.allow_tf32;
// off by default). Read at each GEMM.
void SetMatmulAllowTf32(bool allow);
bool MatmulAllowTf32();

}  // namespace fusebox::backend
