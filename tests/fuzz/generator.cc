// Random programs from a seed. Each step is proposed, then kept only if the
// reference accepts it under every size assignment (so dynamic calls stay
// valid); a must-fail program ends in a step the reference rejects.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "tests/fuzz/interpret.h"
#include "tests/fuzz/op_table.h"

namespace fusebox::fuzz {
namespace {

using Sizes = std::array<int64_t, kAssignments>;
constexpr int64_t kMaxValueNumel = int64_t{1} << 16;

class Generator {
 public:
  Generator(uint64_t seed, const GenOptions& o) : rng_(seed * 0x9E3779B97F4A7C15ull + 1), opt_(o) { p_.seed = seed; }

  Program Run() {
    dtype_ = Pick<DType>(opt_.allow_16bit ? std::vector<DType>{DType::kFloat32, DType::kBFloat16, DType::kFloat16}
                                          : std::vector<DType>{DType::kFloat32});
    const int vars = Int(1, 3);
    for (int v = 0; v < vars; ++v) NewVar();
    for (int i = Int(1, 2); i > 0; --i) RandomInput();
    const bool fail = !opt_.exclude.must_fail && Chance(0.08);
    const int steps = Int(1, opt_.max_steps);
    for (int k = 0; k < steps; ++k) {
      for (int attempt = 0; attempt < 30; ++attempt) {
        if (Propose(false)) break;
      }
    }
    if (fail) {
      for (int attempt = 0; attempt < 60 && !p_.must_fail; ++attempt) Propose(true);
    }
    if (p_.steps.empty()) AddInput({0}, dtype_);
    const int last = static_cast<int>(p_.steps.size()) - 1;
    p_.outputs = {last};
    if (!p_.must_fail && last > 0 && Chance(0.3)) {
      const int other = Int(0, last - 1);
      if (p_.steps[other].op != kInputOp) p_.outputs.push_back(other);
    }
    p_.alias = !opt_.exclude.alias && p_.inputs.size() >= 2 && p_.inputs[0].dims == p_.inputs[1].dims &&
               p_.inputs[0].dtype == p_.inputs[1].dtype && Chance(0.5);
    return p_;
  }

 private:
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <typename T>
  T Pick(const std::vector<T>& v) { return v[Int(0, static_cast<int>(v.size()) - 1)]; }

  int64_t PaletteSize(bool allow_small) {
    std::vector<int64_t> pal;
    for (int64_t s : opt_.palette) {
      if ((s == 0 && opt_.exclude.zero_size) || (!allow_small && s < 2)) continue;
      pal.push_back(s);
    }
    return Pick(pal);
  }
  int NewVar() {
    Sizes s;
    s[0] = PaletteSize(true);
    for (int a = 1; a < kAssignments; ++a) {
      s[a] = s[0] >= 2 && Chance(0.7) ? PaletteSize(false) : (Chance(0.9) ? s[0] : PaletteSize(true));
    }
    p_.sizes.push_back(s);
    return static_cast<int>(p_.sizes.size()) - 1;
  }
  // The size variable with these sizes per assignment (a new one if none).
  int VarFor(const Sizes& s) {
    for (size_t v = 0; v < p_.sizes.size(); ++v) {
      if (p_.sizes[v] == s) return static_cast<int>(v);
    }
    p_.sizes.push_back(s);
    return static_cast<int>(p_.sizes.size()) - 1;
  }
  Sizes DimSizes(int value, int64_t d) const {
    Sizes s;
    for (int a = 0; a < kAssignments; ++a) s[a] = refs_[a][value].shape[d];
    return s;
  }
  bool IsFloatValue(int v) const { return IsFloating(refs_[0][v].dtype); }

