// A plan's extern kernels (fusion::KernelKind::kExtern): a matmul node run as
// one vendor GEMM (backend/gemm.h) over its operands where they lie: bound
// inputs through their strides, values earlier kernels stored, and views of
// those (a transpose or a broadcast batch is a stride, never a copy).
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backend/gemm.h"
#include "fusion/gemm_epilogue.h"
#include "graph/graph.h"
#include "profiler/profiler.h"
#include "tensor/tensor.h"

namespace fusebox::backend {

// Runs an extern kernel of `g`: its matmul and the chain after it that the
// fuser put into the GEMM's epilogue (fusion::ChainOf: bias, gelu, residual),
// and returns the value it stores, `chain.end` (a fresh contiguous tensor of
// that node's shape; never the residual's memory); `operand_shapes` gets the
// operands' shapes (for the profiler).
absl::StatusOr<Tensor> RunMatmul(const graph::Graph& g, const fusion::GemmChain& chain,
                                 absl::Span<const Tensor> inputs,
                                 const absl::flat_hash_map<graph::NodeId, Tensor>& stored,
                                 std::vector<Shape>* operand_shapes);

// The GEMM's roofline facts (profiler.h KernelCost): A, B, the bias and a residual read
// once (a broadcast operand once), C written once; 2 * m * n * k * batch
// FLOPs on the bf16/f16 tensor cores, or f32 (TF32 is decided per launch,
// MatmulAllowTf32 on CUDA).
KernelCost ExternKernelCost(const graph::Graph& g, const fusion::GemmChain& chain);

// What c.kernels() shows as an extern kernel's source: the library call.
std::string DescribeExternKernel(const graph::Graph& g, const fusion::GemmChain& chain, const std::string& name);

// Whether f32 matmuls on CUDA may use TF32 (as torch.backends.cuda.matmul.allow_tf32;
// off by default). Read at each GEMM.
void SetMatmulAllowTf32(bool allow);
bool MatmulAllowTf32();

}  // namespace fusebox::backend
