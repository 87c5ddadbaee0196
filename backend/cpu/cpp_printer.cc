#include "backend/cpu/cpp_printer.h"

#include "absl/strings/str_cat.h"
#include "backend/c_printer.h"
#include "backend/cpu/cascade_pass.h"

namespace fusebox::backend::cpu {
namespace {

class CppPrinter : public CPrinter {
 protected:
  std::string Prelude() const override {
    return absl::StrCat(R"(#define FB_INLINE static inline __attribute__((always_inline))
FB_INLINE float fb_h2f(unsigned short h) { _Float16 v; __builtin_memcpy(&v, &h, 2); return (float)v; }
FB_INLINE unsigned short fb_f2h(float f) { _Float16 v = (_Float16)f; unsigned short h; __builtin_memcpy(&h, &v, 2); return h; }
FB_INLINE float fb_bf2f(unsigned short b) { unsigned int u = ((unsigned int)b) << 16; float f; __builtin_memcpy(&f, &u, 4); return f; }
FB_INLINE unsigned short fb_f2bf(float f) {
  unsigned int u; __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return (unsigned short)(u >> 16);
}
FB_INLINE float fb_inf() { return __builtin_inff(); }
FB_INLINE float fb_nan() { return __builtin_nanf(""); }
FB_INLINE float fb_fabs(float x) { return __builtin_fabsf(x); }
FB_INLINE float fb_powf(float a, float b) { return __builtin_powf(a, b); }
FB_INLINE float fb_sqrtf(float x) { return __builtin_sqrtf(x); }
FB_INLINE float fb_logf(float x) { return __builtin_logf(x); }
FB_INLINE float fb_cosf(float x) { return __builtin_cosf(x); }
)",
                        CommonPrelude());
  }

  void Open(CodeWriter& w, const Kernel& k) const override { OpenLoop(w, k, "i"); }

  // [begin, end) are rows.
  void OpenRow(CodeWriter& w, const Kernel& k) const override { OpenLoop(w, k, "r"); }
  void RowLoop(CodeWriter& w, const Kernel& k, const std::function<void()>& body) const override {
    auto loop = w.Block("for (long long j = 0; j < ", k.row_length, "LL; ++j)");
    body();
  }
  void OpenRowStores(CodeWriter& w, const Kernel&) const override { w.Open(); }

  void PrintPass(CodeWriter& w, const Kernel& k, const Pass& pass) const override {
    if (!UsesCascade(k, pass)) return CPrinter::PrintPass(w, k, pass);
    PrintCascadePass(w, k, pass, [this](graph::Op op) { return OpTemplate(op); });
  }

  bool HoistsRowInvariants() const override { return true; }  // a row is one thread's loop
  const char* OpTemplate(graph::Op op) const override { return graph::Info(op).cpp_expr; }
  std::string IndexCheckPrelude() const override {
    return CPrinter::IndexCheckHelpers("__atomic_exchange_n(&err[0], 1LL, __ATOMIC_RELAXED) == 0");
  }

 private:
  // The signature, the buffers, and the loop over [begin, end) in `var`
  // (elements `i`, or rows `r`).
  static void OpenLoop(CodeWriter& w, const Kernel& k, const char* var) {
    w.Open("extern \"C\" void ", k.name, "(void* const* args, long long begin, long long end)");
    for (size_t b = 0; b < k.buffers.size(); ++b) {
      const BufferParam& p = k.buffers[b];
      const std::string type = absl::StrCat(p.is_output ? "" : "const ", StorageCType(p.dtype), "*");
      w.Line(type, " __restrict__ ", p.name, " = (", type, ")args[", b, "];");
    }
    if (k.checks_indices) w.Line("long long* fb_err = (long long*)args[", k.buffers.size(), "];");
    // Run-time sizes (Kernel::size_args) follow, each a pointer to its value.
    for (size_t a = 0; a < k.size_args.size(); ++a) {
      w.Line("const long long ", SizeArgName(k.size_args[a]), " = *(const long long*)args[",
             k.buffers.size() + (k.checks_indices ? 1 : 0) + a, "];");
    }
    w.Open("for (long long ", var, " = begin; ", var, " < end; ++", var, ")");
  }
};

}  // namespace

std::string PrintCpp(const Kernel& kernel) { return CppPrinter().Print(kernel); }

}  // namespace fusebox::backend::cpu