  // Appends an input step (dims: size variables or -1); false past the arity limit.
  int AddInput(std::vector<int> dims, DType dtype) {
    if (static_cast<int>(p_.inputs.size()) >= opt_.max_inputs) return -1;
    Input in;
    in.dims = std::move(dims);
    in.dtype = dtype;
    in.transposed = in.dims.size() >= 2 && Chance(0.2);
    const double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    in.data = r < 0.6 ? 0 : r < 0.85 ? 1 : 2;
    for (int a = 0; a < kAssignments; ++a) {
      int64_t n = 1;
      for (int d : in.dims) n *= d < 0 ? 1 : p_.sizes[d][a];
      if (n > kMaxValueNumel) return -1;
    }
    p_.inputs.push_back(in);
    Step s;
    s.op = kInputOp;
    s.ints = {static_cast<int64_t>(p_.inputs.size()) - 1};
    p_.steps.push_back(s);
    for (int a = 0; a < kAssignments; ++a) {
      refs_[a].push_back(InputData(p_, static_cast<int>(p_.inputs.size()) - 1, a, 0));
    }
    return static_cast<int>(p_.steps.size()) - 1;
  }
  DType InputDType() {
    if (opt_.exclude.mixed_dtype || !opt_.allow_16bit || !Chance(0.15)) return dtype_;
    return Pick<DType>({DType::kFloat32, DType::kBFloat16, DType::kFloat16});
  }
  int RandomInput() {
    const int rank = (opt_.exclude.zero_dim || !Chance(0.1)) ? Int(1, 3) : 0;
    std::vector<int> dims;
    for (int d = 0; d < rank; ++d) dims.push_back(Chance(0.15) ? -1 : Int(0, static_cast<int>(p_.sizes.size()) - 1));
    return AddInput(dims, InputDType());
  }
  // A new input shaped like `value`'s trailing `keep` dims (some made 1), for broadcasting.
  int InputLike(int value, int64_t keep, double ones, bool lead, DType dtype) {
    const int64_t rank = refs_[0][value].rank();
    std::vector<int> dims;
    if (lead) dims.push_back(Int(0, static_cast<int>(p_.sizes.size()) - 1));
    for (int64_t d = rank - keep; d < rank; ++d) {
      const Sizes s = DimSizes(value, d);
      dims.push_back(Chance(ones) || s == Sizes{1, 1, 1} ? -1 : VarFor(s));
    }
    return AddInput(dims, dtype);
  }
  int RecentFloat() {
    std::vector<int> floats;
    for (size_t v = 0; v < p_.steps.size(); ++v) {
      if (IsFloatValue(static_cast<int>(v))) floats.push_back(static_cast<int>(v));
    }
    if (floats.empty()) return -1;
    return Chance(0.5) ? floats.back() : Pick(floats);
  }
  int64_t Dim(int64_t rank, bool wild) {
    const int64_t r = std::max<int64_t>(rank, 1);
    if (wild && Chance(0.5)) return Chance(0.5) ? r + Int(0, 1) : -r - 1 - Int(0, 1);
    const int64_t d = Int(0, static_cast<int>(r) - 1);
    return Chance(0.25) ? d - r : d;
  }
  Dims DimSubset(int64_t rank, bool wild, bool allow_empty) {
    Dims dims;
    for (int64_t d = 0; d < rank; ++d) {
      if (Chance(0.4)) dims.push_back(Chance(0.2) ? d - rank : d);
    }
    if (dims.empty() && !allow_empty) dims.push_back(Dim(rank, wild));
    if (wild && Chance(0.3) && !dims.empty()) dims.push_back(dims[0]);  // a repeated dim
    std::shuffle(dims.begin(), dims.end(), rng_);
    return dims;
  }
  // A partner for x in a broadcasting op: x itself, another value, or a new input.
  int Partner(int x, bool wild) {
    const int64_t rank = refs_[0][x].rank();
    if (wild) {
      return AddInput({VarFor({97, 97, 97})}, refs_[0][x].dtype);  // broadcasts with few shapes
    }
    if (Chance(0.2)) return x;
    if (Chance(0.3)) {
      const int y = RecentFloat();
      if (y >= 0) return y;
    }
    const int min_keep = opt_.exclude.zero_dim ? 1 : 0;
    return InputLike(x, Int(std::min<int>(min_keep, rank), static_cast<int>(rank)), 0.25, Chance(0.15), InputDType());
  }

