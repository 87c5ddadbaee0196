// The op table's reduction, normalization and matmul rows, with error bounds
// that follow each op's conditioning (softmax's exp(e_i + max e) - 1, a norm's
// division by the row's spread), so ill-conditioned rows are judged fairly.
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/fuzz/op_table.h"
#include "tests/fuzz/ref_ops.h"

namespace fusebox::fuzz {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using Row = std::vector<VE>;

std::vector<int64_t> Vec(const Dims& d) { return std::vector<int64_t>(d.begin(), d.end()); }
std::string List(const Dims& d) { return absl::StrCat("{", absl::StrJoin(d, ", "), "}"); }
const char* Bool(bool b) { return b ? "true" : "false"; }

double MaxErr(const Row& r) {
  double e = 0;
  for (const VE& x : r) e = std::max(e, x.e);
  return e;
}
bool AnyNan(const Row& r) {
  return std::any_of(r.begin(), r.end(), [](const VE& x) { return std::isnan(x.v); });
}
// max/min/argmax over an empty row fail in PyTorch, also where no output element exists.
void RequireNonEmpty(const RefArray& x, const Dims& dims, const char* op) {
  if (dims.empty() && x.numel() == 0) throw RefError(absl::StrCat(op, " of an empty tensor"));
  for (int64_t d : dims) {
    if (x.rank() > 0 && x.shape[Wrap(d, x.rank())] == 0) throw RefError(absl::StrCat(op, " over a zero-size dim"));
  }
}

VE SumRow(const Row& r) {
  double v = 0, e = 0, mag = 0;
  for (const VE& x : r) v += x.v, e += x.e, mag += std::fabs(x.v);
  return {v, e + (r.size() + 2) * kU32 * mag};
}
VE MeanRow(const Row& r) {
  const VE s = SumRow(r);
  const double n = static_cast<double>(r.size());
  return {s.v / n, r.empty() ? 0 : s.e / n};
}
VE ProdRow(const Row& r) {
  double v = 1, e = 0;
  // Partial products leave float32's range in another order than here (the
  // CPU cascades, CUDA splits): past it, inf * 0 may be NaN. Unchecked then.
  double span = 1;  // bounds |every partial product|, in any order
  for (const VE& x : r) {
    v *= x.v;
    span *= std::max(1.0, std::fabs(x.v));
  }
  if (span > 0.5 * MaxFinite(DType::kFloat32)) return {v, kInf};
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i].e == 0) continue;
    double others = 1;
    for (size_t j = 0; j < r.size(); ++j) others *= j == i ? 1 : std::fabs(r[j].v) + r[j].e;
    e += r[i].e * others;
  }
  return {v, e + (r.size() + 2) * kU32 * std::fabs(v)};
}
VE ExtremeRow(const Row& r, bool is_max) {
  if (AnyNan(r)) return {NAN, std::isinf(MaxErr(r)) ? kInf : 0};
  double v = is_max ? -kInf : kInf;
  for (const VE& x : r) v = is_max ? std::max(v, x.v) : std::min(v, x.v);
  return {v, MaxErr(r)};
}
// Index of the first max (min); NaN counts as the max. Unchecked (+inf) when a
// rival is within the error bounds.
VE ArgRow(const Row& r, bool is_max) {
  int64_t best = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    if (std::isnan(r[i].v)) {
      best = static_cast<int64_t>(i);
      break;
    }
    if (is_max ? r[i].v > r[best].v : r[i].v < r[best].v) best = static_cast<int64_t>(i);
  }
  const double e_max = MaxErr(r);
  if (std::isinf(e_max)) return {static_cast<double>(best), kInf};
  if (e_max == 0 || std::isnan(r[best].v)) return {static_cast<double>(best), 0};
  for (size_t i = 0; i < r.size(); ++i) {
    if (static_cast<int64_t>(i) != best && std::fabs(r[i].v - r[best].v) <= r[i].e + r[best].e) {
      return {static_cast<double>(best), kInf};
    }
  }
  return {static_cast<double>(best), 0};
}
VE VarRow(const Row& r, double correction) {
  const double n = static_cast<double>(r.size());
  const VE m = MeanRow(r);
  double ss = 0, de = 0, vmax = 0;
  for (const VE& x : r) vmax = std::max(vmax, std::fabs(x.v));
  for (const VE& x : r) {
    const double d = x.v - m.v;
    ss += d * d;
    de += 2 * std::fabs(d) * (x.e + m.e + 4 * kU32 * (std::fabs(x.v) + vmax)) + x.e * x.e;
  }
  const double div = std::max(0.0, n - correction);
  const double v = ss / div;
  if (std::isnan(v) || std::isinf(v)) return {v, std::isinf(MaxErr(r)) ? kInf : 0};
  return {v, (de + (n + 4) * kU32 * ss) / div};
}
void SoftmaxRow(const Row& r, Row* out, bool log) {
  const size_t n = r.size();
  const double E = MaxErr(r);
  if (AnyNan(r)) {
    out->assign(n, {NAN, std::isinf(E) ? kInf : 0});
    return;
  }
  double M = -kInf, S = 0;
  for (const VE& x : r) M = std::max(M, x.v);
  for (const VE& x : r) S += std::exp(x.v - M);
  const double logS = std::log(S);
  for (size_t i = 0; i < n; ++i) {
    if (log) {
      const double l = r[i].v - M - logS;
      const double e = std::isinf(l) && r[i].e == 0 && E == 0 ? 0
                       : r[i].e + E + 4 * kU32 * (std::fabs(r[i].v) + std::fabs(M) + std::fabs(logS)) + n * kU32;
      (*out)[i] = {l, e};
    } else {
      const double s = std::exp(r[i].v - M) / S;
      (*out)[i] = {s, s * std::expm1(r[i].e + E) + (n + 8) * kU32 * s};
    }
  }
}
VE LogSumExpRow(const Row& r) {
  const double E = MaxErr(r);
  if (AnyNan(r)) return {NAN, std::isinf(E) ? kInf : 0};
  double M = -kInf, S = 0;
  for (const VE& x : r) M = std::max(M, x.v);
  if (std::isinf(M)) return {M, E};
  for (const VE& x : r) S += std::exp(x.v - M);
  const double logS = std::log(S);
  return {M + logS, E + 4 * kU32 * (std::fabs(M) + std::fabs(logS)) + r.size() * kU32};
}

