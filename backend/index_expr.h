// Integer index expressions over the kernel's loop index `i`: the one place
// index math is built, simplified and printed, so the CUDA and C++ kernels
// compute the same indices. Values are non-negative; each node knows an
// exclusive upper bound, which lets `x % m` and `x / d` fold away when x < m,
// and a sum's terms that are multiples of d leave `% d` and pass through `/ d`
// alone: (r * 768 + j) / 768 is r and (r * 768 + j) % 768 is j when j < 768,
// so a row's broadcast or gathered operand indexes by the row alone.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fusebox::backend {

class IndexExpr {
 public:
  IndexExpr() : IndexExpr(Const(0)) {}
  static IndexExpr Var(int64_t bound);  // the loop index `i`, 0 <= i < bound
  // A named loop index (`r` for a reduction's row, `j` along the row).
  static IndexExpr Var(const char* name, int64_t bound);
  static IndexExpr Const(int64_t value);
  // The value of integer temporary t<temp> of the kernel body, 0 <= it <
  // bound (an index read from a tensor and checked: StmtKind::kIndexCheck).
  static IndexExpr Temp(int temp, int64_t bound);
  // A run-time size (dynamic shapes): the kernel argument `fb_s<symbol>`,
  // the size of fusion::DimSymbols' symbol, at least 1. Index math divides by
  // it where a dim has that size and multiplies by it where a stride holds it
  // (lower_util.h: Unravel, DotSized).
  static IndexExpr Size(int32_t symbol);
  static constexpr int32_t kMaxSizeArgs = 16;
  // Bound of a loop index whose extent is only known at run time (dynamic
  // shapes): large enough that no fold depends on it. Bounds saturate here.
  static constexpr int64_t kUnbounded = int64_t{1} << 61;

  friend IndexExpr operator+(const IndexExpr& a, const IndexExpr& b);
  friend IndexExpr operator*(const IndexExpr& a, int64_t c);
  friend IndexExpr operator/(const IndexExpr& a, int64_t d);
  friend IndexExpr operator%(const IndexExpr& a, int64_t m);
  // By an expression: a constant one folds as above; a run-time size divides
  // at run time (nothing folds through it).
  friend IndexExpr operator/(const IndexExpr& a, const IndexExpr& d);
  friend IndexExpr operator%(const IndexExpr& a, const IndexExpr& m);
  // Times an expression (a run-time size): x / s * s + x % s folds to x,
  // and (k * s + y) / s, % s split as for constants.
  friend IndexExpr operator*(const IndexExpr& a, const IndexExpr& s);

  bool is_const() const;
  int64_t const_value() const;
  int64_t bound() const;        // exclusive upper bound of the value
  std::string ToString() const; // C syntax, e.g. "((i / 64) % 8) * 3 + 5"
  // The same, each temporary t spelled temp_name(t) (a description of what
  // computes it: lowering's key for one value computed in several blocks).
  using TempName = std::function<std::string(int temp)>;
  std::string ToString(const TempName& temp_name) const;
  // The value with each loop index `v` at var(v) and each temporary t at
  // temp(t): what the printed C computes (tests check folds with it).
  int64_t Eval(const std::function<int64_t(const char* var)>& var,
               const std::function<int64_t(int temp)>& temp = nullptr) const;
  // Whether the loop index `var` occurs in the expression.
  bool DependsOn(const char* var) const;
  // Whether a temporary occurs in it (an indirect access).
  bool HasTemp() const;
  // The temporaries that occur in it, in order (a statement whose result an
  // index reads is live: passes that drop dead statements ask this).
  std::vector<int> Temps() const;
  // Whether the expression is `var + rest`, `rest` free of `var` and a
  // multiple of m for every value of the other indices (proved from the
  // terms: constants and products by multiples of m; any `rest` for m = 1).
  // The CUDA row printer asks this of `j` to move m consecutive elements in
  // one vector access.
  bool IsVarPlusMultipleOf(const char* var, int64_t m) const;
  // Whether, over every run of v values of `var` that starts at a multiple
  // of v (the other indices fixed), the expression takes v consecutive values
  // starting at a multiple of v: `i`, and broadcasts like `i % 64` (a bias
  // over rows) or `i / 4096 * 64 + i % 64` when v divides 64. The CUDA
  // pointwise printer asks this of `i` to move such an operand's v elements
  // in one vector access, as it moves the dense ones.
  bool IsAlignedRunOf(const char* var, int64_t v) const;
  // Whether, over every such run, the expression has one value: constants,
  // other indices, and `var / d` or `var / d * s` when v divides d (a value
  // per row whose length v divides). The pointwise printer loads such an
  // operand once per v elements.
  bool IsUniformOverAlignedRunOf(const char* var, int64_t v) const;

  // Structural identity: the same tree of kinds, constants and variable
  // names (expressions are built simplified, so equal trees are the way
  // lowering spells one index). Hashable, for memo and cache-slot keys.
  friend bool operator==(const IndexExpr& a, const IndexExpr& b);
  template <typename H>
  friend H AbslHashValue(H h, const IndexExpr& e) {
    return H::combine(std::move(h), e.StructuralHash());
  }

 private:
  // kDivBy, kModBy, kMulBy: by the expression b (a run-time size), not a constant.
  enum class Kind { kVar, kConst, kAdd, kMul, kDiv, kMod, kTemp, kDivBy, kModBy, kMulBy };
  struct Rep;
  explicit IndexExpr(std::shared_ptr<const Rep> rep) : rep_(std::move(rep)) {}
  static std::string Operand(const IndexExpr& e, const TempName& temp_name);
  size_t StructuralHash() const;
  // Over an aligned run of v values of `var`: same (one value), run (v
  // consecutive values from a multiple of v).
  struct RunProps {
    bool same, run;
  };
  RunProps PropsOverAlignedRun(const char* var, int64_t v) const;
  static IndexExpr Make(Kind kind, int64_t value, int64_t bound, IndexExpr a, IndexExpr b);
  // Whether the value is a multiple of d for every value of its indices
  // (proved from the terms: constants, products by multiples, their sums).
  bool IsMultipleOf(int64_t d) const;
  // The terms of the sum (left to right) that are multiples of d, and the
  // others, each summed; nullopt where there are none.
  std::pair<std::optional<IndexExpr>, std::optional<IndexExpr>> SplitTerms(int64_t d) const;
  // The same for a run-time divisor s: the terms that are products by s.
  std::pair<std::optional<IndexExpr>, std::optional<IndexExpr>> SplitTermsBy(const IndexExpr& s) const;
  // The terms `multiple` says yes to, and the others.
  std::pair<std::optional<IndexExpr>, std::optional<IndexExpr>> SplitTermsWhere(
      const std::function<bool(const IndexExpr&)>& multiple) const;
  std::shared_ptr<const Rep> rep_;
};

// The kernel argument that holds symbol `symbol`'s run-time size.
const char* SizeArgName(int32_t symbol);

}  // namespace fusebox::backend
