#include "tests/fuzz/ref_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace fusebox::fuzz {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

// Smallest normal (float32, bfloat16: flush-to-zero) or subnormal spacing
// (float16) of the dtype: an absolute floor under every bound.
double Floor(DType d) { return d == DType::kFloat16 ? 6e-8 : 1.2e-38; }
}  // namespace

void RequireFloat(const RefArray& x, const char* op) {
  if (!IsFloating(x.dtype)) throw RefError(absl::StrCat(op, ": needs a floating tensor"));
}

void Finish(RefArray* out) {
  if (!IsFloating(out->dtype)) return;
  const double u = Roundoff(out->dtype) + 8 * kU32;
  for (size_t i = 0; i < out->val->size(); ++i) {
    const double v = (*out->val)[i];
    double& e = (*out->err)[i];
    if (std::isnan(v) || std::isinf(v)) continue;
    // Near the dtype's largest value the result may round or overflow to inf
    // within its bound: the float64 row cannot bound that.
    if (std::fabs(v) > MaxFinite(out->dtype) / 2 || std::isnan(e) || std::fabs(v) + 2 * e > MaxFinite(out->dtype)) {
      e = kInf;
    } else {
      e += u * std::fabs(v) + Floor(out->dtype);
    }
  }
}

RefArray Map(const std::vector<const RefArray*>& xs, DType out, const std::function<VE(const VE*)>& f,
             std::optional<DType> compute) {
  const DType common = compute.value_or(out);
  Dims shape;
  for (const RefArray* x : xs) shape = BroadcastShapes(shape, x->shape);
  if (Numel(shape) > kMaxRefNumel) throw TooBig("broadcast result too large");
  std::vector<RefArray> ex;
  for (const RefArray* x : xs) ex.push_back(Expand(*x, shape));
  RefArray y = MakeArray(shape, out);
  std::vector<VE> args(xs.size());
  // Operands of another float dtype are converted to the result's first, as
  // PyTorch converts them to the common dtype (a 0-d f32 operand of a bf16
  // op is rounded to bf16): the exact rounding, plus one more where the
  // operand's own value is uncertain.
  std::vector<bool> converts(xs.size());
  for (size_t k = 0; k < xs.size(); ++k) {
    converts[k] = IsFloating(common) && IsFloating(xs[k]->dtype) && xs[k]->dtype != common;
  }
  for (int64_t i = 0; i < y.numel(); ++i) {
    for (size_t k = 0; k < ex.size(); ++k) {
      args[k] = {ex[k].v(i), ex[k].e(i)};
      if (!converts[k] || std::isnan(args[k].v) || std::isinf(args[k].v)) continue;
      const double rounded = RoundTo(args[k].v, common);
      if (args[k].e > 0) args[k].e += Roundoff(common) * std::fabs(args[k].v);
      args[k].v = rounded;
    }
    const VE r = f(args.data());
    (*y.val)[i] = r.v;
    (*y.err)[i] = r.e;
  }
  Finish(&y);
  return y;
}

VE Interval(const std::function<double(double)>& f, VE x, double lipschitz) {
  const double y = f(x.v);
  // A NaN that may be any value (an unbounded operand: pow of a negative
  // base at an inexact exponent) stays unbounded.
  if (std::isnan(x.v)) return {y, std::isinf(x.e) ? kInf : 0};
  if (std::isinf(x.e)) return {y, kInf};
  if (x.e == 0) return {y, 0};
  const double lo = f(x.v - x.e), hi = f(x.v + x.e);
  if (std::isnan(y)) return {y, std::isnan(lo) && std::isnan(hi) ? 0 : kInf};
  if (std::isnan(lo) || std::isnan(hi)) return {y, kInf};
  if (std::isinf(y)) return {y, (lo == y && hi == y) ? 0 : kInf};
  double d = std::max(std::fabs(lo - y), std::fabs(hi - y));
  if (lipschitz > 0) d = std::max(d, lipschitz * x.e);
  return {y, d};
}

