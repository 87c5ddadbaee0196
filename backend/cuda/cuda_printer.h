// Kernel IR -> CUDA C++ for NVRTC: 256 threads per block, each thread doing
// 4 to 8 elements one block-width apart (coalesced, and the loads of all in
// flight: CudaPointwiseElementsPerThread), or, for dense pointwise kernels,
// 16 bytes of consecutive elements per buffer in one vector access; 32-bit index math unless the kernel needs 64. The prelude is a few
// lines of our own (no CUDA headers), which keeps NVRTC fast.
#pragma once

#include <string>

#include "backend/cuda/row_spread.h"
#include "backend/code_writer.h"
#include "backend/kernel_ir.h"
#include "backend/tuning.h"

namespace fusebox::backend {

inline constexpr int kCudaBlockSize = 256;

// Column reductions: rows of a column each thread loads before folding are
// Knob::kColumnUnroll (8).
// Split column chunks longer than this many unrolled steps fold their float
// sums in runs of it (128 rows), so a thread's chain stays short.
inline constexpr int kCudaColumnRunSteps = 16;

struct CudaSchedule;

// Every printing and launch-geometry function takes the compile's tuning
// (backend/tuning.h); the kernel IR carries none of it. The printer follows
// `schedule` (ChooseCudaSchedule's, chosen once per kernel; the launch reads
// the same value); the second form chooses it first.
std::string PrintCuda(const Kernel& kernel, const CudaSchedule& schedule, const TuningSnapshot& tuning);
std::string PrintCuda(const Kernel& kernel, const TuningSnapshot& tuning);

// Elements per thread of a dense pointwise kernel printed with 16-byte
// accesses (every buffer written at `i` and read at `i` or an aligned run of
// it is of one 2- or 4-byte type; others are read at one index per run): 8
// or 4; 1 for every other kernel.
int CudaVectorWidth(const Kernel& kernel);
// Elements per thread of any other pointwise kernel, one block-width apart:
// Knob::kPointwiseThreadBytes of its narrowest buffer's type, 4 to 8 (4
// 16-bit loads per thread left the H200 short of bytes in flight).
int CudaPointwiseElementsPerThread(const Kernel& kernel, const TuningSnapshot& tuning);

// Threads per block of a kernel printed by PrintCuda with rows spread as
// `spread` (ChooseCudaRowSpread's): kCudaBlockSize, or a layout's own. The
// schedule's rule (cuda_schedule.h) reads it; the launch reads the schedule
// (CudaSchedule::Grid), never this.
int CudaBlockSize(const Kernel& kernel, const CudaRowSpread& spread, const TuningSnapshot& tuning);

// Shared by the CUDA printers: a kernel's signature, launched with
// kCudaBlockSize threads; and the top of a kernel launched as a programmatic
// dependent of the one before it (LaunchDims::programmatic), which waits for
// that grid's results (a no-op when launched plainly; sm_90 and later only).
std::string CudaSignature(const std::string& name, const std::string& params);
void CudaWaitForPriorGrid(CodeWriter& w);

// The fb_* helpers every CUDA kernel source starts with (no headers).
std::string CudaPrelude(const TuningSnapshot& tuning);
// Kernels with index checks: CUDA's fb_check_index (CPrinter::IndexCheckHelpers).
std::string CudaIndexCheckPrelude();

// Column reductions (a thread per column): blocks of kCudaBlockSize columns.
inline int64_t CudaColumnTiles(const Kernel& k) { return (k.num_rows + kCudaBlockSize - 1) / kCudaBlockSize; }
// Split columns: the blocks across the columns, kCudaBlockSize /
// column_lanes columns each (CudaRowSpread::column_lanes).
inline int64_t CudaSplitColumnTiles(const Kernel& k, const CudaRowSpread& spread) {
  const int64_t columns = kCudaBlockSize / spread.column_lanes;
  return (k.num_rows + columns - 1) / columns;
}

// Split reductions (CudaRowSpread::split > 1): CudaSchedule::Grid is the
// partial kernel's grid; this is the final kernel's (a block per row, or a thread per
// column; per column and chunk where the kernel stores per element).
int64_t CudaCombineGridSize(const Kernel& kernel, const CudaRowSpread& spread);
// Threads per block of the partial kernel: CudaBlockSize, or a column
// tile's 1024 (column_tiles.h).
int CudaPartialBlockSize(const Kernel& kernel, const CudaRowSpread& spread, const TuningSnapshot& tuning);

// Split reductions: the elements of a row each partial result folds (the
// last chunk may be shorter); column chunks are whole kColumnUnroll steps.
int64_t CudaSplitChunk(const Kernel& kernel, const CudaRowSpread& spread, const TuningSnapshot& tuning);
// A column of `rows` split `split` ways: chunks of whole kColumnUnroll steps.
int64_t CudaColumnChunk(int64_t rows, int64_t split, const TuningSnapshot& tuning);

}  // namespace fusebox::backend
