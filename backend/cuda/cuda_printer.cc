#include "backend/cuda/cuda_printer.h"

#include "absl/strings/str_cat.h"
#include "backend/c_printer.h"

namespace fusebox::backend {
namespace {

class CudaPrinter : public CPrinter {
 protected:
  std::string Prelude() const override {
    return absl::StrCat(R"(#define FB_INLINE __device__ __forceinline__
FB_INLINE float fb_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
FB_INLINE unsigned short fb_f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
FB_INLINE float fb_bf2f(unsigned short b) { return __uint_as_float(((unsigned int)b) << 16); }
FB_INLINE unsigned short fb_f2bf(float f) { unsigned short b; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f)); return b; }
FB_INLINE float fb_inf() { return __int_as_float(0x7f800000); }
FB_INLINE float fb_nan() { return __int_as_float(0x7fc00000); }
FB_INLINE float fb_fabs(float x) { return fabsf(x); }
FB_INLINE float fb_powf(float a, float b) { return powf(a, b); }
// Combines one value per thread across the block; every thread gets the result.
template <typename T, typename F>
FB_INLINE T fb_block_reduce(T v, F combine, T identity) {
  __shared__ T partials[32];
  for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the previous reduction may still be reading `partials`
  if (lane == 0) partials[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? partials[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
)",
                        CommonPrelude());
  }

  std::string Open(const Kernel& k) const override {
    const char* idx = k.index64 ? "long long" : "int";
    return absl::StrCat("extern \"C\" __global__ void __launch_bounds__(", kCudaBlockSize, ") ", k.name, "(",
                        ParamList(k, /*restrict_qualified=*/true), ") {\n", "  const ", idx, " base = (", idx,
                        ")blockIdx.x * ", kCudaElementsPerBlock, " + threadIdx.x;\n", "#pragma unroll\n",
                        "  for (int k = 0; k < ", kCudaElementsPerThread, "; ++k) {\n", "    const ", idx,
                        " i = base + k * ", kCudaBlockSize, ";\n", "    if (i >= ", k.numel, k.index64 ? "LL" : "",
                        ") break;\n");
  }

  std::string Close() const override { return "  }\n}\n"; }

  // One block per row; the block's threads stride along the row.
  std::string OpenRow(const Kernel& k) const override {
    const char* idx = k.index64 ? "long long" : "int";
    return absl::StrCat("extern \"C\" __global__ void __launch_bounds__(", kCudaBlockSize, ") ", k.name, "(",
                        ParamList(k, /*restrict_qualified=*/true), ") {\n", "  const ", idx, " r = blockIdx.x;\n",
                        "  {\n");
  }
  std::string CloseRow() const override { return "  }\n}\n"; }
  std::string OpenRowLoop(const Kernel& k) const override {
    const char* idx = k.index64 ? "long long" : "int";
    return absl::StrCat("    for (", idx, " j = threadIdx.x; j < ", k.row_length, k.index64 ? "LL" : "", "; j += ",
                        kCudaBlockSize, ") {\n");
  }
  std::string AfterPass(const Accumulator& a, const std::string& lambda) const override {
    return absl::StrCat("    t", a.temp, " = fb_block_reduce(t", a.temp, ", ", lambda, ", ",
                        CPrinter::IdentityLiteral(a), ");\n");
  }
  std::string OpenRowStores() const override { return "    if (threadIdx.x == 0) {\n"; }

  const char* OpTemplate(graph::Op op) const override { return graph::Info(op).cuda_expr; }
};

}  // namespace

std::string PrintCuda(const Kernel& kernel) { return CudaPrinter().Print(kernel); }

}  // namespace fusebox::backend
