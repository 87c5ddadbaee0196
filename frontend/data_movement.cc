#include "frontend/data_movement.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/capture.h"
#include "tensor/creation.h"
#include "tensor/error.h"

namespace fusebox {
namespace {

using graph::Op;

void EnsureIndex(const Tensor& x, const Tensor& index, const char* op, const char* what) {
  FUSEBOX_ENSURE(x.defined() && index.defined(), op, ": undefined Tensor");
  FUSEBOX_ENSURE(index.dtype() == DType::kInt64 || index.dtype() == DType::kInt32, op, ": ", what,
                 " must be int64 or int32, got ", index.str(), "; convert first, e.g. .to(DType::kInt64)");
  FUSEBOX_ENSURE(x.device() == index.device(), op, ": expected all tensors on one device, got ", x.str(), " and ",
                 index.str(), "; move them with .to(Device) first");
}

// Records one indexing node (index_select, embedding, gather) of `shape`.
Tensor Index(Op op, const Tensor& x, int64_t dim, const Tensor& index, const Shape& shape) {
  const char* name = graph::OpName(op);
  CheckedNumel(shape, name, DTypeSize(x.dtype()));
  if (Numel(shape) == 0) return zeros(shape, x.device(), x.dtype());
  // Every index is out of range of an empty dim: no kernel could read one.
  FUSEBOX_ENSURE(x.shape()[dim] > 0, name, ": index out of range for dim ", dim, " of size 0 of ", x.str());
  frontend::OpRecorder recorder;
  frontend::CaptureSession& session = recorder.session();
  const graph::NodeId in = session.Operand(x), idx = session.Operand(index);
  const graph::NodeId node =
      session.AddNode(graph::Node{.op = op, .dtype = x.dtype(), .shape = shape, .inputs = {in, idx}, .dim = dim});
  return recorder.Finish(node, x.device(), name);
}

// Views of x along `dim`, one after another, of `sizes` (which sum to at most its size).
std::vector<Tensor> Pieces(const Tensor& x, int64_t dim, const std::vector<int64_t>& sizes) {
  std::vector<Tensor> out;
  int64_t begin = 0;
  for (int64_t size : sizes) {
    out.push_back(x.narrow(dim, begin, size));
    begin += size;
  }
  return out;
}

// `count` pieces of `size` along `dim` (the last ones cut short at its end).
std::vector<Tensor> EvenPieces(const Tensor& x, int64_t size, int64_t dim, int64_t count) {
  std::vector<int64_t> sizes;
  const int64_t total = x.shape()[dim];
  for (int64_t k = 0, start = 0; k < count; ++k, start += size) sizes.push_back(std::min(size, total - std::min(start, total)));
  return Pieces(x, dim, sizes);
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  EnsureIndex(x, index, "index_select", "index");
  // PyTorch's checks: a 0-d index is one index (the dim keeps size 1), and a
  // 0-d x takes exactly one (the result is 0-d).
  FUSEBOX_ENSURE(index.dim() <= 1, "index_select: index is supposed to be a vector (0-d or 1-D), got ", index.str());
  dim = WrapDim(dim, x.dim(), "index_select");
  const Tensor index1 = index.dim() == 0 ? index.reshape({1}) : index;
  if (x.dim() == 0) {
    FUSEBOX_ENSURE(index.numel() == 1, "index_select: index to a 0-d x can have only 1 value, got ", index.str());
    return Index(Op::kIndexSelect, x.reshape({1}), 0, index1, {1}).reshape({});
  }
  Shape shape = x.shape();
  shape[dim] = index.numel();
  return Index(Op::kIndexSelect, x, dim, index1, shape);
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  FUSEBOX_ENSURE(x.defined() && index.defined(), "gather: undefined Tensor");
  dim = WrapDim(dim, x.dim(), "gather");
  // As PyTorch: an empty index gives an empty result of its shape, unchecked.
  if (index.numel() == 0) return zeros(index.shape(), x.device(), x.dtype());
  EnsureIndex(x, index, "gather", "index");
  // 0-d tensors count as 1-D of one element (PyTorch's ensure_nonempty_dim).
  const Tensor x1 = x.dim() == 0 ? x.reshape({1}) : x, index1 = index.dim() == 0 ? index.reshape({1}) : index;
  FUSEBOX_ENSURE(index1.dim() == x1.dim(), "gather: index must have x's rank (0-d counts as 1-D), got x ", x.str(),
                 " and index ", index.str());
  for (int64_t d = 0; d < x1.dim(); ++d) {
    FUSEBOX_ENSURE(d == dim || index1.shape()[d] <= x1.shape()[d], "gather: index ", index.str(), " is larger than x ",
                   x.str(), " in dim ", d, " (only dim ", dim, " may differ freely)");
  }
  const Tensor out = Index(Op::kGather, x1, dim, index1, index1.shape());
  return index.dim() == 0 ? out.reshape({}) : out;
}

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  EnsureIndex(weight, indices, "embedding", "indices");
  FUSEBOX_ENSURE(weight.dim() == 2, "embedding: weight must be 2-D [num_embeddings, dim], got ", weight.str());
  Shape shape = indices.shape();
  shape.push_back(weight.shape()[1]);
  return Index(Op::kEmbedding, weight, 0, indices, shape);
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  FUSEBOX_ENSURE(!tensors.empty(), "cat: expected a non-empty list of tensors");
  // PyTorch skips 1-D empty tensors (a legacy placeholder) in any cat.
  std::vector<const Tensor*> parts;
  DType dtype = DType::kBool;
  bool first = true;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = tensors[k];
    FUSEBOX_ENSURE(t.defined(), "cat: tensor ", k, " is undefined");
    FUSEBOX_ENSURE(t.dim() > 0, "cat: zero-dimensional tensor ", k, " cannot be concatenated");
    FUSEBOX_ENSURE(t.device() == tensors[0].device(), "cat: expected all tensors on one device, got ",
                   tensors[0].str(), " and ", t.str(), " (tensor ", k, "); move them with .to(Device) first");
    dtype = first ? t.dtype() : PromoteTypes(dtype, t.dtype());
    first = false;
    if (!(t.dim() == 1 && t.numel() == 0)) parts.push_back(&t);
  }
  if (parts.empty()) return zeros({0}, tensors[0].device(), dtype);
  const Tensor& lead = *parts[0];
  dim = WrapDim(dim, lead.dim(), "cat");
  Shape shape = lead.shape();
  shape[dim] = 0;
  for (const Tensor* t : parts) {
    FUSEBOX_ENSURE(t->dim() == lead.dim(), "cat: tensors must have one rank, got ", lead.str(), " and ", t->str());
    for (int64_t d = 0; d < lead.dim(); ++d) {
      FUSEBOX_ENSURE(d == dim || t->shape()[d] == lead.shape()[d], "cat: sizes must match except in dim ", dim,
                     ", got ", lead.str(), " and ", t->str(), " (dim ", d, ")");
    }
    shape[dim] += t->shape()[dim];
  }
  CheckedNumel(shape, "cat", DTypeSize(dtype));
  if (Numel(shape) == 0) return zeros(shape, lead.device(), dtype);
  frontend::OpRecorder recorder;
  frontend::CaptureSession& session = recorder.session();
  graph::Node node{.op = Op::kCat, .dtype = dtype, .shape = shape, .dim = dim};
  for (const Tensor* t : parts) {
    if (t->shape()[dim] == 0) continue;  // contributes no element
    graph::NodeId id = session.Operand(*t);
    if (t->dtype() != dtype) {
      id = session.AddNode(graph::Node{.op = Op::kCast, .dtype = dtype, .shape = t->shape(), .inputs = {id}});
    }
    node.inputs.push_back(id);
  }
  return recorder.Finish(session.AddNode(std::move(node)), lead.device(), "cat");
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  FUSEBOX_ENSURE(!tensors.empty(), "stack: expected a non-empty list of tensors");
  for (size_t k = 0; k < tensors.size(); ++k) {
    FUSEBOX_ENSURE(tensors[k].defined(), "stack: tensor ", k, " is undefined");
    FUSEBOX_ENSURE(tensors[k].shape() == tensors[0].shape(), "stack: expects each tensor to be of one shape, got ",
                   tensors[0].str(), " and ", tensors[k].str(), " (tensor ", k, ")");
  }
  dim = WrapDim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(dim));
  return cat(parts, dim);
}