  // Proposes one step; keeps it if valid under every assignment (or, with
  // `fail`, if the reference rejects it under the first: the program's end).
  bool Propose(bool fail) {
    const size_t steps_before = p_.steps.size(), inputs_before = p_.inputs.size(), vars_before = p_.sizes.size();
    const auto before = refs_;
    Step s;
    if (!Build(&s, fail)) {
      Undo(steps_before, inputs_before, vars_before, before);
      return false;
    }
    p_.steps.push_back(s);
    const auto& op = OpTable()[s.op];
    int rejected_at = -1;
    bool too_big = false;
    for (int a = 0; a < kAssignments && rejected_at < 0 && !too_big; ++a) {
      std::vector<RefArray> args;
      for (int v : s.args) args.push_back(v < 0 ? RefArray{} : refs_[a][v]);
      try {
        refs_[a].push_back(op.ref(args, s));
        // Small values keep programs fast (and the reference's memory bounded).
        too_big = refs_[a].back().numel() > kMaxValueNumel || refs_[a].back().rank() > 6;
      } catch (const RefError&) {
        rejected_at = a;
      } catch (const TooBig&) {
        too_big = true;
      }
    }
    if (too_big) {
      Undo(steps_before, inputs_before, vars_before, before);
      return false;
    }
    if (!fail && rejected_at < 0 && opt_.exclude.size1_reduction) {
      for (int a = 0; a < kAssignments; ++a) rejected_at = RowSize(s, refs_[a][s.args[0]]) == 1 ? a : rejected_at;
    }
    if (!fail && rejected_at < 0 && opt_.exclude.zero_dim && MixesZeroDimDTypes(s)) rejected_at = 0;
    if (!fail && rejected_at < 0 && opt_.exclude.zero_size) {
      for (int a = 0; a < kAssignments; ++a) rejected_at = refs_[a].back().numel() == 0 ? a : rejected_at;
    }
    if (fail && rejected_at == 0) {
      p_.must_fail = true;
      return true;
    }
    if (rejected_at >= 0 || fail) {
      Undo(steps_before, inputs_before, vars_before, before);
      return false;
    }
    return true;
  }
  // A 0-d operand of another dtype than a dimensioned one (the known promotion defect).
  bool MixesZeroDimDTypes(const Step& s) const {
    for (int a : s.args) {
      for (int b : s.args) {
        if (a >= 0 && b >= 0 && refs_[0][a].rank() == 0 && refs_[0][b].rank() > 0 &&
            refs_[0][a].dtype != refs_[0][b].dtype && IsFloating(refs_[0][a].dtype) && IsFloating(refs_[0][b].dtype)) {
          return true;
        }
      }
    }
    return false;
  }
  // Elements per row of a reduction or norm step (-1 for other ops).
  static int64_t RowSize(const Step& s, const RefArray& x) {
    const Category c = OpTable()[s.op].category;
    if (c != Category::kReduce && c != Category::kNorm) return -1;
    if (x.rank() == 0) return 1;
    int64_t n = 1;
    if (c == Category::kNorm) {
      for (int64_t d = x.rank() - s.ints[0]; d < x.rank(); ++d) n *= x.shape[d];
      return n;
    }
    if (s.ints.empty()) return x.numel();
    for (int64_t d : s.ints) n *= x.shape[Wrap(d, x.rank())];
    return n;
  }
  void Undo(size_t steps, size_t inputs, size_t vars, const std::array<std::vector<RefArray>, kAssignments>& refs) {
    p_.steps.resize(steps);
    p_.inputs.resize(inputs);
    p_.sizes.resize(vars);
    refs_ = refs;
  }

