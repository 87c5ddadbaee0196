// Eviction priorities of the generated kernels' global accesses. A fused
// kernel knows which of its accesses come back to an element: a looped row
// (too long for registers) is read once per pass, the later passes from the
// L1 or the L2. Its loads before the last pass are kept (evict-last in both),
// so other rows' traffic does not push the row out before it is re-read, and
// so are the operands every row reads (a norm's weight); its last read is
// evict-first, so it makes room for the rows still in flight (Inductor's
// hints for its looped reductions). Read-once data elsewhere (pointwise
// operands, persistent rows, column chunks) may be streamed too (level 2),
// which measured no faster on the H200 (bench/NOTES.md), so it is off by
// default.
#pragma once

#include <string>

#include "backend/index_expr.h"
#include "backend/tuning.h"

namespace fusebox::backend {

// kStream: PTX .cs; kKeep: evict-last in the L2 (and in L1, CudaL1HintBits
// bit 1); kLastRead: evict-first in L1 and the L2 (bit 2; else kStream).
enum class CacheHint { kNormal, kStream, kKeep, kLastRead };

// Knob::kCacheHints (FUSEBOX_TUNE_CACHE_HINTS; docs/debugging.md): 0 no
// hints, 1 (default) hints in kernels that re-read rows from the L2 and
// streamed loads in reductions that only read, 2 also streams read-once data
// in every kernel.
int CudaCacheHintLevel(const TuningSnapshot& tuning);
// kStream where read-once data of any kernel is streamed (level 2), else kNormal.
CacheHint StreamEverywhere(const TuningSnapshot& tuning);
// The hint of a read-once load in a reduction that stores nothing per
// element and reads its rows whole (a row sum): kStream from level 1.
// Measured on the H200 (bench/experiments/sums.cu): a row sum over 8192 x
// 8192 4031 GB/s streamed, 3753 not; where the kernel also stores rows
// (softmax) streaming its loads measured 2% slower, and a column sum's
// partial kernel 3% slower, so those stay at StreamEverywhere().
CacheHint StreamReadOnlyReduction(const TuningSnapshot& tuning);

// Kernels that re-read rows from memory also use the L1 hints of Inductor's
// looped reductions, as bits (Knob::kL1Hints, FUSEBOX_TUNE_L1_HINTS, 0-15; 15 by
// default): 1: kept loads are also evict-last in L1 (the row's next pass may
// hit L1); 2: the last read is kLastRead instead of kStream; 4: operands
// broadcast over the rows (a weight) are kept; 8: per-element stores carry
// no hint instead of kStream. Measured on the H200 (bench/NOTES.md, session
// 10), the looped layer_norm 16384 x 4096: 3898 GB/s with none, 3915 with
// 1, 4082 with 7, 4103 with all; the other row kernels the same either way.
int CudaL1HintBits(const TuningSnapshot& tuning);

// Device helpers the hinted accesses call: fb_ld_stream, fb_ld_keep and
// fb_ld_last (loads of unsigned int, uint2, uint4; fb_ld_stream also of the
// scalar storage types) and fb_st_stream (stores); part of the CUDA prelude.
std::string CacheHintPrelude(const TuningSnapshot& tuning);

// A read-once access of a reduction: its index runs over both the row `r`
// and the position in it `j`, so each element is touched by one row, once
// per pass. Indices free of `r` (a weight broadcast over rows) are re-read
// by every row, and indices free of `j` once per row.
bool TouchesEachElementOnce(const IndexExpr& index);
// An operand every row reads alike (a norm's weight): its index runs over
// the position `j` but not the row `r`.
bool BroadcastOverRows(const IndexExpr& index);

// `*ptr` with `hint` (ptr: an expression of pointer type): "*(ptr)" when the
// hint is kNormal.
std::string HintedLoad(CacheHint hint, const std::string& ptr);
// The statement body `*ptr = value` with `hint`, without the semicolon.
std::string HintedStore(CacheHint hint, const std::string& ptr, const std::string& value);

}  // namespace fusebox::backend
