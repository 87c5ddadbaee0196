// The op table's view rows: sizes that depend on the operand (a narrow's
// length, a reshape's merged dims) are computed from it at trace time, so a
// program stays valid when a dynamic call changes the sizes.
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/fuzz/op_table.h"

namespace fusebox::fuzz {
namespace {


Shape ToShape(const Dims& d) { return Shape(d.begin(), d.end()); }

// The reshape target of "merge dims d, d+1" (flag false) or "split dim d into
// 2 x size/2" (flag true) of a tensor of `shape`, or nullopt where that fails.
bool ReshapeTarget(const Dims& shape, const Step& s, Dims* out) {
  const int64_t d = s.ints[0];
  const int64_t rank = static_cast<int64_t>(shape.size());
  *out = shape;
  if (!s.flag) {
    if (d < 0 || d + 1 >= rank) return false;
    (*out)[d] = shape[d] * shape[d + 1];
    out->erase(out->begin() + d + 1);
    return true;
  }
  // An odd size splits only in an empty tensor, where any shape of 0 elements is a reshape (PyTorch).
  if (d < 0 || d >= rank || (shape[d] % 2 != 0 && Numel(shape) != 0)) return false;
  (*out)[d] = shape[d] / 2;
  out->insert(out->begin() + d, 2);
  return true;
}

std::string Sizes(const std::string& n, int64_t rank, const Step& s) {
  std::vector<std::string> parts;
  const int64_t d = s.ints[0];
  for (int64_t i = 0; i < rank; ++i) {
    const std::string size = absl::StrCat(n, ".size(", i, ")");
    if (!s.flag && i == d) {
      parts.push_back(absl::StrCat(size, " * ", n, ".size(", i + 1, ")"));
      ++i;
    } else if (s.flag && i == d) {
      parts.push_back("2");
      parts.push_back(absl::StrCat(size, " / 2"));
    } else {
      parts.push_back(size);
    }
  }
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

Dims FbShape(const Tensor& t) { return Dims(t.shape().begin(), t.shape().end()); }

// cat({x, x}, dim): a copy (each element's bound kept), computed here from
// x's elements, independently of fusebox.
RefArray CatSelf(const RefArray& x, int64_t dim) {
  if (x.rank() == 0) throw RefError("cat of a 0-d tensor");
  // PyTorch skips 1-D empty tensors in a cat before it reads the dim: all
  // skipped, the result is empty at any dim.
  if (x.rank() == 1 && x.numel() == 0) return x;
  dim = Wrap(dim, x.rank());
  Dims shape = x.shape;
  shape[dim] *= 2;
  if (Numel(shape) > kMaxRefNumel) throw TooBig("cat");
  RefArray y = MakeArray(shape, x.dtype);
  const Dims out_strides = ContiguousStrides(shape), in_strides = ContiguousStrides(x.shape);
  for (int64_t f = 0; f < y.numel(); ++f) {
    int64_t rest = f, source = 0;
    for (int64_t d = 0; d < y.rank(); ++d) {
      int64_t at = rest / out_strides[d];
      rest %= out_strides[d];
      if (d == dim) at %= x.shape[d];
      source += at * in_strides[d];
    }
    (*y.val)[f] = x.v(source);
    (*y.err)[f] = x.e(source);
  }
  return y;
}

// chunk(x, n, dim)[0] and split(x, size, dim).back(), as PyTorch sizes them.
RefArray FirstChunk(const RefArray& x, int64_t dim, int64_t n) {
  if (x.rank() == 0) throw RefError("chunk of a 0-d tensor");
  if (n <= 0) throw RefError("chunk: n <= 0");
  const int64_t d = Wrap(dim, x.rank()), total = x.shape[d];
  return Narrow(x, d, 0, total == 0 ? 0 : (total + n - 1) / n);
}
RefArray LastSplit(const RefArray& x, int64_t dim, int64_t size) {
  if (x.rank() == 0) throw RefError("split of a 0-d tensor");
  const int64_t d = Wrap(dim, x.rank()), total = x.shape[d];
  // A size of 0 splits only an empty dim (into one piece), as PyTorch.
  if (size < 0 || (size == 0 && total != 0)) throw RefError("split: size <= 0");
  const int64_t count = size == 0 ? 1 : std::max<int64_t>((total + size - 1) / size, 1), start = (count - 1) * size;
  return Narrow(x, d, start, total - start);
}

// x's elements where `index` (int64, an argmax's reference) says along `dim`:
// gather (index of x's rank) or index_select (index 1-D). An index the
// reference cannot pin down (a near tie, +inf bound) leaves its value unchecked.
RefArray Indexed(const RefArray& x, int64_t dim, const RefArray& index, bool select) {
  Dims shape = select ? x.shape : index.shape;
  if (select) shape[dim] = index.numel();
  if (Numel(shape) > kMaxRefNumel) throw TooBig("index");
  RefArray y = MakeArray(shape, x.dtype);
  const Dims out_strides = ContiguousStrides(shape), in_strides = ContiguousStrides(x.shape);
  for (int64_t f = 0; f < y.numel(); ++f) {
    int64_t rest = f, source = 0, k = f;
    for (int64_t d = 0; d < y.rank(); ++d) {
      int64_t at = rest / out_strides[d];
      rest %= out_strides[d];
      if (d == dim) {
        if (select) k = at;
        at = static_cast<int64_t>(index.v(k));
      }
      source += at * in_strides[d];
    }
    (*y.val)[f] = x.v(source);
    (*y.err)[f] = index.e(k) != 0 ? std::numeric_limits<double>::infinity() : x.e(source);
  }
  return y;
}

// A 0-d x counts as 1-D of one element (PyTorch): dim -1 or 0, its argmax
// is 0, and the result is x, 0-d.
RefArray ZeroDimIndexed(const RefArray& x, int64_t dim) {
  if (dim != 0 && dim != -1) throw RefError("dim out of range for a 0-d tensor");
  return Contiguous(x);
}

RefArray ArgmaxRef(const RefArray& x, int64_t dim, bool keepdim) {
  Step s;
  s.op = OpIndex("argmax");
  s.ints = {dim};
  s.flag = keepdim;
  return OpTable()[s.op].ref({x}, s);
}

}  // namespace

std::vector<OpDef> ViewOps() {
  return {
      {"transpose", Category::kView, [](const Refs& a, const Step& s) { return Transpose(a[0], s.ints[0], s.ints[1]); },
       [](const Tensors& t, const Step& s) { return t[0].transpose(s.ints[0], s.ints[1]); },
       [](const Names& n, const Ranks&, const Step& s) {
         return absl::StrCat(n[0], ".transpose(", s.ints[0], ", ", s.ints[1], ")");
       }},
      {"permute", Category::kView, [](const Refs& a, const Step& s) { return Permute(a[0], s.ints); },
       [](const Tensors& t, const Step& s) { return t[0].permute(std::vector<int64_t>(s.ints.begin(), s.ints.end())); },
       [](const Names& n, const Ranks&, const Step& s) {
         return absl::StrCat(n[0], ".permute({", absl::StrJoin(s.ints, ", "), "})");
       }},
      // narrow(dim, start, size - start - trim): ints = {dim, start, trim}.
      {"narrow", Category::kView,
       [](const Refs& a, const Step& s) {
         if (a[0].rank() == 0) throw RefError("narrow of a 0-d tensor");
         const int64_t d = Wrap(s.ints[0], a[0].rank());
         return Narrow(a[0], d, s.ints[1], a[0].shape[d] - s.ints[1] - s.ints[2]);
       },
       [](const Tensors& t, const Step& s) {
         return t[0].narrow(s.ints[0], s.ints[1], t[0].size(s.ints[0]) - s.ints[1] - s.ints[2]);
       },
       [](const Names& n, const Ranks&, const Step& s) {
         return absl::StrCat(n[0], ".narrow(", s.ints[0], ", ", s.ints[1], ", ", n[0], ".size(", s.ints[0], ") - ",
                             s.ints[1] + s.ints[2], ")");
       }},
      // slice(dim, start, end): PyTorch clamps start and end to the size.
      {"slice", Category::kView,
       [](const Refs& a, const Step& s) {
         if (a[0].rank() == 0) throw RefError("slice of a 0-d tensor");
         const int64_t d = Wrap(s.ints[0], a[0].rank());
         const int64_t size = a[0].shape[d];
         int64_t start = s.ints[1] < 0 ? s.ints[1] + size : s.ints[1];
         int64_t end = s.ints[2] < 0 ? s.ints[2] + size : s.ints[2];
         start = std::clamp<int64_t>(start, 0, size);
         end = std::clamp<int64_t>(end, start, size);
         return Narrow(a[0], d, start, end - start);
       },
       [](const Tensors& t, const Step& s) { return t[0].slice(s.ints[0], s.ints[1], s.ints[2]); },
       [](const Names& n, const Ranks&, const Step& s) {
         return absl::StrCat(n[0], ".slice(", s.ints[0], ", ", s.ints[1], ", ", s.ints[2], ")");
       }},
      {"reshape", Category::kView,
       [](const Refs& a, const Step& s) {
         Dims target;
         if (!ReshapeTarget(a[0].shape, s, &target)) throw RefError("reshape: no such merge/split");
         return Reshape(a[0], target);
       },
       [](const Tensors& t, const Step& s) {
         // What the repro spells: an odd split asks for 2 x size/2, which fusebox must reject.
         Dims target = FbShape(t[0]);
         const int64_t d = s.ints[0];
         if (d < 0 || d + (s.flag ? 0 : 1) >= t[0].dim()) return t[0].reshape({t[0].numel() + 1});
         if (s.flag) {
           target[d] /= 2;
           target.insert(target.begin() + d, 2);
         } else {
           ReshapeTarget(FbShape(t[0]), s, &target);
         }
         return t[0].reshape(ToShape(target));
       },
       [](const Names& n, const Ranks& r, const Step& s) {
         return absl::StrCat(n[0], ".reshape(", Sizes(n[0], r[0], s), ")");
       }},
      {"expand", Category::kView, [](const Refs& a, const Step&) { return Expand(a[0], a[1].shape); },
       [](const Tensors& t, const Step&) { return t[0].expand(t[1].shape()); },
       [](const Names& n, const Ranks&, const Step&) { return absl::StrCat(n[0], ".expand(", n[1], ".shape())"); }},
      {"unsqueeze", Category::kView, [](const Refs& a, const Step& s) { return Unsqueeze(a[0], s.ints[0]); },
       [](const Tensors& t, const Step& s) { return t[0].unsqueeze(s.ints[0]); },
       [](const Names& n, const Ranks&, const Step& s) { return absl::StrCat(n[0], ".unsqueeze(", s.ints[0], ")"); }},
      {"squeeze", Category::kView, [](const Refs& a, const Step& s) { return Squeeze(a[0], s.ints[0]); },
       [](const Tensors& t, const Step& s) { return t[0].squeeze(s.ints[0]); },
       [](const Names& n, const Ranks&, const Step& s) { return absl::StrCat(n[0], ".squeeze(", s.ints[0], ")"); }},
      {"flatten", Category::kView, [](const Refs& a, const Step&) { return Reshape(a[0], {a[0].numel()}); },
       [](const Tensors& t, const Step&) { return t[0].flatten(); },
       [](const Names& n, const Ranks&, const Step&) { return absl::StrCat(n[0], ".flatten()"); }},
      // Data movement (GenOptions::data_movement): ints = {dim} or {dim, n}.
      {"cat_self", Category::kView, [](const Refs& a, const Step& s) { return CatSelf(a[0], s.ints[0]); },
       [](const Tensors& t, const Step& s) { return cat({t[0], t[0]}, s.ints[0]); },
       [](const Names& n, const Ranks&, const Step& s) {
         return absl::StrCat("cat({", n[0], ", ", n[0], "}, ", s.ints[0], ")");
       }},
      {"stack_self", Category::kView,
       [](const Refs& a, const Step& s) {
         const RefArray u = Unsqueeze(a[0], s.ints[0]);
         return CatSelf(u, Wrap(s.ints[0], u.rank()));
       },
       [](const Tensors& t, const Step& s) { return stack({t[0], t[0]}, s.ints[0]); },
       [](const Names& n, const Ranks&, const Step& s) {
         return absl::StrCat("stack({", n[0], ", ", n[0], "}, ", s.ints[0], ")");
       }},
      {"chunk_first", Category::kView, [](const Refs& a, const Step& s) { return FirstChunk(a[0], s.ints[0], s.ints[1]); },
       [](const Tensors& t, const Step& s) { return chunk(t[0], s.ints[1], s.ints[0]).front(); },
       [](const Names& n, const Ranks&, const Step& s) {
         return absl::StrCat("chunk(", n[0], ", ", s.ints[1], ", ", s.ints[0], ").front()");
       }},
      {"split_last", Category::kView, [](const Refs& a, const Step& s) { return LastSplit(a[0], s.ints[0], s.ints[1]); },
       [](const Tensors& t, const Step& s) { return split(t[0], s.ints[1], s.ints[0]).back(); },
       [](const Names& n, const Ranks&, const Step& s) {
         return absl::StrCat("split(", n[0], ", ", s.ints[1], ", ", s.ints[0], ").back()");
       }},
      // Indirect loads whose index is a stored reduction: the value at each
      // row's argmax (gather), and x's slices at them (index_select).
      {"gather_argmax", Category::kView,
       [](const Refs& a, const Step& s) {
         if (a[0].rank() == 0) return ZeroDimIndexed(a[0], s.ints[0]);
         const int64_t d = Wrap(s.ints[0], a[0].rank());
         return Indexed(a[0], d, ArgmaxRef(a[0], d, true), false);
       },
       [](const Tensors& t, const Step& s) { return gather(t[0], s.ints[0], argmax(t[0], s.ints[0], true)); },
       [](const Names& n, const Ranks&, const Step& s) {
         return absl::StrCat("gather(", n[0], ", ", s.ints[0], ", argmax(", n[0], ", ", s.ints[0], ", true))");
       }},
      {"index_select_argmax", Category::kView,
       [](const Refs& a, const Step& s) {
         if (a[0].rank() == 0) return ZeroDimIndexed(a[0], s.ints[0]);
         const int64_t d = Wrap(s.ints[0], a[0].rank());
         const RefArray index = ArgmaxRef(a[0], d, false);
         return Indexed(a[0], d, Reshape(index, {index.numel()}), true);
       },
       [](const Tensors& t, const Step& s) { return index_select(t[0], s.ints[0], argmax(t[0], s.ints[0]).flatten()); },
       [](const Names& n, const Ranks&, const Step& s) {
         return absl::StrCat("index_select(", n[0], ", ", s.ints[0], ", argmax(", n[0], ", ", s.ints[0], ").flatten())");
       }},
      {"contiguous", Category::kView, [](const Refs& a, const Step&) { return Contiguous(a[0]); },
       [](const Tensors& t, const Step&) { return t[0].contiguous(); },
       [](const Names& n, const Ranks&, const Step&) { return absl::StrCat(n[0], ".contiguous()"); }},
  };
}

}  // namespace fusebox::fuzz