  bool Build(Step* s, bool wild) {
    const int x = RecentFloat();
    if (x < 0) return false;
    const RefArray xr = refs_[0][x];  // a copy: new inputs grow refs_
    const int64_t rank = xr.rank();
    const double r = std::uniform_real_distribution<double>(0, 100)(rng_);
    auto op = [&](const char* name) { s->op = OpIndex(name); };
    s->args = {x};
    if (r < 24 && opt_.model_ops && Chance(0.6)) {  // (takes from the scalar ops too)
      BuildModelOp(s, rank, wild);
    } else if (r < 14) {
      op(Pick<const char*>({"exp", "log", "tanh", "sigmoid", "relu", "gelu", "gelu_tanh", "sqrt", "rsqrt", "abs", "neg",
                            "pow_scalar"}));
      s->scalar = Pick<double>({2, 3, 0.5, -1, 1.5});
    } else if (r < 24) {
      op("scalar");
      s->ints = {Int(0, 3)};
      s->scalar = Pick<double>({0.5, -1.25, 2, 3, -0.75});
      s->flag = Chance(0.4);
    } else if (r < 44) {
      op("binary");
      s->ints = {Int(0, 6)};
      s->flag = Chance(0.5);
      const int y = Partner(x, wild);
      if (y < 0) return false;
      s->args = Chance(0.5) ? std::vector<int>{x, y} : std::vector<int>{y, x};
    } else if (r < 50) {
      // A comparison, used by a where (a bool output alone is dull).
      Step c;
      const bool scalar = Chance(0.5);
      c.op = OpIndex(scalar ? "compare_scalar" : "compare");
      c.ints = {Int(0, 5)};
      c.scalar = Pick<double>({0, 0.5, -0.5});
      c.args = {x};
      if (!scalar) {
        const int y = Partner(x, false);
        if (y < 0) return false;
        c.args.push_back(y);
      }
      for (int a = 0; a < kAssignments; ++a) {
        std::vector<RefArray> args;
        for (int v : c.args) args.push_back(refs_[a][v]);
        try {
          refs_[a].push_back(OpTable()[c.op].ref(args, c));
        } catch (const RefError&) {
          return false;
        } catch (const TooBig&) {  // Propose undoes the refs pushed so far
          return false;
        }
      }
      p_.steps.push_back(c);
      const int cond = static_cast<int>(p_.steps.size()) - 1;
      if (opt_.model_ops && scalar && Chance(0.5)) {  // a mask of x's own shape
        op("masked_fill");
        s->scalar = Pick<double>({0, -INFINITY, 1.5});
        s->args = {wild ? cond : x, wild ? x : cond};  // wild: a float mask, which must fail
        return true;
      }
      op("where");
      s->ints = {Int(0, 2)};
      s->scalar = Pick<double>({0, -1.5, 2});
      s->args = {wild && !opt_.exclude.float_condition && Chance(0.3) ? x : cond, x};
      if (s->ints[0] == 0) {
        const int y = Partner(x, wild);
        if (y < 0) return false;
        s->args.push_back(y);
      }
    } else if (r < 53) {
      op("cast");
      s->ints = {static_cast<int64_t>(Pick<DType>({DType::kFloat32, DType::kBFloat16, DType::kFloat16}))};
      if (opt_.exclude.mixed_dtype || !opt_.allow_16bit) s->ints = {static_cast<int64_t>(xr.dtype)};
    } else if (r < 72) {
      if (rank == 0 && opt_.exclude.zero_dim) return false;
      BuildView(s, x, rank, wild);
      if (s->op < 0) return false;
    } else if (r < 87) {
      BuildReduction(s, rank, wild);
    } else if (r < 94) {
      op(Chance(0.6) ? "layer_norm" : "rms_norm");
      const int64_t k = wild ? Int(1, 4) : Int(1, std::max<int>(1, std::min<int>(2, rank)));
      s->ints = {k};
      const bool rms = OpTable()[s->op].name == std::string("rms_norm");
      s->scalar = rms ? Pick<double>({0, 1e-6}) : Pick<double>({1e-5, 1e-3});
      for (int i = 0; i < (rms ? 1 : 2); ++i) {
        int w = -1;
        if (Chance(0.5) && k <= rank) w = InputLike(x, wild && Chance(0.5) ? std::max<int64_t>(k - 1, 0) : k, 0, false, xr.dtype);
        s->args.push_back(w);
      }
    } else {
      if (opt_.exclude.matmul || rank < 2) return false;
      op("matmul");
      const int64_t batch = rank == 3 ? Pick<int64_t>({0, 1, 2}) : 0;  // rhs 2-D, batch 1, or x's batch
      std::vector<int> dims;
      if (batch == 1) dims.push_back(-1);
      if (batch == 2) dims.push_back(VarFor(DimSizes(x, 0)));
      dims.push_back(wild ? VarFor({97, 97, 97}) : (DimSizes(x, rank - 1) == Sizes{1, 1, 1} ? -1 : VarFor(DimSizes(x, rank - 1))));
      dims.push_back(Int(0, static_cast<int>(p_.sizes.size()) - 1));
      const int y = AddInput(dims, wild && Chance(0.5) && xr.dtype == DType::kFloat32 ? DType::kBFloat16 : xr.dtype);
      if (y < 0) return false;
      s->args = {x, y};
    }
    return s->op >= 0;
  }

