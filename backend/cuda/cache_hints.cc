#include "backend/cuda/cache_hints.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "backend/tune.h"

namespace fusebox::backend {

int CudaCacheHintLevel() {
  static const int level = static_cast<int>(std::clamp<int64_t>(TuneInt("FUSEBOX_TUNE_CACHE_HINTS", 1), 0, 2));
  return level;
}

CacheHint StreamEverywhere() { return CudaCacheHintLevel() >= 2 ? CacheHint::kStream : CacheHint::kNormal; }

CacheHint StreamReadOnlyReduction() { return CudaCacheHintLevel() >= 1 ? CacheHint::kStream : CacheHint::kNormal; }

// __ldcs / __stcs are PTX's .cs ("cache streaming": evict-first in L1 and
// L2); evict-last needs a cache policy (createpolicy) on the load.
const char* CacheHintPrelude() {
  return R"(template <typename T> FB_INLINE T fb_ld_stream(const T* p) { return __ldcs(p); }
FB_INLINE bool fb_ld_stream(const bool* p) { return *p; }
template <typename T> FB_INLINE void fb_st_stream(T* p, T v) { __stcs(p, v); }
FB_INLINE void fb_st_stream(bool* p, bool v) { *p = v; }
FB_INLINE unsigned long long fb_keep_policy() {
  unsigned long long p;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p;
}
FB_INLINE uint4 fb_ld_keep(const uint4* a) {
  uint4 v;
  asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(a), "l"(fb_keep_policy()));
  return v;
}
FB_INLINE uint2 fb_ld_keep(const uint2* a) {
  uint2 v;
  asm("ld.global.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;" : "=r"(v.x), "=r"(v.y) : "l"(a), "l"(fb_keep_policy()));
  return v;
}
FB_INLINE unsigned int fb_ld_keep(const unsigned int* a) {
  unsigned int v;
  asm("ld.global.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(v) : "l"(a), "l"(fb_keep_policy()));
  return v;
}
)";
}

bool TouchesEachElementOnce(const IndexExpr& index) { return index.DependsOn("r") && index.DependsOn("j"); }

std::string HintedLoad(CacheHint hint, const std::string& ptr) {
  if (hint == CacheHint::kNormal) return absl::StrCat("*(", ptr, ")");
  return absl::StrCat(hint == CacheHint::kStream ? "fb_ld_stream(" : "fb_ld_keep(", ptr, ")");
}

std::string HintedStore(CacheHint hint, const std::string& ptr, const std::string& value) {
  if (hint != CacheHint::kStream) return absl::StrCat("*(", ptr, ") = ", value);
  return absl::StrCat("fb_st_stream(", ptr, ", ", value, ")");
}

}  // namespace fusebox::backend
