#include "backend/c_printer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/substitute.h"
#include "backend/index_check.h"
#include "backend/row_invariants.h"
#include "tensor/error.h"

namespace fusebox::backend {
namespace {

std::string Temp(int t) { return absl::StrCat("t", t); }

// "fb_to_f32": converts any compute value to `dtype`'s compute type, rounding
// through f16/bf16 where the dtype is one.
std::string ConvertFn(DType dtype) { return absl::StrCat("fb_to_", Traits(dtype).short_name); }

std::string LoadExpr(DType dtype, const std::string& element) {
  switch (dtype) {
    case DType::kFloat16: return absl::StrCat("fb_h2f(", element, ")");
    case DType::kBFloat16: return absl::StrCat("fb_bf2f(", element, ")");
    default: return element;
  }
}

std::string StoreExpr(DType dtype, const std::string& value) {
  switch (dtype) {
    case DType::kFloat16: return absl::StrCat("fb_f2h(", value, ")");
    case DType::kBFloat16: return absl::StrCat("fb_f2bf(", value, ")");
    default: return value;
  }
}

std::string Literal(DType dtype, double v) {
  if (dtype == DType::kBool) return v != 0 ? "true" : "false";
  if (dtype == DType::kInt32) return absl::StrCat(static_cast<int32_t>(v));
  if (dtype == DType::kInt64) return absl::StrCat(static_cast<int64_t>(v), "LL");
  if (std::isnan(v)) return "fb_nan()";
  if (std::isinf(v)) return v > 0 ? "fb_inf()" : "(-fb_inf())";
  // The value the graph holds, rounded once to the dtype it is computed in.
  std::string s = absl::StrFormat("%.9g", static_cast<float>(v));
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

}  // namespace

const char* ComputeCType(DType dtype) { return Traits(dtype).compute_ctype; }
const char* StorageCType(DType dtype) { return Traits(dtype).storage_ctype; }

const char* CPrinter::CommonPrelude() {
  return R"(FB_INLINE float fb_to_f32(float x) { return x; }
FB_INLINE float fb_to_f16(float x) { return fb_h2f(fb_f2h(x)); }
FB_INLINE float fb_to_bf16(float x) { return fb_bf2f(fb_f2bf(x)); }
FB_INLINE int fb_to_i32(float x) { return (int)x; }
FB_INLINE long long fb_to_i64(float x) { return (long long)x; }
FB_INLINE bool fb_to_b8(float x) { return x != 0.0f; }
FB_INLINE float fb_to_f32(long long x) { return (float)x; }
FB_INLINE float fb_to_f16(long long x) { return fb_to_f16((float)x); }
FB_INLINE float fb_to_bf16(long long x) { return fb_to_bf16((float)x); }
FB_INLINE int fb_to_i32(long long x) { return (int)x; }
FB_INLINE long long fb_to_i64(long long x) { return x; }
FB_INLINE bool fb_to_b8(long long x) { return x != 0; }
FB_INLINE float fb_to_f32(int x) { return (float)x; }
FB_INLINE float fb_to_f16(int x) { return fb_to_f16((float)x); }
FB_INLINE float fb_to_bf16(int x) { return fb_to_bf16((float)x); }
FB_INLINE int fb_to_i32(int x) { return x; }
FB_INLINE long long fb_to_i64(int x) { return x; }
FB_INLINE bool fb_to_b8(int x) { return x != 0; }
FB_INLINE float fb_to_f32(bool x) { return x ? 1.0f : 0.0f; }
FB_INLINE float fb_to_f16(bool x) { return fb_to_f32(x); }
FB_INLINE float fb_to_bf16(bool x) { return fb_to_f32(x); }
FB_INLINE int fb_to_i32(bool x) { return x; }
FB_INLINE long long fb_to_i64(bool x) { return x; }
FB_INLINE bool fb_to_b8(bool x) { return x; }
template <typename T> FB_INLINE T fb_relu(T x) { return x < T(0) ? T(0) : x; }  // NaN stays NaN
template <typename T> FB_INLINE T fb_max(T a, T b) { return (a != a || a > b) ? a : b; }  // NaN wins
template <typename T> FB_INLINE T fb_min(T a, T b) { return (a != a || a < b) ? a : b; }
template <typename T> FB_INLINE T fb_abs(T x) { return x < T(0) ? -x : x; }
template <typename T> FB_INLINE T fb_sign(T x) { return T((T(0) < x) - (x < T(0))); }  // NaN: 0, as PyTorch
FB_INLINE float fb_abs(float x) { return fb_fabs(x); }
template <typename T> FB_INLINE T fb_pow(T base, T exp) {  // integers: exact, exp < 0 gives 0 unless |base| == 1
  if (exp < 0) return base == 1 ? T(1) : (base == -1 ? ((exp & 1) ? T(-1) : T(1)) : T(0));
  T r = 1;
  for (; exp > 0; exp >>= 1, base *= base) if (exp & 1) r *= base;
  return r;
}
template <typename T> FB_INLINE bool fb_arg_better_max(T v, long long i, T av, long long ai) {
  if (v != v) return av == av || i < ai;  // NaN beats numbers; the first NaN wins
  if (av != av) return false;
  return v > av || (v == av && i < ai);
}
template <typename T> FB_INLINE bool fb_arg_better_min(T v, long long i, T av, long long ai) {
  if (v != v) return av == av || i < ai;
  if (av != av) return false;
  return v < av || (v == av && i < ai);
}
FB_INLINE float fb_pow(float base, float exp) {
  if (exp == 2.0f) return base * base;  // exact and much cheaper than powf
  if (exp == 3.0f) return base * base * base;
  return fb_powf(base, exp);
}
// Philox4x32-10 (Salmon et al., SC'11; graph/philox.h is its host twin): the
// counter-based generator of rand/randn/dropout. Element x of a random op
// with state (seed, offset) takes counter (x, offset) under key seed.
struct fb_philox4 { unsigned w[4]; };
FB_INLINE fb_philox4 fb_philox(unsigned long long lo, unsigned long long hi, unsigned long long key) {
  unsigned c0 = (unsigned)lo, c1 = (unsigned)(lo >> 32), c2 = (unsigned)hi, c3 = (unsigned)(hi >> 32);
  unsigned k0 = (unsigned)key, k1 = (unsigned)(key >> 32);
  for (int r = 0; r < 10; ++r) {
    const unsigned long long p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;
    const unsigned n0 = (unsigned)(p1 >> 32) ^ c1 ^ k0, n2 = (unsigned)(p0 >> 32) ^ c3 ^ k1;
    c1 = (unsigned)p1; c3 = (unsigned)p0; c0 = n0; c2 = n2;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  fb_philox4 out = {{c0, c1, c2, c3}};
  return out;
}
// [0, 1) from the top 24 bits of word 0 (as PyTorch's float uniform).
FB_INLINE float fb_philox_uniform(long long x, long long seed, long long offset) {
  return (float)(fb_philox((unsigned long long)x, (unsigned long long)offset, (unsigned long long)seed).w[0] >> 8) *
         5.9604644775390625e-8f;
}
// Box-Muller: u1 in (0, 1] (no log of 0), u2 in [0, 1).
FB_INLINE float fb_philox_normal(long long x, long long seed, long long offset) {
  const fb_philox4 r = fb_philox((unsigned long long)x, (unsigned long long)offset, (unsigned long long)seed);
  const float u1 = (float)((r.w[0] >> 8) + 1u) * 5.9604644775390625e-8f, u2 = (float)(r.w[1] >> 8) * 5.9604644775390625e-8f;
  return fb_sqrtf(-2.0f * fb_logf(u1)) * fb_cosf(6.28318531f * u2);
}
)";
}

std::string CPrinter::ParamList(const Kernel& kernel, bool restrict_qualified) {
  std::string params;
  for (const BufferParam& b : kernel.buffers) {
    absl::StrAppend(&params, params.empty() ? "" : ", ", b.is_output ? "" : "const ", StorageCType(b.dtype),
                    restrict_qualified ? "* __restrict__ " : "* ", b.name);
  }
  if (kernel.checks_indices) absl::StrAppend(&params, ", long long* fb_err");
  return params;
}

std::string CPrinter::SizeParams(const Kernel& kernel) {
  std::string params;
  // In the index's type: 32-bit index math divides in 32 bits (a plan whose
  // sizes pass 2^31 - 2^16 is index64, NeedsIndex64).
  for (int32_t symbol : kernel.size_args) {
    absl::StrAppend(&params, kernel.index64 ? ", long long " : ", int ", SizeArgName(symbol));
  }
  return params;
}

std::string CPrinter::SizeArgs(const Kernel& kernel) {
  std::string args;
  for (int32_t symbol : kernel.size_args) absl::StrAppend(&args, ", ", SizeArgName(symbol));
  return args;
}

std::string CPrinter::IndexCheckHelpers(const char* record_first) {
  return absl::StrCat(R"(// An index out of [0, n): the first one seen is recorded in err (set, index,
// n, code), read and reported by the host after the launch; 0 is read instead.
FB_INLINE long long fb_check_index(long long v, long long n, long long* err, long long code) {
  if (v >= 0 && v < n) return v;
  if ()", record_first, R"() { err[1] = v; err[2] = n; err[3] = code; }
  return 0;
}
)");
}

std::string CPrinter::IdentityLiteral(const Accumulator& acc) {
  const double v = graph::Info(acc.op).identity;
  if (std::isinf(v) && acc.dtype == DType::kInt32) return v > 0 ? "2147483647" : "(-2147483647 - 1)";
  if (std::isinf(v) && acc.dtype == DType::kInt64) return v > 0 ? "9223372036854775807LL" : "(-9223372036854775807LL - 1)";
  return Literal(acc.dtype, v);
}

void CPrinter::AccumulatorDecl(CodeWriter& w, const Accumulator& a) {
  w.Line(ComputeCType(a.dtype), " ", Temp(a.temp), " = ", IdentityLiteral(a), ";");
  // An index starts past every real one, so the first element always wins a tie.
  if (a.index_temp >= 0) w.Line("long long ", Temp(a.index_temp), " = 9223372036854775807LL;");
}

void CPrinter::AccumulateStep(CodeWriter& w, const Accumulator& a, const char* op_template, const std::string& value,
                              const std::string& value_index) {
  FUSEBOX_CHECK(a.online_max < 0, "online sum t", a.temp, ": only the CUDA split printer folds online sums");
  if (a.index_temp < 0) {
    w.Line(Temp(a.temp), " = ", absl::Substitute(op_template, Temp(a.temp), value), ";");
    return;
  }
  w.Line("if (", absl::Substitute(op_template, value, value_index, Temp(a.temp), Temp(a.index_temp)), ") { ", Temp(a.temp),
         " = ", value, "; ", Temp(a.index_temp), " = ", value_index, "; }");
}

std::string CPrinter::CombineLambda(const Accumulator& a, const char* op_template) {
  const std::string type = ComputeCType(a.dtype);
  if (a.index_temp >= 0) {
    return absl::StrCat("[](", type, " v, long long i, ", type, " av, long long ai) { return ",
                        absl::Substitute(op_template, "v", "i", "av", "ai"), "; }");
  }
  return absl::StrCat("[](", type, " a, ", type, " b) { return ", absl::Substitute(op_template, "a", "b"), "; }");
}

void CPrinter::PreloadSlot(CodeWriter& w, const Kernel& kernel, size_t slot) const {
  const CachedLoad& c = kernel.cached_loads[slot];
  auto scope = c.index_defs.empty() ? w.Indented(0) : w.Block();
  Statements(w, kernel, c.index_defs, [this](graph::Op op) { return OpTemplate(op); });
  w.Line("c", slot, "[k] = ", LoadExpression(kernel, c.buffer, c.index), ";");
}

std::string CPrinter::LoadExpression(const Kernel& kernel, int buffer, const IndexExpr& index) {
  const BufferParam& b = kernel.buffers[buffer];
  return LoadExpr(b.dtype, absl::StrCat(b.name, "[", index.ToString(), "]"));
}

void CPrinter::Statements(CodeWriter& w, const Kernel& kernel, const std::vector<Stmt>& block,
                          const std::function<const char*(graph::Op)>& op_template, bool cached_loads,
                          const std::function<std::string(const Stmt&)>& load_element) {
  for (const Stmt& s : block) {
    const std::string type(ComputeCType(s.dtype));
    switch (s.kind) {
      case StmtKind::kLoad: {
        std::string value;
        if (cached_loads && s.cache_slot >= 0) {
          value = absl::StrCat("c", s.cache_slot, "[k]");
        } else if (std::string element = load_element ? load_element(s) : ""; !element.empty()) {
          value = LoadExpr(kernel.buffers[s.buffer].dtype, element);
        } else {
          value = LoadExpression(kernel, s.buffer, s.index);
        }
        if (s.mask >= 0) value = absl::StrCat(Temp(s.mask), " ? ", value, " : (", type, ")0");
        w.Line(type, " ", Temp(s.result), " = ", value, ";");
        break;
      }
      case StmtKind::kIndexCheck: {
        std::string value = absl::StrCat("fb_check_index((long long)", Temp(s.args[0]), ", ", s.hi, "LL, fb_err, ",
                                         IndexCheckCode(s.op, s.dim), "LL)");
        if (s.mask >= 0) value = absl::StrCat(Temp(s.mask), " ? ", value, " : 0LL");
        w.Line("const long long ", Temp(s.result), " = ", value, ";");
        break;
      }
      case StmtKind::kInRange: {
        const std::string index = s.index.ToString();
        w.Line("const bool ", Temp(s.result), " = ", s.args.empty() ? "" : Temp(s.args[0]) + " && ", "(", s.lo, " <= ",
               index, " && ", index, " < ", s.hi, ");");
        break;
      }
      case StmtKind::kPosition:
        w.Line("const long long ", Temp(s.result), " = (long long)(", s.index.ToString(), ");");
        break;
      case StmtKind::kConstant:
        w.Line("const ", type, " ", Temp(s.result), " = ", Literal(s.dtype, s.constant), ";");
        break;
      case StmtKind::kCompute: {
        std::string a[3];
        for (size_t k = 0; k < s.args.size(); ++k) a[k] = Temp(s.args[k]);
        w.Line(type, " ", Temp(s.result), " = ", absl::Substitute(op_template(s.op), a[0], a[1], a[2], ConvertFn(s.dtype)),
               ";");
        break;
      }
      case StmtKind::kStore: {
        if (cached_loads && s.cache_slot >= 0) {  // into a held row slot (cuda/held_row_values.h)
          w.Line("c", s.cache_slot, "[k] = ", Temp(s.args[0]), ";");
          break;
        }
        const BufferParam& b = kernel.buffers[s.buffer];
        w.Line(b.name, "[", s.index.ToString(), "] = ", StoreExpr(b.dtype, Temp(s.args[0])), ";");
        break;
      }
    }
  }
}

void CPrinter::Open(CodeWriter&, const Kernel& kernel) const {
  FUSEBOX_CHECK(false, "kernel ", kernel.name, ": a printer of reductions only got a pointwise kernel");
}

void CPrinter::CloseRow(CodeWriter& w) const {
  w.Close();  // the row's scope
  w.Close();  // the kernel's
}

void CPrinter::PrintPass(CodeWriter& w, const Kernel& kernel, const Pass& pass) const {
  auto op_template = [this](graph::Op op) { return OpTemplate(op); };
  for (const Accumulator& a : pass.accumulators) AccumulatorDecl(w, a);
  std::vector<Stmt> body = pass.body, once;  // row-invariant statements once, before the loop
  if (HoistsRowInvariants() && MayHoistRowInvariants(kernel)) {
    HoistRowInvariant(&body, &once, AccumulatorTemps(pass.accumulators));
    Statements(w, kernel, once, op_template);
  }
  RowLoop(w, kernel, [&] {
    Statements(w, kernel, body, op_template, ReadsCachedLoads(kernel));
    for (const Accumulator& a : pass.accumulators) AccumulateStep(w, a, OpTemplate(a.op), Temp(a.value), "(long long)j");
  });
  for (const Accumulator& a : pass.accumulators) AfterPass(w, kernel, a, CombineLambda(a, OpTemplate(a.op)));
}

std::string CPrinter::Print(const Kernel& kernel) const {
  auto op_template = [this](graph::Op op) { return OpTemplate(op); };
  CodeWriter w;
  w.Raw(Prelude());
  if (kernel.checks_indices) w.Raw(IndexCheckPrelude());
  w.Line();
  if (!kernel.is_reduction()) {
    w.Line("// ", kernel.name, ": ", kernel.dynamic_extent ? "fb_n (run-time)" : absl::StrCat(kernel.numel), " elements");
    Open(w, kernel);
    Statements(w, kernel, kernel.body, op_template);
    w.Close();  // the element's scope
    w.Close();  // the kernel's
    return std::move(w).Release();
  }
  if (kernel.dynamic_extent) {
    w.Line("// ", kernel.name, ": fb_n (run-time) rows of ", kernel.row_length);
  } else {
    w.Line("// ", kernel.name, ": ", kernel.numel, " elements, ", kernel.num_rows, " rows of ", kernel.row_length);
  }
  OpenRow(w, kernel);
  Preload(w, kernel);
  const bool cached = ReadsCachedLoads(kernel);
  for (const Pass& pass : kernel.passes) PrintPass(w, kernel, pass);
  if (!kernel.elementwise.empty()) {
    std::vector<Stmt> body = kernel.elementwise, once;
    if (HoistsRowInvariants() && MayHoistRowInvariants(kernel)) {
      HoistRowInvariant(&body, &once, {});
      Statements(w, kernel, once, op_template);
    }
    RowLoop(w, kernel, [&] { Statements(w, kernel, body, op_template, cached); });
  }
  if (!kernel.row_body.empty()) {
    OpenRowStores(w, kernel);
    Statements(w, kernel, kernel.row_body, op_template);
    w.Close();  // OpenRowStores' scope
  }
  CloseRow(w);
  return std::move(w).Release();
}

}  // namespace fusebox::backend