// Rows over the trailing `k` dims of x, with weight / bias checked against them.
struct NormRows {
  RefArray x, w, b;
  int64_t n = 0, rows = 0;
};
NormRows Rows(const Refs& a, int64_t k, const char* op) {
  const RefArray& x = a[0];
  RequireFloat(x, op);
  if (k < 1 || k > x.rank()) throw RefError(absl::StrCat(op, ": normalized_shape longer than the input"));
  const Dims norm(x.shape.end() - k, x.shape.end());
  for (size_t i = 1; i < a.size(); ++i) {
    if (a[i].val && a[i].shape != norm) throw RefError(absl::StrCat(op, ": weight/bias shape is not normalized_shape"));
  }
  NormRows r;
  r.x = Contiguous(x);
  r.n = Numel(norm);
  r.rows = r.n == 0 ? 0 : x.numel() / r.n;
  if (a.size() > 1 && a[1].val) r.w = Contiguous(a[1]);
  if (a.size() > 2 && a[2].val) r.b = Contiguous(a[2]);
  return r;
}
VE Affine(VE z, const NormRows& r, int64_t j) {
  VE y = z;
  if (r.w.val) y = Mul(y, {(*r.w.val)[j], (*r.w.err)[j]});
  if (r.b.val) y = Add(y, {(*r.b.val)[j], (*r.b.err)[j]});
  return y;
}

