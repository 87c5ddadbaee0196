#include "tests/fuzz/ref_array.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fusebox::fuzz {

int64_t Numel(const Dims& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t RefArray::numel() const { return fuzz::Numel(shape); }

int64_t RefArray::At(int64_t flat) const {
  int64_t pos = offset;
  for (int64_t d = rank() - 1; d >= 0; --d) {
    pos += (flat % shape[d]) * strides[d];
    flat /= shape[d];
  }
  return pos;
}

Dims ContiguousStrides(const Dims& shape) {
  Dims s(shape.size());
  int64_t run = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    s[d] = run;
    run *= std::max<int64_t>(shape[d], 1);
  }
  return s;
}

RefArray MakeArray(const Dims& shape, DType dtype) {
  RefArray a;
  a.shape = shape;
  a.strides = ContiguousStrides(shape);
  a.dtype = dtype;
  a.val = std::make_shared<std::vector<double>>(Numel(shape), 0.0);
  a.err = std::make_shared<std::vector<double>>(Numel(shape), 0.0);
  return a;
}

std::string DimsStr(const Dims& d) { return absl::StrCat("{", absl::StrJoin(d, ", "), "}"); }

int64_t Wrap(int64_t dim, int64_t rank) {
  const int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r) throw RefError(absl::StrCat("dim ", dim, " out of range for rank ", rank));
  return dim < 0 ? dim + r : dim;
}

double Roundoff(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return std::ldexp(1.0, -11);
    case DType::kBFloat16: return std::ldexp(1.0, -8);
    case DType::kFloat32: return std::ldexp(1.0, -24);
    default: return 0;
  }
}

double RoundTo(double v, DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return HalfToFloat(FloatToHalf(static_cast<float>(v)));
    case DType::kBFloat16: return BFloat16ToFloat(FloatToBFloat16(static_cast<float>(v)));
    case DType::kFloat32: return static_cast<float>(v);
    case DType::kBool: return v != 0 ? 1 : 0;
    default: return std::trunc(v);
  }
}

double MaxFinite(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return 65504;
    case DType::kBFloat16:
    case DType::kFloat32: return 3.4e38;
    default: return 9.2e18;
  }
}

Dims BroadcastShapes(const Dims& a, const Dims& b) {
  const size_t n = std::max(a.size(), b.size());
  Dims out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1) throw RefError(absl::StrCat("cannot broadcast ", DimsStr(a), " and ", DimsStr(b)));
    out[i] = x == 1 ? y : x;
  }
  return out;
}

RefArray Transpose(const RefArray& x, int64_t d0, int64_t d1) {
  d0 = Wrap(d0, x.rank());
  d1 = Wrap(d1, x.rank());
  RefArray y = x;
  if (x.rank() == 0) return y;
  std::swap(y.shape[d0], y.shape[d1]);
  std::swap(y.strides[d0], y.strides[d1]);
  return y;
}

RefArray Permute(const RefArray& x, const Dims& perm) {
  if (static_cast<int64_t>(perm.size()) != x.rank()) throw RefError("permute: wrong number of dims");
  RefArray y = x;
  std::vector<bool> seen(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    const int64_t d = Wrap(perm[i], x.rank());
    if (seen[d]) throw RefError("permute: repeated dim");
    seen[d] = true;
    y.shape[i] = x.shape[d];
    y.strides[i] = x.strides[d];
  }
  return y;
}

RefArray Narrow(const RefArray& x, int64_t dim, int64_t start, int64_t length) {
  if (x.rank() == 0) throw RefError("narrow of a 0-d tensor");
  dim = Wrap(dim, x.rank());
  if (start < 0 || length < 0 || start + length > x.shape[dim]) throw RefError("narrow out of range");
  RefArray y = x;
  y.shape[dim] = length;
  y.offset += start * x.strides[dim];
  return y;
}

RefArray Expand(const RefArray& x, const Dims& shape) {
  if (shape.size() < x.shape.size()) throw RefError("expand to fewer dims");
  RefArray y = x;
  const size_t lead = shape.size() - x.shape.size();
  y.shape = shape;
  y.strides.assign(shape.size(), 0);
  for (size_t i = lead; i < shape.size(); ++i) {
    const int64_t have = x.shape[i - lead];
    if (have != shape[i] && have != 1) throw RefError("expand: size mismatch");
    y.strides[i] = have == shape[i] ? x.strides[i - lead] : 0;
  }
  return y;
}

RefArray Unsqueeze(const RefArray& x, int64_t dim) {
  dim = Wrap(dim, x.rank() + 1);
  RefArray y = x;
  y.shape.insert(y.shape.begin() + dim, 1);
  y.strides.insert(y.strides.begin() + dim, 1);
  return y;
}

RefArray Squeeze(const RefArray& x, int64_t dim) {
  dim = Wrap(dim, x.rank());
  if (x.rank() == 0 || x.shape[dim] != 1) return x;
  RefArray y = x;
  y.shape.erase(y.shape.begin() + dim);
  y.strides.erase(y.strides.begin() + dim);
  return y;
}

RefArray Contiguous(const RefArray& x) {
  RefArray y = MakeArray(x.shape, x.dtype);
  for (int64_t i = 0; i < y.numel(); ++i) {
    (*y.val)[i] = x.v(i);
    (*y.err)[i] = x.e(i);
  }
  return y;
}

RefArray Reshape(const RefArray& x, const Dims& shape) {
  for (int64_t s : shape) {
    if (s < 0) throw RefError("reshape: negative size");
  }
  if (Numel(shape) != x.numel()) throw RefError("reshape: numel mismatch");
  RefArray y = Contiguous(x);
  y.shape = shape;
  y.strides = ContiguousStrides(shape);
  return y;
}

}  // namespace fusebox::fuzz
