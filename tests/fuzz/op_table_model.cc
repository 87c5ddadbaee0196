// The fuzzer's rows for the ops model code added (issue 24): the pointwise
// functions a transformer or its variants use, clamp, masked_fill and the
// triangles. Drawn only with GenOptions::model_ops, so recorded seeds keep
// generating the programs they found.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "tests/fuzz/op_table.h"
#include "tests/fuzz/ref_ops.h"

namespace fusebox::fuzz {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double Sin(double a) { return std::sin(a); }
double Cos(double a) { return std::cos(a); }
double Erf(double a) { return std::erf(a); }
double Log1p(double a) { return std::log1p(a); }
double Expm1(double a) { return std::expm1(a); }
double Silu(double a) { return a / (1.0 + std::exp(-a)); }
double Softplus(double a) { return a > 20.0 ? a : std::log1p(std::exp(a)); }  // beta 1, threshold 20
double Floor(double a) { return std::floor(a); }
double Ceil(double a) { return std::ceil(a); }
double Round(double a) { return std::nearbyint(a); }  // half to even (the default rounding mode)
double Sign(double a) { return std::isnan(a) ? 0.0 : static_cast<double>((0.0 < a) - (a < 0.0)); }  // NaN: 0

// Unary() bounds each function by its values at the ends of the operand's
// interval: right for monotonic ones (floor, round, ...: a step inside the
// interval shows at its ends); sin, cos and silu are not monotonic, so their
// Lipschitz constants bound them too.

// clamp(x, lo, hi) with the bounds pair ints[0] (the last has lo > hi: every
// element becomes hi, as torch.clamp).
constexpr double kClampBounds[][2] = {{-1, 1}, {0, 0.5}, {-0.25, 2}, {1, -1}};
OpDef ClampOp() {
  return {"clamp", Category::kUnary,
          [](const Refs& a, const Step& s) {
            RequireFloat(a[0], "clamp");
            const double lo = kClampBounds[s.ints[0]][0], hi = kClampBounds[s.ints[0]][1];
            return Map({&a[0]}, a[0].dtype, [=](const VE* x) {
              return Interval([=](double v) { return std::isnan(v) ? v : std::min(std::max(v, lo), hi); }, x[0]);
            });
          },
          [](const Tensors& t, const Step& s) { return clamp(t[0], kClampBounds[s.ints[0]][0], kClampBounds[s.ints[0]][1]); },
          [](const Names& n, const Ranks&, const Step& s) {
            return absl::StrCat("clamp(", n[0], ", ", kClampBounds[s.ints[0]][0], ", ", kClampBounds[s.ints[0]][1], ")");
          }};
}

// masked_fill(x, mask, scalar): the mask must be bool and broadcast to x's
// shape (the result keeps x's shape and dtype).
OpDef MaskedFillOp() {
  return {"masked_fill", Category::kWhere,
          [](const Refs& a, const Step& s) {
            RequireFloat(a[0], "masked_fill");
            if (a[1].dtype != DType::kBool) throw RefError("masked_fill: mask must be bool");
            if (BroadcastShapes(a[0].shape, a[1].shape) != a[0].shape) {
              throw RefError("masked_fill: mask must broadcast to x's shape");
            }
            const double value = s.scalar;
            return Map({&a[0], &a[1]}, a[0].dtype, [=](const VE* x) {
              if (std::isinf(x[1].e)) return VE{x[1].v != 0 ? value : x[0].v, kInf};  // a comparison within its bound
              return x[1].v != 0 ? VE{value, 0} : x[0];
            });
          },
          [](const Tensors& t, const Step& s) { return masked_fill(t[0], t[1], s.scalar); },
          [](const Names& n, const Ranks&, const Step& s) {
            return absl::StrCat("masked_fill(", n[0], ", ", n[1], ", ", std::isinf(s.scalar) ? "-INFINITY" : absl::StrCat(s.scalar), ")");
          }};
}

// tril / triu (flag) of the last two dims with diagonal ints[0].
OpDef TriangleOp() {
  return {"triangle", Category::kUnary,
          [](const Refs& a, const Step& s) {
            const RefArray& x = a[0];
            const char* name = s.flag ? "triu" : "tril";
            if (x.rank() < 2) throw RefError(absl::StrCat(name, ": needs at least 2 dims"));
            RefArray y = MakeArray(x.shape, x.dtype);
            const int64_t rows = x.shape[x.rank() - 2], cols = x.shape[x.rank() - 1];
            for (int64_t i = 0; i < y.numel(); ++i) {
              const int64_t col = i % cols, row = cols ? (i / cols) % rows : 0;
              const bool keep = s.flag ? col - row >= s.ints[0] : col - row <= s.ints[0];
              (*y.val)[i] = keep ? x.v(i) : 0.0;
              (*y.err)[i] = keep ? x.e(i) : 0.0;
            }
            return y;
          },
          [](const Tensors& t, const Step& s) { return s.flag ? triu(t[0], s.ints[0]) : tril(t[0], s.ints[0]); },
          [](const Names& n, const Ranks&, const Step& s) {
            return absl::StrCat(s.flag ? "triu(" : "tril(", n[0], ", ", s.ints[0], ")");
          }};
}

}  // namespace

std::vector<OpDef> ModelOps() {
  return {
      Unary("sin", Sin, fusebox::sin, 1.0),
      Unary("cos", Cos, fusebox::cos, 1.0),
      Unary("erf", Erf, fusebox::erf),
      Unary("log1p", Log1p, fusebox::log1p),
      Unary("expm1", Expm1, fusebox::expm1),
      Unary("silu", Silu, fusebox::silu, 1.1),
      Unary("softplus", Softplus, fusebox::softplus),
      Unary("floor", Floor, fusebox::floor),
      Unary("ceil", Ceil, fusebox::ceil),
      Unary("round", Round, fusebox::round),
      Unary("sign", Sign, fusebox::sign),
      ClampOp(),
      MaskedFillOp(),
      TriangleOp(),
  };
}

}  // namespace fusebox::fuzz
