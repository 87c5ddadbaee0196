// The CUDA text of the online exp sums (backend/online_exp_sums.h) that the
// split and row printers print.
#include "backend/cuda/online_exp_sum_source.h"

namespace fusebox::backend {

// Online softmax (online_exp_sums.h): the running pair (m, s), s the sum of
// exp(x - m) over the elements so far, takes in (ym, ys), a partial's pair
// or one element's (ys = 1), with one exp (eager's two passes take one per
// element too). Branch-free: a branch per element kept the unrolled loads
// from issuing together (1.5-1.9x slower on the H200). NaN and infinities
// come out as eager's: a NaN or a +inf (exp(inf - inf)) makes s NaN; -inf
// elements while the max is -inf count 1 each (eager's NaN for such a
// column comes out of fb_online_exp_sum_end). Every exp is __expf
// (ex2.approx of x log2 e, 2 instructions against expf's 8, as Triton's
// tl.exp): its error, 2 + 1.2 |x| ulp, is at most 2 ulp of the sum it adds
// to, as a term exp(x) with x <= 0 shrinks faster than the error grows; expf
// made the bf16 cross-entropy's logsumexp issue-bound (56-60% of copy).
extern const char kCudaOnlineExpSum[] = R"(
FB_INLINE void fb_online_exp_sum(float& m, float& s, float ym, float ys) {
  const float d = ym - m;
  // exp(-|d|) rescales the smaller side; d is NaN where m and ym are both
  // -inf (weight 1), both +inf or either NaN (NaN).
  const float w = d == d ? __expf(-fabsf(d)) : (m < 0.0f && ym < 0.0f ? 1.0f : d);
  const float nan = __int_as_float(0x7fffffff);
  s = d > 0.0f ? fmaf(s, w, ym == fb_inf() ? nan : ys) : fmaf(ys, w, s);
  m = fb_max(m, ym);
}
// A folded pair made final: a max of -inf over any elements means every
// element was -inf, and eager's exp(x - m) is then NaN for each of them, so
// their sum is NaN (not the count the fold gives them).
FB_INLINE void fb_online_exp_sum_end(float m, float& s) {
  if (m == -fb_inf() && s > 0.0f) s = __int_as_float(0x7fffffff);
}
)";

// Rows folding online sums combine their lanes' pairs (m, s) as the split
// printer's partials: across L lanes of a warp (fb_mask, as fb_lanes_reduce)
// or the whole block; a pair of dead lanes is (-inf, 0), which changes nothing.
extern const char kCudaOnlineExpSumCombine[] = R"(// A group's values folded as one pair: its max, and the sum of exp(y - max)
// over it (exp(0) is 1 exactly; a +inf max makes it NaN, as
// fb_online_exp_sum's elements do); a max of -inf counts each value 1, as
// fb_online_exp_sum's -inf elements do.
template <int V>
FB_INLINE void fb_online_exp_sum_group(float& m, float& s, const float (&y)[V]) {
  float gm = y[0], gs = 0.0f;
  #pragma unroll
  for (int e = 1; e < V; ++e) gm = fb_max(gm, y[e]);
  #pragma unroll
  for (int e = 0; e < V; ++e) gs += __expf(y[e] - gm);
  fb_online_exp_sum(m, s, gm, gm == -fb_inf() ? (float)V : gs);
}
template <int L>
FB_INLINE void fb_lanes_online_exp_sum(float& m, float& s, unsigned mask) {
  for (int o = L / 2; o > 0; o >>= 1) {
    const float om = __shfl_xor_sync(mask, m, o), os = __shfl_xor_sync(mask, s, o);
    fb_online_exp_sum(m, s, om, os);
  }
}
FB_INLINE void fb_block_online_exp_sum(float& m, float& s) {
  __shared__ float ms[32], ss[32];
  fb_lanes_online_exp_sum<32>(m, s, 0xffffffffu);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the previous reduction may still be reading ms, ss
  if (lane == 0) { ms[warp] = m; ss[warp] = s; }
  __syncthreads();
  const bool live = lane < (int)(blockDim.x >> 5);
  m = live ? ms[lane] : -fb_inf();
  s = live ? ss[lane] : 0.0f;
  fb_lanes_online_exp_sum<32>(m, s, 0xffffffffu);
}
)";

}  // namespace fusebox::backend