namespace {
// |x| * e, where an exact operand (e == 0) contributes nothing even if infinite.
double Term(double x, double e) { return e == 0 ? 0 : std::fabs(x) * e; }
VE Clean(double v, double e, VE a, VE b) {
  if (std::isinf(a.e) || std::isinf(b.e)) return {v, kInf};
  if (std::isnan(v) && !std::isnan(a.v) && !std::isnan(b.v) && (a.e > 0 || b.e > 0)) return {v, kInf};
  if (std::isnan(v)) return {v, 0};
  return {v, std::isnan(e) ? kInf : e};
}
}  // namespace

VE Add(VE a, VE b) { return Clean(a.v + b.v, a.e + b.e, a, b); }
VE Mul(VE a, VE b) { return Clean(a.v * b.v, Term(b.v, a.e) + Term(a.v, b.e) + a.e * b.e, a, b); }
VE Div(VE a, VE b) {
  const double v = a.v / b.v;
  if (b.e == 0) return Clean(v, b.v == 0 ? (a.e == 0 ? 0 : kInf) : a.e / std::fabs(b.v), a, b);
  if (std::fabs(b.v) <= b.e) return {v, kInf};
  return Clean(v, (a.e + Term(v, b.e)) / (std::fabs(b.v) - b.e), a, b);
}

RefArray Reduce(const RefArray& x, Dims dims, bool keepdim, DType out,
                const std::function<VE(const std::vector<VE>&)>& f) {
  std::vector<bool> reduced(std::max<int64_t>(x.rank(), 1), false);
  for (int64_t& d : dims) {
    d = Wrap(d, x.rank());
    if (reduced[d]) throw RefError(absl::StrCat("dim ", d, " appears multiple times"));
    reduced[d] = true;
  }
  if (dims.empty()) reduced.assign(reduced.size(), true);
  Dims out_shape, kept, red;
  for (int64_t d = 0; d < x.rank(); ++d) {
    (reduced[d] ? red : kept).push_back(d);
    if (!reduced[d]) {
      out_shape.push_back(x.shape[d]);
    } else if (keepdim) {
      out_shape.push_back(1);
    }
  }
  RefArray y = MakeArray(out_shape, out);
  int64_t n_out = 1, n_row = 1;
  for (int64_t d : kept) n_out *= x.shape[d];
  for (int64_t d : red) n_row *= x.shape[d];
  std::vector<VE> row(n_row);
  for (int64_t o = 0; o < n_out; ++o) {
    int64_t base = x.offset, rest = o;
    for (int64_t k = static_cast<int64_t>(kept.size()) - 1; k >= 0; --k) {
      base += (rest % x.shape[kept[k]]) * x.strides[kept[k]];
      rest /= x.shape[kept[k]];
    }
    for (int64_t j = 0; j < n_row; ++j) {
      int64_t pos = base, r = j;
      for (int64_t k = static_cast<int64_t>(red.size()) - 1; k >= 0; --k) {
        pos += (r % x.shape[red[k]]) * x.strides[red[k]];
        r /= x.shape[red[k]];
      }
      row[j] = {(*x.val)[pos], (*x.err)[pos]};
    }
    const VE r = f(row);
    (*y.val)[o] = r.v;
    (*y.err)[o] = r.e;
  }
  Finish(&y);
  return y;
}

RefArray RowMap(const RefArray& x, int64_t dim, DType out,
                const std::function<void(const std::vector<VE>&, std::vector<VE>*)>& f) {
  dim = Wrap(dim, x.rank());
  const RefArray t = Contiguous(x.rank() == 0 ? x : Transpose(x, dim, -1));
  RefArray y = MakeArray(t.shape, out);
  const int64_t n = t.rank() == 0 ? 1 : t.shape.back();
  const int64_t rows = n == 0 ? 0 : t.numel() / n;
  std::vector<VE> row(n), res(n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) row[j] = {(*t.val)[r * n + j], (*t.err)[r * n + j]};
    f(row, &res);
    for (int64_t j = 0; j < n; ++j) {
      (*y.val)[r * n + j] = res[j].v;
      (*y.err)[r * n + j] = res[j].e;
    }
  }
  Finish(&y);
  return Contiguous(x.rank() == 0 ? y : Transpose(y, dim, -1));
}

}  // namespace fusebox::fuzz