  void BuildView(Step* s, int x, int64_t rank, bool wild) {
    const double r = std::uniform_real_distribution<double>(0, 10)(rng_);
    auto op = [&](const char* name) { s->op = OpIndex(name); };
    if (opt_.data_movement && Chance(0.4)) {
      op(Pick<const char*>({"cat_self", "stack_self", "chunk_first", "split_last", "gather_argmax", "index_select_argmax"}));
      const std::string name = OpTable()[s->op].name;
      s->ints = {name == "stack_self" ? (wild ? rank + 2 : Int(-static_cast<int>(rank) - 1, static_cast<int>(rank)))
                                      : Dim(rank, wild)};
      if (name == "chunk_first" || name == "split_last") s->ints.push_back(wild ? 0 : Int(1, 3));
      return;
    }
    if (r < 2) {
      op("transpose");
      s->ints = {Dim(rank, wild), Dim(rank, wild)};
    } else if (r < 3) {
      op("permute");
      s->ints.resize(rank);
      std::iota(s->ints.begin(), s->ints.end(), 0);
      std::shuffle(s->ints.begin(), s->ints.end(), rng_);
      if (wild && rank > 0) s->ints[0] = s->ints.back();
    } else if (r < 4) {
      op("narrow");
      s->ints = {Dim(rank, wild), Int(0, 1), wild ? 50 : Int(0, 1)};
    } else if (r < 5) {
      op("slice");
      s->ints = {Dim(rank, wild), Pick<int64_t>({0, 1, -1, -2}), Pick<int64_t>({1, 2, -1, 100})};
    } else if (r < 6.5) {
      op("reshape");
      s->flag = Chance(0.5);
      s->ints = {Int(0, std::max<int>(0, rank - 1))};
    } else if (r < 7.5) {
      op("expand");
      // To a shape x broadcasts to: x's dims with its size-1 dims given sizes, maybe one more in front.
      std::vector<int> dims;
      if (Chance(0.4) || wild) dims.push_back(Int(0, static_cast<int>(p_.sizes.size()) - 1));
      for (int64_t d = 0; d < rank; ++d) {
        const Sizes sz = DimSizes(x, d);
        dims.push_back(sz == Sizes{1, 1, 1} ? (Chance(0.6) ? Int(0, static_cast<int>(p_.sizes.size()) - 1) : -1)
                                          : (wild ? VarFor({97, 97, 97}) : VarFor(sz)));
      }
      const int y = AddInput(dims, refs_[0][x].dtype);
      if (y < 0) s->op = -1;
      s->args = {x, y};
    } else if (r < 8.5) {
      op("unsqueeze");
      s->ints = {wild ? rank + 2 : Int(-static_cast<int>(rank) - 1, static_cast<int>(rank))};
    } else if (r < 9.3) {
      op("squeeze");
      s->ints = {Dim(rank, wild)};
    } else {
      op(Chance(0.5) ? "flatten" : "contiguous");
    }
  }

  // sin ... sign, clamp or a triangle (GenOptions::model_ops).
  void BuildModelOp(Step* s, int64_t rank, bool wild) {
    const char* name = Pick<const char*>({"sin", "cos", "erf", "log1p", "expm1", "silu", "softplus", "floor", "ceil",
                                          "round", "sign", "clamp", "clamp", "triangle", "triangle"});
    s->op = OpIndex(name);
    if (s->op == OpIndex("clamp")) s->ints = {Int(0, 3)};
    if (s->op == OpIndex("triangle")) {
      if (rank < 2 && !wild) {  // (wild: fewer than 2 dims, which must fail)
        s->op = OpIndex("sin");
        return;
      }
      s->ints = {Pick<int64_t>({0, 0, 1, -1, 3, -40})};
      s->flag = Chance(0.5);
    }
  }

  void BuildReduction(Step* s, int64_t rank, bool wild) {
    const char* name = Pick<const char*>({"sum", "sum", "mean", "amax", "amin", "prod", "max", "min", "argmax", "argmin",
                                          "var", "logsumexp", "softmax", "softmax", "log_softmax"});
    s->op = OpIndex(name);
    const std::string n = name;
    s->flag = Chance(0.4);
    if (n == "softmax" || n == "log_softmax") {
      s->ints = {Dim(rank, wild)};
    } else if (n == "prod" || n == "max" || n == "min" || n == "argmax" || n == "argmin") {
      if (!Chance(0.2) || wild) s->ints = {Dim(rank, wild)};
    } else {
      s->ints = DimSubset(rank, wild, n != "logsumexp" && Chance(0.2));
      s->scalar = n == "var" ? Pick<double>({0, 1}) : 0;
    }
  }

  std::mt19937_64 rng_;
  const GenOptions& opt_;
  Program p_;
  DType dtype_ = DType::kFloat32;
  std::array<std::vector<RefArray>, kAssignments> refs_;  // every value's reference, per assignment
};

}  // namespace

Program Generate(uint64_t seed, const GenOptions& options) { return Generator(seed, options).Run(); }

}  // namespace fusebox::fuzz