RefArray LayerNorm(const Refs& a, const Step& s, bool rms) {
  NormRows r = Rows(a, s.ints[0], rms ? "rms_norm" : "layer_norm");
  const DType dt = r.x.dtype;
  const double eps = rms && s.scalar == 0 ? (dt == DType::kFloat32 ? std::ldexp(1.0, -23)
                                             : dt == DType::kBFloat16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -10))
                                          : s.scalar;
  RefArray y = MakeArray(a[0].shape, dt);
  const double n = static_cast<double>(r.n);
  for (int64_t row = 0; row < r.rows; ++row) {
    Row x(r.n);
    for (int64_t j = 0; j < r.n; ++j) x[j] = {(*r.x.val)[row * r.n + j], (*r.x.err)[row * r.n + j]};
    const double E = MaxErr(x);
    double m = 0, ebar = 0, mabs = 0;
    for (const VE& v : x) m += rms ? 0 : v.v, ebar += v.e, mabs += std::fabs(v.v);
    m /= n, ebar /= n, mabs /= n;
    double ss = 0;
    for (const VE& v : x) ss += (v.v - m) * (v.v - m);
    const double sigma = std::sqrt(ss / n + eps);
    double zsum = 0;
    for (const VE& v : x) zsum += std::fabs(v.v - m) / sigma * (v.e + ebar);
    for (int64_t j = 0; j < r.n; ++j) {
      const double z = (x[j].v - m) / sigma;
      double ez = (x[j].e + (rms ? 0 : ebar)) / sigma + std::fabs(z) * zsum / (n * sigma) +
                  (4 * kU32 * (std::fabs(x[j].v) + std::fabs(m)) + n * kU32 * mabs) / sigma + (n + 8) * kU32 * std::fabs(z);
      if (std::isinf(E) || E + ebar > 0.25 * sigma || std::isnan(ez)) ez = kInf;
      // The sum of squares is float32 in fusebox as in PyTorch: past its range
      // it overflows (rsqrt(inf) = 0), a result the float64 row cannot bound.
      if (ss > 0.5 * MaxFinite(DType::kFloat32)) ez = kInf;
      const VE out = Affine({z, ez}, r, j);
      (*y.val)[row * r.n + j] = out.v;
      (*y.err)[row * r.n + j] = out.e;
    }
  }
  Finish(&y);
  return y;
}

RefArray Matmul(const Refs& a) {
  const RefArray &A = a[0], &B = a[1];
  RequireFloat(A, "matmul");
  if (A.dtype != B.dtype) throw RefError("matmul: operands of different dtypes");
  if (A.rank() < 2 || A.rank() > 3 || B.rank() < 2 || B.rank() > 3) throw RefError("matmul: needs 2-D or 3-D operands");
  const int64_t m = A.shape[A.rank() - 2], k = A.shape[A.rank() - 1];
  const int64_t k2 = B.shape[B.rank() - 2], n = B.shape[B.rank() - 1];
  if (k != k2) throw RefError("matmul: inner dims differ");
  const int64_t ba = A.rank() == 3 ? A.shape[0] : 1, bb = B.rank() == 3 ? B.shape[0] : 1;
  if (ba != bb && ba != 1 && bb != 1) throw RefError("matmul: batch dims differ");
  const int64_t batch = ba == 1 ? bb : ba;
  const bool batched = A.rank() == 3 || B.rank() == 3;
  RefArray y = MakeArray(batched ? Dims{batch, m, n} : Dims{m, n}, A.dtype);
  auto at = [](const RefArray& x, int64_t b, int64_t i, int64_t j) {
    int64_t pos = x.offset + i * x.strides[x.rank() - 2] + j * x.strides[x.rank() - 1];
    if (x.rank() == 3 && x.shape[0] != 1) pos += b * x.strides[0];
    return VE{(*x.val)[pos], (*x.err)[pos]};
  };
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        VE acc{0, 0};
        double mag = 0;
        for (int64_t q = 0; q < k; ++q) {
          const VE p = Mul(at(A, b, i, q), at(B, b, q, j));
          acc = Add(acc, p);
          mag += std::fabs(p.v);
        }
        (*y.val)[(b * m + i) * n + j] = acc.v;
        (*y.err)[(b * m + i) * n + j] = acc.e + (k + 2) * kU32 * mag;
      }
    }
  }
  Finish(&y);
  return y;
}

