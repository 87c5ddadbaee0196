// The layout of CUDA reductions along contiguous rows (L lanes of a warp,
// or a block, per row, not split): how many threads share a row, how many
// consecutive elements each moves at once, whether the row is held on chip
// or looped over, and the rules that choose among them (the printer is
// row_printer.h). Thread `lane` of a row takes groups of V consecutive
// elements, j = (lane + q * threads) * V + e.
#pragma once

#include <cstdint>
#include <set>

#include "backend/cuda/row_spread.h"
#include "backend/kernel_ir.h"
#include "backend/tuning.h"

namespace fusebox::backend {

// Looped rows whose threads fold more than this many values each fold their
// float sums in runs of about this many (row_printer.cc), so a thread's
// rounding chain stays a few hundred values long.
inline constexpr int64_t kCudaRowRunValues = 256;

struct CudaRowLayout {
  // Block rows: the whole block. Warp rows (kWarpPerRow): L, the lanes per
  // row, a power of two up to 32 (CudaLanesPerRow); a warp holds 32 / L rows,
  // each combined by shuffles of width L among its own lanes.
  int threads_per_row = 32;
  int block_size = 256;
  int rows_per_block = 8;
  int vector_width = 1;  // V: elements per group (1: no access is vectorized)
  // Rows whose accesses would move fewer than 16 bytes at once because V
  // elements of 16 bytes do not tile the row (odd rows; Knob::kAlignedRowGroups):
  // groups are aligned to memory instead of to the row. Thread `lane`'s
  // groups start at j = (lane + q * threads) * V - fb_head, fb_head (0 to
  // V - 1) the row's misalignment read at run time from its lead access
  // (AlignedGroupLead), so the lead, and every access at the same index and
  // element size, moves whole 16-byte vectors; the loops cover row_length +
  // V - 1 elements and mask those outside the row (other accesses load
  // element by element, and partial groups store so). A vector that reaches
  // past the row stays inside one 16-byte chunk, so inside the allocation
  // (CUDA buffers are 512-byte granular, caching_allocator.cc).
  bool aligned_groups = false;
  // Persistent kernels whose cached values fit the register budget
  // (kCudaRowRegisterBudget); the others are printed looped.
  bool on_chip = false;
  // Persistent rows: groups each thread holds (the row is done in one step).
  // Looped rows: groups each thread loads before using any, per step.
  int64_t groups = 0;
  // Looped rows read more than once (several passes, or per-element stores)
  // and too long for one block's registers: 1024 threads per block and a grid
  // of one block per SM walking the rows (r += gridDim.x), so the rows in
  // flight (one per SM, at most kCudaL2RowBytes each) stay in the L2 and only
  // the first pass reads HBM.
  bool grid_stride = false;
  // On-chip rows too long for registers alone (looped kernels that re-read
  // their rows): 1024 threads hold each cached value's first groups in
  // registers and the last `shared_groups` in shared memory, `shared_bytes`
  // of dynamic shared memory per block (one block per SM), so the row is
  // read from HBM once.
  int64_t shared_groups = 0;
  int64_t shared_bytes = 0;
  // Looped block rows: the blocks per SM in __launch_bounds__ (0: none).
  int min_blocks = 0;
  friend bool operator==(const CudaRowLayout&, const CudaRowLayout&) = default;
};

// Dynamic shared memory a block may hold of a long row on sm_90 (of the
// H200's 227 KB per block, leaving room for the reductions' static shared
// memory); CudaRowSharedBytes gives it per compute capability.
inline constexpr int64_t kCudaRowSharedBytes = int64_t{192} << 10;
int64_t CudaRowSharedBytes(int cuda_arch);

// Rows up to this many bytes per cached input may rely on the L2 between
// passes with one row per SM in flight (132 x 256 KB = 33 MB of a 60 MB L2).
inline constexpr int64_t kCudaL2RowBytes = int64_t{256} << 10;

// Persistent block-per-row kernels: block threads grow from 256 (to 1024)
// until each holds at most this many elements per cached input: 8 for rows
// up to 4096 and for rows read once (a sum), 16 beyond (measured on the
// H200: 8 at 4096 made layer_norm and rms_norm ~1.5% faster, 8 at 8192 made
// softmax 7% slower; a row sum over 8192 ran at 4025 GB/s with 1024 threads
// of 8 values, 3836 with 512 of 16).
// Knob::kRowValues (FUSEBOX_TUNE_ROW_VALUES) overrides both.
inline constexpr int kCudaShortRowValuesPerThread = 8;
inline constexpr int64_t kCudaShortRowLength = 4096;
inline constexpr int kCudaRowValuesPerThread = 16;
// Registers a thread may spend on a persistent row's cached values (all
// inputs the passes read): 32 in blocks of 1024 threads (64 registers each at
// most), 64 otherwise. Rows over it loop instead of spilling, 256 threads
// per row.
inline constexpr int kCudaRowRegisterBudget = 64;
// Looped rows: groups loaded per thread before the first is folded in.
inline constexpr int kCudaLoopGroups = 4;

// Grid-stride rows (CudaRowLayout::grid_stride): blocks per SM, sharing an
// SM's 1024 threads (1: one 1024-thread block walks the rows; 2: two blocks of
// 512 overlap one row's reduction with the other's loads, with twice the rows
// in flight in the L2). Knob::kLongRowBlocks (the default equals it) sets it.
inline constexpr int kCudaLongRowBlocksPerSm = 1;

// Block rows read twice (one pass, then the stores; rms_norm) up to this
// long loop instead of being held on chip: 256 threads a row and many rows in
// flight per SM, the second read from the L2 (kept there by cache hints).
// Measured on the H200 (bench/NOTES.md): rms_norm 16384 x 4096 4010 GB/s on
// chip, 4190 looped; rows read three times (softmax, layer_norm) lost ~11%
// looped, so they stay on chip. Those with a broadcast weight loop one group
// per step instead (LoopsNormRows, below).
inline constexpr int64_t kCudaTwoReadLoopLimit = 4096;
bool LoopsReadingTwice(const Kernel& kernel, const CudaRowSpread& spread);

// Re-read block rows longer than kCudaShortRowLength, up to
// kCudaWideLoopRowLimit, in groups of 4 or more elements, that read no
// operand broadcast over the rows (a softmax over 8192) are not held on chip:
// they loop, kCudaWideLoopThreads threads loading one group per step, the row
// kept in the L2 between passes, as Inductor's looped reductions of 512
// threads do. Measured on the H200, not derived (bench/NOTES.md): softmax
// 8192 x 8192 4047-4054 GB/s on chip, 4160-4172 looped with one group per
// step, 4011 with two and 3681 with four. The on-chip kernel already fits
// four blocks per SM (32 registers; the looped one 36, three), so occupancy
// does not explain it.
// Knob::kWideRowLoop off (FUSEBOX_TUNE_WIDE_ROW_LOOP=0) turns it off, for A/B runs.
inline constexpr int64_t kCudaWideLoopRowLimit = 8192;
inline constexpr int kCudaWideLoopThreads = 512;
bool LoopsWideRows(const Kernel& kernel, const CudaRowSpread& spread, const TuningSnapshot& tuning);

// Re-read block rows of kCudaNormLoopMinLength to kCudaShortRowLength that
// read an operand broadcast over the rows (layer_norm and rms_norm over 4096,
// with their weights) loop the same way, 512 threads and one group per step:
// with counted steps, __launch_bounds__(512, kCudaOneGroupLoopMinBlocks) and
// the L1 hints of cache_hints.h (CudaL1HintBits), as Inductor's kernel for
// them. Measured on the H200 (bench/NOTES.md, session 10), layer_norm 16384
// x 4096: 4035-4040 GB/s on chip, 4103 looped so; without the L1 hints the
// same loop measured 3898, and without counted steps 2869.
// Knob::kNormRowLoop off (FUSEBOX_TUNE_NORM_ROW_LOOP=0) turns it off, for A/B runs.
inline constexpr int64_t kCudaNormLoopMinLength = 2049;
bool LoopsNormRows(const Kernel& kernel, const CudaRowSpread& spread, const TuningSnapshot& tuning);
// LoopsWideRows or LoopsNormRows: the rows loop one group per step.
bool LoopsOneGroupPerStep(const Kernel& kernel, const CudaRowSpread& spread, const TuningSnapshot& tuning);
// Blocks per SM that one-group loops (LoopsOneGroupPerStep) ask
// ptxas for (32 registers at 512 threads); Knob::kLoopMinBlocks overrides
// it for every looped block row (0: no bound).
inline constexpr int kCudaOneGroupLoopMinBlocks = 4;

// Long re-read rows may be held in registers and shared memory
// (CudaRowLayout::shared_groups) unless Knob::kSharedRows is off, for A/B
// runs against the grid-stride walk.
// Rows per block of the warp-per-row layout where a row takes the whole warp
// (L = 32): 1, blocks of
// 32 threads, Inductor's shape. Softmax over 32768 x 1024 on the H200
// (bench/NOTES.md): session 12, 1 row 3997-3999 GB/s, 2 3959-3963, 4
// 3965-3972; sessions 8 and 11, 2 rows 3968-3973, 4 3953-3968, 8 3940-3961,
// 16 3907-3911. Knob::kWarpRowsPerBlock (1 to 32) for A/B runs.
inline constexpr int kCudaWarpRowsPerBlock = 1;

// Lanes per warp row, L: the most lanes (a power of two, at most 32) that
// still give each lane at least `min_elements` elements (Knob::kLaneElements,
// 4 by default), or one group of `vector_width` where the row's accesses
// vectorize (16 bytes). Why, reasoned rather than measured: a full warp on a
// 37-element row leaves most lanes idle and pays 5 shuffles per pass for 37
// elements (the H200 sweep's [453439, 37] rows ran at 3-11% of the copy
// ceiling); with L lanes a pass costs log2 L shuffles and each lane has
// several independent loads in flight. Rows of 128 or more elements (256 in
// bf16 groups of 8) keep the whole warp, as before; rows of 1 to 7 take a
// thread each (L = 1: no shuffles).
int CudaLanesPerRow(int64_t row_length, int vector_width, int64_t min_elements);
// Warp rows of fewer than 32 lanes take blocks of this many warps
// (Knob::kShortRowWarps): a 32-thread block each would leave the H200's SMs
// at 32 resident blocks, half their 64 warps; 8 warps as the pointwise
// kernels' 256 threads.
inline constexpr int kCudaShortRowWarps = 8;
// Looped block rows (neither on chip nor grid-stride): threads per row, 256
// (Knob::kLoopThreads), and groups each thread loads per step,
// kCudaLoopGroups (Knob::kLoopGroups).

// Whether PrintCuda prints `kernel` through PrintCudaRows (warp or block
// rows, not split). The rules here take the kernel's spread
// (ChooseCudaRowSpread, the schedule's).
bool UsesCudaRowLayout(const Kernel& kernel, const CudaRowSpread& spread);
CudaRowLayout ChooseCudaRowLayout(const Kernel& kernel, const CudaRowSpread& spread, const TuningSnapshot& tuning);
// Its block_size (launches ask for it).
int CudaRowBlockSize(const Kernel& kernel, const CudaRowSpread& spread, const TuningSnapshot& tuning);

// Shared with the printer.
// Whether `kernel`'s rows are persistent (fusion's kPersistent: a row is
// done in one launch by one warp or block, its cached values loaded once).
bool PersistentRows(const Kernel& kernel);
// Cache slots the passes read (the values held in registers through them).
std::set<int> PreloadedSlots(const Kernel& kernel);
// Whether an access at `index` may move a group of v elements at once: the v
// elements are consecutive in memory (stride 1 in j, which starts groups at
// multiples of v, and rows hold whole groups), and every group starts at a
// multiple of its access size, or of 16 bytes, from the buffer's pointer.
bool Vectorizable(DType dtype, const IndexExpr& index, int v);
// Aligned groups (CudaRowLayout::aligned_groups): the access whose
// misalignment places a row's groups, the first row access (j plus a part
// that varies with the row) of the narrowest element size in the passes,
// then the per-element stores; only accesses at its index and element size
// move vectors.
struct AlignedGroupLead {
  int buffer = -1;
  IndexExpr index;
  int element_size = 0;
};
AlignedGroupLead ChooseAlignedGroupLead(const Kernel& kernel);

}  // namespace fusebox::backend
