// Data-movement ops, spelled as in PyTorch: indexing by a tensor of indices
// (index_select, gather, embedding), joining (cat, stack) and splitting
// (split, chunk: views). Indexing and joining record one graph node each
// (graph OpKind::kMove), lowered as indirect or masked loads, so they fuse
// with the pointwise ops before and after them.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace fusebox {

// x's slices along `dim` at `index` (1-D, int64 or int32; a 0-d index is one
// index, the dim keeping size 1; a 0-d x takes one index, giving a 0-d
// result). An index outside [0, x.size(dim)) is a fusebox::Error naming it
// (when the op runs; inside compile(), when the call returns), and no
// element is read for it.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out[p] = x[p with p[dim] replaced by index[p]]; index has x's rank (0-d
// counting as 1-D of one element), sizes at most x's outside `dim`; the
// result has index's shape (an empty index gives it unchecked, as PyTorch).
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// F.embedding(indices, weight): weight's rows at indices; the result is
// indices.shape + [weight.size(1)].
Tensor embedding(const Tensor& indices, const Tensor& weight);

// The tensors joined along `dim` (one kernel reading each element from the
// input whose range holds it), promoted to one dtype as PyTorch does. 1-D
// empty tensors are skipped, as in PyTorch.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// The tensors (all of one shape) joined along a new dim `dim`.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

// Views of x along `dim`: pieces of `size` (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim = 0);
// Views of x along `dim` of `sizes` (PyTorch's split with a list, i.e.
// split_with_sizes): non-negative, summing to x.size(dim). A one-element
// list must be spelled std::vector<int64_t>{n}: a braced {n} is the size.
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
// Views of x along `dim`: ceil(x.size(dim) / n) each (the last may be
// smaller, and there may be fewer than n).
std::vector<Tensor> chunk(const Tensor& x, int64_t n, int64_t dim = 0);

}  // namespace fusebox
