// The CUDA text of the online exp sums (backend/online_exp_sums.h): device
// functions the split printer (cuda/split_printer.h) and the row printer
// (cuda/row_printer.h) print before kernels that fold them.
#pragma once

namespace fusebox::backend {

// fb_online_exp_sum (one element's or a partial's pair into the running
// pair) and fb_online_exp_sum_end (a folded pair made final).
extern const char kCudaOnlineExpSum[];
// Rows only, after kCudaOnlineExpSum: a group folded whole, and the pairs
// of a row's lanes or block combined.
extern const char kCudaOnlineExpSumCombine[];

}  // namespace fusebox::backend