std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim) {
  FUSEBOX_ENSURE(x.defined() && x.dim() > 0, "split: expected a tensor with dims, got ", x.defined() ? x.str() : "undefined");
  dim = WrapDim(dim, x.dim(), "split");
  const int64_t total = x.shape()[dim];
  FUSEBOX_ENSURE(size > 0 || (size == 0 && total == 0), "split: split_size must be positive (0 only for an empty dim), got ",
                 size, " for ", x.str());
  const int64_t count = size == 0 ? 1 : std::max<int64_t>((total + size - 1) / size, 1);
  return EvenPieces(x, size, dim, count);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  FUSEBOX_ENSURE(x.defined() && x.dim() > 0, "split: expected a tensor with dims, got ", x.defined() ? x.str() : "undefined");
  dim = WrapDim(dim, x.dim(), "split");
  const int64_t total = x.shape()[dim];
  int64_t sum = 0;
  for (int64_t size : sizes) {
    FUSEBOX_ENSURE(size >= 0, "split: split_sizes must be non-negative, got [", absl::StrJoin(sizes, ", "), "] for ",
                   x.str());
    sum = size > total - sum ? total + 1 : sum + size;  // saturates: no overflow past total
  }
  FUSEBOX_ENSURE(sum == total, "split: split_sizes [", absl::StrJoin(sizes, ", "), "] must sum exactly to ", total,
                 " (the size of dim ", dim, " of ", x.str(), ")");
  return Pieces(x, dim, sizes);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t n, int64_t dim) {
  FUSEBOX_ENSURE(x.defined() && x.dim() > 0, "chunk: expected a tensor with dims, got ", x.defined() ? x.str() : "undefined");
  FUSEBOX_ENSURE(n > 0, "chunk: the number of chunks must be positive, got ", n);
  dim = WrapDim(dim, x.dim(), "chunk");
  const int64_t total = x.shape()[dim];
  if (total == 0) return EvenPieces(x, 0, dim, n);  // n empty pieces, as PyTorch
  const int64_t size = (total + n - 1) / n;
  return EvenPieces(x, size, dim, (total + size - 1) / size);
}

}  // namespace fusebox
