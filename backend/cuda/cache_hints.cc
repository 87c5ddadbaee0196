#include "backend/cuda/cache_hints.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace fusebox::backend {

int CudaCacheHintLevel(const TuningSnapshot& tuning) { return tuning.GetInt(Knob::kCacheHints); }

CacheHint StreamEverywhere(const TuningSnapshot& tuning) {
  return CudaCacheHintLevel(tuning) >= 2 ? CacheHint::kStream : CacheHint::kNormal;
}

int CudaL1HintBits(const TuningSnapshot& tuning) { return tuning.GetInt(Knob::kL1Hints); }

CacheHint StreamReadOnlyReduction(const TuningSnapshot& tuning) {
  return CudaCacheHintLevel(tuning) >= 1 ? CacheHint::kStream : CacheHint::kNormal;
}

namespace {

// The 16-, 8- and 4-byte overloads of the hinted load `name`: PTX
// `ld.global<qualifiers>.L2::cache_hint` with the L2 policy `policy()`.
std::string PolicyLoads(const std::string& name, const std::string& qualifiers, const std::string& policy) {
  const std::string ld = absl::StrCat("ld.global", qualifiers, ".L2::cache_hint");
  // One overload: `type` loaded as `shape` into the registers `outputs`.
  auto overload = [&](const char* type, const char* shape, const char* outputs, int address) {
    return absl::StrCat("FB_INLINE ", type, " ", name, "(const ", type, "* a) {\n  ", type, " v;\n  asm(\"", ld, shape,
                        " [%", address, "], %", address + 1, ";\" : ", outputs, " : \"l\"(a), \"l\"(", policy,
                        "()));\n  return v;\n}\n");
  };
  return absl::StrCat(
      overload("uint4", ".v4.u32 {%0, %1, %2, %3},", "\"=r\"(v.x), \"=r\"(v.y), \"=r\"(v.z), \"=r\"(v.w)", 4),
      overload("uint2", ".v2.u32 {%0, %1},", "\"=r\"(v.x), \"=r\"(v.y)", 2),
      overload("unsigned int", ".u32 %0,", "\"=r\"(v)", 1));
}

}  // namespace

// __ldcs / __stcs are PTX's .cs ("cache streaming": evict-first in L1 and
// L2); evict-last needs a cache policy (createpolicy) on the load.
std::string CacheHintPrelude(const TuningSnapshot& tuning) {
  std::string out = R"(template <typename T> FB_INLINE T fb_ld_stream(const T* p) { return __ldcs(p); }
FB_INLINE bool fb_ld_stream(const bool* p) { return *p; }
template <typename T> FB_INLINE void fb_st_stream(T* p, T v) { __stcs(p, v); }
FB_INLINE void fb_st_stream(bool* p, bool v) { *p = v; }
FB_INLINE unsigned long long fb_keep_policy() {
  unsigned long long p;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p;
}
)";
  absl::StrAppend(&out, PolicyLoads("fb_ld_keep", (CudaL1HintBits(tuning) & 1) ? ".L1::evict_last" : "", "fb_keep_policy"));
  if (CudaL1HintBits(tuning) & 2) {
    absl::StrAppend(&out, R"(FB_INLINE unsigned long long fb_last_policy() {
  unsigned long long p;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
)",
                    PolicyLoads("fb_ld_last", ".L1::evict_first", "fb_last_policy"));
  }
  return out;
}

bool TouchesEachElementOnce(const IndexExpr& index) { return index.DependsOn("r") && index.DependsOn("j"); }

bool BroadcastOverRows(const IndexExpr& index) { return index.DependsOn("j") && !index.DependsOn("r"); }

std::string HintedLoad(CacheHint hint, const std::string& ptr) {
  if (hint == CacheHint::kNormal) return absl::StrCat("*(", ptr, ")");
  const char* load = hint == CacheHint::kStream ? "fb_ld_stream(" : hint == CacheHint::kKeep ? "fb_ld_keep(" : "fb_ld_last(";
  return absl::StrCat(load, ptr, ")");
}

std::string HintedStore(CacheHint hint, const std::string& ptr, const std::string& value) {
  if (hint != CacheHint::kStream) return absl::StrCat("*(", ptr, ") = ", value);
  return absl::StrCat("fb_st_stream(", ptr, ", ", value, ")");
}

}  // namespace fusebox::backend