// A reduction with optional dims (ints; empty: all) and keepdim (flag).
OpDef DimsReduce(const char* name, std::function<VE(const Row&)> f, bool needs_rows,
                 std::function<Tensor(const Tensor&, const Step&)> fb, bool single_dim, DType (*out)(DType)) {
  return {name, Category::kReduce,
          [=](const Refs& a, const Step& s) {
            RequireFloat(a[0], name);
            if (needs_rows) RequireNonEmpty(a[0], s.ints, name);
            // Without dims the call is the full form (sum(x), argmax(x)), which keeps no dims.
            const bool full_form = s.ints.empty() && (single_dim || std::string(name) == "sum" || std::string(name) == "mean");
            return Reduce(a[0], s.ints, s.flag && !full_form, out(a[0].dtype), f);
          },
          [=](const Tensors& t, const Step& s) { return fb(t[0], s); },
          [=](const Names& n, const Ranks&, const Step& s) {
            const std::string fn = std::string(name) == "var" ? "var" : name;
            if (single_dim) {
              return s.ints.empty() ? absl::StrCat(fn, "(", n[0], ")")
                                    : absl::StrCat(fn, "(", n[0], ", ", s.ints[0], ", ", Bool(s.flag), ")");
            }
            if (fn == "var") return absl::StrCat("var(", n[0], ", ", List(s.ints), ", ", s.scalar, ", ", Bool(s.flag), ")");
            if (s.ints.empty() && (fn == "sum" || fn == "mean")) return absl::StrCat(fn, "(", n[0], ")");
            return absl::StrCat(fn, "(", n[0], ", std::vector<int64_t>", List(s.ints), ", ", Bool(s.flag), ")");
          }};
}
// The normalized shape: x's trailing k sizes (padded with 1s where k > rank,
// which the op must reject), and its spelling in a repro.
Shape Trailing(const Tensor& x, int64_t k) {
  Shape norm;
  for (int64_t d = std::max<int64_t>(x.dim() - k, 0); d < x.dim(); ++d) norm.push_back(x.size(d));
  while (static_cast<int64_t>(norm.size()) < k) norm.push_back(1);
  return norm;
}
std::string TrailingSizes(const std::string& x, int64_t rank, int64_t k) {
  std::vector<std::string> sizes;
  for (int64_t d = rank - k; d < rank; ++d) sizes.push_back(absl::StrCat(x, ".size(", d, ")"));
  return absl::StrCat("{", absl::StrJoin(sizes, ", "), "}");
}

DType Same(DType d) { return d; }
DType Int64(DType) { return DType::kInt64; }

}  // namespace

std::vector<OpDef> ReductionOps() {
  auto dims = [](const Step& s) { return Vec(s.ints); };
  return {
      DimsReduce("sum", SumRow, false,
                 [=](const Tensor& x, const Step& s) { return s.ints.empty() ? sum(x) : sum(x, dims(s), s.flag); }, false, Same),
      DimsReduce("mean", MeanRow, false,
                 [=](const Tensor& x, const Step& s) { return s.ints.empty() ? mean(x) : mean(x, dims(s), s.flag); }, false, Same),
      DimsReduce("amax", [](const Row& r) { return ExtremeRow(r, true); }, true,
                 [=](const Tensor& x, const Step& s) { return amax(x, dims(s), s.flag); }, false, Same),
      DimsReduce("amin", [](const Row& r) { return ExtremeRow(r, false); }, true,
                 [=](const Tensor& x, const Step& s) { return amin(x, dims(s), s.flag); }, false, Same),
      DimsReduce("prod", ProdRow, false,
                 [](const Tensor& x, const Step& s) { return s.ints.empty() ? prod(x) : prod(x, s.ints[0], s.flag); }, true, Same),
      DimsReduce("max", [](const Row& r) { return ExtremeRow(r, true); }, true,
                 [](const Tensor& x, const Step& s) { return s.ints.empty() ? max(x) : max(x, s.ints[0], s.flag); }, true, Same),
      DimsReduce("min", [](const Row& r) { return ExtremeRow(r, false); }, true,
                 [](const Tensor& x, const Step& s) { return s.ints.empty() ? min(x) : min(x, s.ints[0], s.flag); }, true, Same),
      DimsReduce("argmax", [](const Row& r) { return ArgRow(r, true); }, true,
                 [](const Tensor& x, const Step& s) { return s.ints.empty() ? argmax(x) : argmax(x, s.ints[0], s.flag); }, true, Int64),
      DimsReduce("argmin", [](const Row& r) { return ArgRow(r, false); }, true,
                 [](const Tensor& x, const Step& s) { return s.ints.empty() ? argmin(x) : argmin(x, s.ints[0], s.flag); }, true, Int64),
      {"var", Category::kReduce,
       [](const Refs& a, const Step& s) {
         RequireFloat(a[0], "var");
         const double c = s.scalar;
         return Reduce(a[0], s.ints, s.flag, a[0].dtype, [c](const Row& r) { return VarRow(r, c); });
       },
       [=](const Tensors& t, const Step& s) { return var(t[0], dims(s), s.scalar, s.flag); },
       [](const Names& n, const Ranks&, const Step& s) {
         return absl::StrCat("var(", n[0], ", std::vector<int64_t>", List(s.ints), ", ", s.scalar, ", ", Bool(s.flag), ")");
       }},
      {"logsumexp", Category::kReduce,
       [](const Refs& a, const Step& s) {
         RequireFloat(a[0], "logsumexp");
         return Reduce(a[0], s.ints, s.flag, a[0].dtype, LogSumExpRow);
       },
       [=](const Tensors& t, const Step& s) { return logsumexp(t[0], dims(s), s.flag); },
       [](const Names& n, const Ranks&, const Step& s) {
         return absl::StrCat("logsumexp(", n[0], ", std::vector<int64_t>", List(s.ints), ", ", Bool(s.flag), ")");
       }},
      {"softmax", Category::kReduce,
       [](const Refs& a, const Step& s) {
         RequireFloat(a[0], "softmax");
         return RowMap(a[0], s.ints[0], a[0].dtype, [](const Row& r, Row* o) { SoftmaxRow(r, o, false); });
       },
       [](const Tensors& t, const Step& s) { return softmax(t[0], s.ints[0]); },
       [](const Names& n, const Ranks&, const Step& s) { return absl::StrCat("softmax(", n[0], ", ", s.ints[0], ")"); }},
      {"log_softmax", Category::kReduce,
       [](const Refs& a, const Step& s) {
         RequireFloat(a[0], "log_softmax");
         return RowMap(a[0], s.ints[0], a[0].dtype, [](const Row& r, Row* o) { SoftmaxRow(r, o, true); });
       },
       [](const Tensors& t, const Step& s) { return log_softmax(t[0], s.ints[0]); },
       [](const Names& n, const Ranks&, const Step& s) { return absl::StrCat("log_softmax(", n[0], ", ", s.ints[0], ")"); }},
      // args {x, weight or -1, bias or -1}; ints[0]: trailing dims normalized; scalar: eps.
      {"layer_norm", Category::kNorm, [](const Refs& a, const Step& s) { return LayerNorm(a, s, false); },
       [](const Tensors& t, const Step& s) { return layer_norm(t[0], Trailing(t[0], s.ints[0]), t[1], t[2], s.scalar); },
       [](const Names& n, const Ranks& r, const Step& s) {
         return absl::StrCat("layer_norm(", n[0], ", ", TrailingSizes(n[0], r[0], s.ints[0]), ", ", n[1], ", ", n[2], ", ",
                             s.scalar, ")");
       }},
      {"rms_norm", Category::kNorm, [](const Refs& a, const Step& s) { return LayerNorm(a, s, true); },
       [](const Tensors& t, const Step& s) {
         const Shape norm = Trailing(t[0], s.ints[0]);
         return s.scalar == 0 ? rms_norm(t[0], norm, t[1]) : rms_norm(t[0], norm, t[1], s.scalar);
       },
       [](const Names& n, const Ranks& r, const Step& s) {
         return absl::StrCat("rms_norm(", n[0], ", ", TrailingSizes(n[0], r[0], s.ints[0]), ", ", n[1],
                             s.scalar == 0 ? "" : absl::StrCat(", ", s.scalar), ")");
       }},
      {"matmul", Category::kMatmul, [](const Refs& a, const Step&) { return Matmul(a); },
       [](const Tensors& t, const Step&) { return matmul(t[0], t[1]); },
       [](const Names& n, const Ranks&, const Step&) { return absl::StrCat("matmul(", n[0], ", ", n[1], ")"); }},
  };
}

}  // namespace fusebox::fuzz
