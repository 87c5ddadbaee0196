// Host side of the flash-attention kernel: the config choice, compiling and
// loading each config once per device, and the launch (the kernel's text is
// flash_attention_source.cc).
#include "backend/cuda/flash_attention.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backend/cuda/driver.h"
#include "backend/executable.h"
#include "spdlog/spdlog.h"
#include "tensor/mutex.h"

namespace fusebox::cuda {
namespace {

// The kernel's FbAttnParams, field by field (LP64 on both sides).
struct FlashParams {
  const void* q;
  const void* k;
  const void* v;
  const void* mask;
  void* o;
  long long q_batch[4], k_batch[4], v_batch[4], m_batch[4], o_batch[4];
  long long q_row, k_row, v_row, m_row, m_col, o_row;
  long long batch_sizes[4];
  long long batch;
  int l, s;
  float scale_log2;
  int aligned;
  unsigned long long* work;
};
static_assert(sizeof(FlashParams) == 312, "FlashParams must match the kernel's FbAttnParams");

// The warp-specialized kernel's FbWsParams: the plain ones, q's, k's and v's
// tensor maps (read in place by TMA), and each batch dim's map coordinate.
struct FlashWsParams {
  FlashParams a;
  CUtensorMap tq, tk, tv;
  signed char q_dim[4], k_dim[4], v_dim[4];
};
static_assert(sizeof(FlashWsParams) == 896 && offsetof(FlashWsParams, tq) == 384,
              "FlashWsParams must match the kernel's FbWsParams");

const char* DTypeTag(DType d) { return d == DType::kBFloat16 ? "bf16" : d == DType::kFloat16 ? "f16" : "f32"; }

// Whether every row cp.async copies is 16-byte aligned: the base and every
// stride (batch and row) in whole 16-byte steps.
bool Aligned16(const void* ptr, const std::array<int64_t, backend::kAttentionBatchDims>& batch, int64_t row,
               DType dtype) {
  const int64_t step = 16 / static_cast<int64_t>(DTypeSize(dtype));
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0 || row % step != 0) return false;
  return std::all_of(batch.begin(), batch.end(), [&](int64_t s) { return s % step == 0; });
}

// A 16-bit [batch..., rows, E] operand as the 5-dim tensor map the
// warp-specialized kernel reads (E, rows, three batch coordinates; boxes of
// 64 values by `box_rows` rows, in the 128-byte swizzle). Batch dims of one
// element or stride 0 add no coordinate; a dim whose stride times its size is
// the stride of the dim before it (skipping those) merges into that one's
// coordinate, as mixed radix. Nothing where TMA cannot read the operand;
// the caller has checked its alignment (Aligned16: base and strides in whole
// 16-byte steps, as TMA wants them too).
std::optional<CUtensorMap> OperandTensorMap(const void* ptr, const AttentionProblem& p,
                                            const std::array<int64_t, backend::kAttentionBatchDims>& batch_strides,
                                            int64_t row_stride, int64_t rows, int box_rows, signed char (&dims)[4]) {
  const uint64_t esize = DTypeSize(p.dtype);
  uint64_t sizes[5] = {static_cast<uint64_t>(p.e), static_cast<uint64_t>(rows), 1, 1, 1};
  // A single row's stride is never used: any aligned one does.
  uint64_t strides[4] = {rows > 1 ? static_cast<uint64_t>(row_stride) * esize : p.e * esize, 0, 0, 0};
  int groups = 0, last = -1;
  for (int d = 0; d < backend::kAttentionBatchDims; ++d) {
    dims[d] = -1;
    if (p.batch[d] == 1 || batch_strides[d] == 0) continue;
    if (last >= 0 && batch_strides[last] == batch_strides[d] * p.batch[d]) {
      sizes[1 + groups] *= p.batch[d], strides[groups] = batch_strides[d] * esize;
    } else {
      if (groups == 3) return std::nullopt;
      ++groups;
      sizes[1 + groups] = p.batch[d], strides[groups] = batch_strides[d] * esize;
    }
    dims[d] = static_cast<signed char>(groups - 1), last = d;
  }
  for (int g = groups + 1; g < 4; ++g) strides[g] = strides[0];
  // The kernel's coordinates are 32-bit.
  for (uint64_t size : sizes) {
    if (size >= (uint64_t{1} << 31)) return std::nullopt;
  }
  for (uint64_t s : strides) {
    if (s >= (uint64_t{1} << 40)) return std::nullopt;
  }
  const uint32_t box[5] = {64, static_cast<uint32_t>(box_rows), 1, 1, 1};
  absl::StatusOr<CUtensorMap> map = Driver::Get().EncodeTiledTensorMap(
      p.dtype == DType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 5, ptr, sizes,
      strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
  if (!map.ok()) {
    spdlog::debug("flash attention: no tensor map for {}: {}", p.ToString(), map.status().ToString());
    return std::nullopt;
  }
  return *map;
}

std::atomic<int64_t> tma_launches{0}, twin_launches{0};

// sm_90's 16-bit config (`c` names the problem): wgmma, and where `tma` and
// the mask allow, the warp-specialized kernel.
FlashConfig WgmmaConfig(FlashConfig c, bool tma, const backend::TuningSnapshot& tuning) {
  // wgmma exists on sm_90 alone (sm_100 has tcgen05 instead), and there it
  // wins: on the H200 (bf16, B 8, T 2048 / 4096, TFLOP/s) the mma.sync
  // kernel ran 246-292 (causal 175-230), the cp.async wgmma one 309-352
  // (228-294).
  c.wgmma = true;
  const int block_n = tuning.GetInt(backend::Knob::kFlashBlockN);
  if (tma && (c.mask == AttentionMask::kNone || c.mask == AttentionMask::kCausal)) {
    // Unmasked and causal: the warp-specialized kernel (TMA producer,
    // consumer warpgroups, one block an SM), 128 keys a tile. Measured on the H100
    // against the cp.async kernel below in one run (B 8, T 2048 / 4096,
    // TFLOP/s; torch's SDPA, cuDNN, beside): head dim 128 330 / 360 -> 505 /
    // 520 (574 / 579), causal 243 / 295 -> 368 / 444 (460 / 565); head dim 64
    // 307 / 324 -> 336 / 376 (375 / 438), causal 225 / 261 -> 260 / 317 (327
    // / 379); head dim 64 with 64 keys: 292 / 318, causal 228 / 273. Bool
    // and float masks stay on the cp.async kernel: GPT-2's tril bool mask
    // took 294 us a layer there against 243, and with the whole-tile check
    // the manual bf16 GPT-2 forward 6.81 ms against 6.69 (H100).
    // Consumers: three at head dim 64 (192 query rows, 160 registers a
    // thread, as FlashAttention-3 takes), since the softmax's issue bounds
    // it there and a third warpgroup fills the tensor cores' gaps: on the
    // H100 in one call (ms, B 8, T 2048 / 4096) 0.391 / 1.391 -> 0.347 /
    // 1.297, causal 0.279 / 0.922 -> 0.256 / 0.822. Two at head dim 128,
    // where three spill (0.260 -> 0.626 ms at T 2048).
    const int consumers_knob = tuning.GetInt(backend::Knob::kFlashConsumers);
    const int consumers = consumers_knob == 2 || consumers_knob == 3 ? consumers_knob : c.head_dim == 64 ? 3 : 2;
    c.warp_specialized = true, c.warps = 4 + 4 * consumers, c.block_n = 128;
    if (block_n == 64 || block_n == 128) c.block_n = block_n;
    return c;
  }
  // Two warpgroups (128 query rows). Keys a tile, measured on the H200
  // (128 keys against 64): head dim 64 247-267 against 308-331, causal
  // 191-223 against 226-261; head dim 128 326-352 against 306-330, causal
  // 244-292 against 234-278. Three warpgroups of 64 keys: 240-255,
  // 184-211, 305-360, 237-289; one (before the pipelining) 175-253. So two
  // warpgroups, 64 keys at head dim 64, 128 at 128 (S, P and the output in
  // registers: 64 + 32 + 64 floats a thread, 249 registers; a float mask's
  // loads and a bool mask's whole-tile check spill there, so masks take 64
  // keys). Every choice fits sm_90's 227 KB of shared memory a block (Q,
  // three K/V stages).
  c.warps = 8;
  c.block_n = c.head_dim == 64 || c.mask == AttentionMask::kFloat || c.mask == AttentionMask::kBool ? 64 : 128;
  if (block_n == 64 || block_n == 128) c.block_n = block_n;
  if (const int blocks = tuning.GetInt(backend::Knob::kFlashMinBlocks); blocks > 0) c.min_blocks = blocks;
  return c;
}

}  // namespace

bool FlashAttentionSupports(DType dtype, int64_t head_dim) {
  return (dtype == DType::kBFloat16 || dtype == DType::kFloat16 || dtype == DType::kFloat32) &&
         (head_dim == 64 || head_dim == 128);
}

int FlashConfig::block_m() const {
  if (dtype == DType::kFloat32) return 16 * thread_rows;
  if (warp_specialized) return 16 * (warps - 4);
  return wgmma ? 16 * warps : 16 * m_tiles * warps;
}

int FlashConfig::stages() const {
  if (!warp_specialized) return wgmma ? 3 : 2;  // the cp.async wgmma kernel's loop is written for three
  // Three where they fit sm_90's 227 KB a block (with Q and 1024 bytes to
  // align): all but three consumers at head dim 128 with 128 keys.
  return int64_t{2} * head_dim * (block_m() + 6 * block_n) + 1024 <= 227 * 1024 ? 3 : 2;
}

int FlashConfig::launch_registers() const { return std::min(255, 65536 / threads()) / 8 * 8; }

int FlashConfig::consumer_registers() const {
  // What the block holds at launch less the producer warpgroup's, in steps
  // of 8 (setmaxnreg's), at most 240. setmaxnreg.inc takes registers only
  // from the block's own pool (what its warps hold at launch and gave back):
  // asking for more waits forever (two consumers at head dim 64 with the
  // persistent producer's 32 once asked 240, 1024 registers past the pool).
  return std::min(240, (launch_registers() * threads() - 128 * producer_registers()) / (128 * consumers()) / 8 * 8);
}

int64_t FlashConfig::SharedBytes() const {
  // f32: Q, K and V in rows of E + 4 floats, P^T in rows of BM + 4.
  if (dtype == DType::kFloat32) return int64_t{4} * ((block_m() + 2 * block_n) * (head_dim + 4) + block_n * (block_m() + 4));
  // wgmma: and 1024 bytes to align the tiles (the barriers are static).
  return int64_t{2} * head_dim * (block_m() + 2 * stages() * block_n) + (wgmma ? 1024 : 0);
}

std::string FlashConfig::KernelName() const {
  return absl::StrCat("fb_flash_attention_e", head_dim, "_", DTypeTag(dtype), "_", backend::AttentionMaskName(mask),
                      "_n", block_n, wgmma ? absl::StrCat("_wg", warps / 4) : absl::StrCat("_w", warps),
                      warp_specialized ? "_ws" : "",
                      !wgmma && m_tiles > 1 ? absl::StrCat("_t", m_tiles) : "",
                      dtype == DType::kFloat32 && thread_rows != 4 ? absl::StrCat("_r", thread_rows) : "",
                      min_blocks > 1 ? absl::StrCat("_b", min_blocks) : "",
                      dtype != DType::kFloat32 && !positive_scale ? "_sneg" : "",
                      mask == AttentionMask::kCausal && causal_order != 1 ? absl::StrCat("_o", causal_order) : "",
                      persistent ? "_p" : "", align_end ? "_e" : "");
}

namespace {

// The tiles, warps and kernel of a problem (ChooseFlashConfig's first part).
FlashConfig ChooseFlashTiles(int64_t head_dim, DType dtype, AttentionMask mask, int arch,
                             const backend::TuningSnapshot& tuning) {
  FlashConfig c{.head_dim = static_cast<int>(head_dim), .dtype = dtype, .mask = mask};
  if (dtype == DType::kFloat32) {
    // f32 (FMA, every architecture): 256 threads, two blocks an SM (128
    // registers). Head dim 64: 8 query rows a thread (128 a block), 64 keys a
    // tile (101 KB of shared memory). Measured on the H200 (causal, GPT-2
    // small's [8, 12, 1024, 64], ms): 4 rows 0.591, with one block an SM
    // 0.571, with 32 keys 0.651; 8 rows 0.538, with 32 keys 0.609, one block
    // 0.580 (torch's SDPA 0.492). A mask's loads spill 8 rows at 64 keys
    // (and 32 keys were slower): 4 rows. Head dim 128: 4 rows (8 spill at
    // two blocks), 32 keys (75 KB; 64 would leave one block).
    c.warps = 8;
    c.thread_rows = head_dim == 64 && (mask == AttentionMask::kNone || mask == AttentionMask::kCausal) ? 8 : 4;
    c.block_n = head_dim == 64 ? 64 : 32;
    c.min_blocks = 2;
    if (const int block_n = tuning.GetInt(backend::Knob::kFlashBlockN); block_n == 32 || block_n == 64) {
      c.block_n = block_n;
    }
    if (const int blocks = tuning.GetInt(backend::Knob::kFlashMinBlocks); blocks > 0) c.min_blocks = blocks;
    return c;
  }
  if (arch == 90) return WgmmaConfig(c, /*tma=*/true, tuning);
  // 128 query rows a block, 64 keys a tile. Measured on the H200 (bf16, B 8,
  // T 2048/4096): two 16-row tiles a warp (4 warps; each K/V fragment feeds
  // two mma) against one (8 warps, Q in registers): head dim 64 201-211 ->
  // 262-272 TFLOP/s, causal 163-183 -> 175-199; head dim 128 257-268 ->
  // 278-290, but causal 199-230 -> 167-200 (at 255 registers it spills).
  // Compiled for sm_80 (this kernel's architectures other than sm_90) head
  // dim 128 spills unmasked too, so it takes one tile. Bool and float masks
  // spill with two (not measured): one.
  c.m_tiles = head_dim == 64 && (mask == AttentionMask::kNone || mask == AttentionMask::kCausal) ? 2 : 1;
  if (const int tiles = tuning.GetInt(backend::Knob::kFlashWarpTiles); tiles > 0) c.m_tiles = tiles;
  c.warps = c.m_tiles == 2 ? 4 : 8;
  const int block_n = tuning.GetInt(backend::Knob::kFlashBlockN), warps = tuning.GetInt(backend::Knob::kFlashWarps);
  if (block_n == 16 || block_n == 32 || block_n == 64 || block_n == 128) c.block_n = block_n;
  if (warps == 4 || warps == 8) c.warps = warps;
  if (const int blocks = tuning.GetInt(backend::Knob::kFlashMinBlocks); blocks > 0) c.min_blocks = blocks;
  // Each thread copies whole 16-byte chunks of a K/V tile: else the default.
  if (c.block_n * c.head_dim / 8 % c.threads() != 0) c.block_n = 64;
  return c;
}

}  // namespace

FlashConfig ChooseFlashConfig(int64_t head_dim, DType dtype, AttentionMask mask, int arch,
                              const backend::TuningSnapshot& tuning) {
  FlashConfig c = ChooseFlashTiles(head_dim, dtype, mask, arch, tuning);
  // Causal blocks start longest first over the whole grid in the f32 kernel
  // and batch by batch in the 16-bit ones (measured: fb_block_place's comment).
  if (mask == AttentionMask::kCausal) {
    const int order = tuning.GetInt(backend::Knob::kFlashCausalOrder);
    c.causal_order = order >= 1 ? order : dtype == DType::kFloat32 ? 2 : 1;
  }
  // Persistent where two consumers multiply (head dim 128): on the H100, ms,
  // B 8, T 2048 / 4096, a block per item against persistent: 0.263 / 1.011
  // -> 0.248 / 0.957, causal 0.184 / 0.603 -> 0.174 / 0.558; with three
  // (head dim 64) 0.346 / 1.285 -> 0.340 / 1.308, causal 0.258 / 0.824 ->
  // 0.263 / 0.841 (bench/experiments/flash_persistent_ab.sh).
  const int persistent = tuning.GetInt(backend::Knob::kFlashPersistent);
  c.persistent = c.warp_specialized && (persistent == 0 ? c.consumers() == 2 : persistent == 2);
  // Causal row tiles end at the last query row: the partial tile is the
  // shortest, started last, not the longest (on the H100 at head dim 64,
  // 192-row tiles, T 2048 / 4096: 0.255 / 0.826 -> 0.245 / 0.787 ms).
  c.align_end = c.warp_specialized && mask == AttentionMask::kCausal &&
                tuning.GetInt(backend::Knob::kFlashAlignEnd) != 1;
  return c;
}

std::optional<FlashConfig> FlashConfigFor(const AttentionProblem& p, int arch, const backend::TuningSnapshot& tuning) {
  if (!FlashAttentionSupports(p.dtype, p.e)) return std::nullopt;
  FlashConfig c = ChooseFlashConfig(p.e, p.dtype, p.mask, arch, tuning);
  c.positive_scale = c.dtype == DType::kFloat32 || p.scale > 0;  // f32 scales each score anyway: one kernel
  return c;
}

FlashConfig FlashCpAsyncTwin(const FlashConfig& c) {
  if (!c.warp_specialized) return c;
  FlashConfig twin = WgmmaConfig(FlashConfig{.head_dim = c.head_dim, .dtype = c.dtype, .mask = c.mask},
                                 /*tma=*/false, backend::TuningSnapshot());
  twin.positive_scale = c.positive_scale, twin.causal_order = c.causal_order;
  return twin;
}

std::vector<FlashConfig> DefaultFlashConfigs(int arch) {
  std::vector<FlashConfig> configs;
  for (int e : {64, 128}) {
    for (DType d : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
      for (AttentionMask m : {AttentionMask::kNone, AttentionMask::kCausal, AttentionMask::kBool, AttentionMask::kFloat}) {
        configs.push_back(ChooseFlashConfig(e, d, m, arch, backend::TuningSnapshot()));
      }
    }
  }
  return configs;
}

absl::StatusOr<const FlashKernel*> GetFlashKernel(const FlashConfig& config, int device, int arch) {
  static fusebox::Mutex mu;
  // Never freed: launches hold pointers into it for the process.
  static auto* kernels = new std::map<std::pair<int, std::string>, std::unique_ptr<FlashKernel>>();
  const std::string name = config.KernelName();
  {
    fusebox::MutexLock lock(&mu);
    if (auto it = kernels->find({device, name}); it != kernels->end()) return it->second.get();
  }
  auto kernel = std::make_unique<FlashKernel>(FlashKernel{.config = config, .source = FlashAttentionSource(config)});
  absl::StatusOr<std::shared_ptr<const backend::CompiledBinary>> binary =
      backend::CompileCudaSource(kernel->source, name, arch, backend::TuningSnapshot(), config.wgmma);
  if (!binary.ok()) return binary.status();
  kernel->binary = *binary;
  kernel->arch = arch;
  if (device >= 0) {
    Driver& driver = Driver::Get();
    absl::StatusOr<CUmodule> module = driver.LoadModule(device, kernel->binary->cubin);
    if (!module.ok()) return module.status();
    absl::StatusOr<CUfunction> fn = driver.GetFunction(*module, name);
    if (!fn.ok()) return fn.status();
    if (absl::Status s = driver.SetMaxDynamicSharedBytes(*fn, static_cast<int>(config.SharedBytes())); !s.ok()) return s;
    if (config.warp_specialized) {
      // The warpgroups' setmaxnreg must fit what the block holds at launch
      // (consumer_registers()), or the consumers wait forever: an error
      // rather than a hang, should ptxas give the kernel fewer registers.
      absl::StatusOr<int> registers = driver.FunctionAttribute(*fn, CU_FUNC_ATTRIBUTE_NUM_REGS);
      if (!registers.ok()) return registers.status();
      const int64_t pool = int64_t{*registers} * config.threads(),
                    asked = 128 * (config.producer_registers() + int64_t{config.consumers()} * config.consumer_registers());
      if (asked > pool) {
        return absl::InternalError(absl::StrCat("flash-attention kernel ", name, ": its warpgroups ask for ", asked,
                                                " registers (setmaxnreg) but the block holds ", pool, " (",
                                                *registers, " a thread at launch)"));
      }
    }
    kernel->function = *fn;
  }
  fusebox::MutexLock lock(&mu);
  // Two threads may compile the same config at once: the first one kept wins.
  auto [it, inserted] = kernels->try_emplace({device, name}, std::move(kernel));
  return it->second.get();
}

namespace {

// What a persistent launch on `device` needs, found once: its item counters
// (two zeroed 64-bit words: the next item, the blocks done; each launch's
// last block zeroes them again for the next, launches being in stream order)
// and the SM count (a block each).
struct PersistentDevice {
  unsigned long long* work = nullptr;
  int sms = 1;
};
absl::StatusOr<PersistentDevice> PersistentDeviceOf(int device) {
  static fusebox::Mutex mu;
  static auto* devices = new std::map<int, PersistentDevice>();
  fusebox::MutexLock lock(&mu);
  auto it = devices->find(device);
  if (it == devices->end()) {
    Driver& driver = Driver::Get();
    absl::StatusOr<CUdeviceptr> ptr = driver.MemAlloc(device, 16);
    if (!ptr.ok()) return ptr.status();
    if (absl::Status s = driver.MemsetD32Async(device, *ptr, 0, 4); !s.ok()) return s;
    it = devices->emplace(device, PersistentDevice{.work = reinterpret_cast<unsigned long long*>(*ptr),
                                                   .sms = std::max(driver.MultiprocessorCount(device).value_or(1), 1)})
             .first;
  }
  return it->second;
}

}  // namespace

absl::Status LaunchFlashAttention(int device, const FlashKernel& kernel, const AttentionProblem& p, const void* q,
                                  const void* k, const void* v, const void* mask, void* out) {
  const FlashConfig& c = kernel.config;
  if (kernel.function == nullptr || p.e != c.head_dim || p.dtype != c.dtype || p.mask != c.mask || p.l <= 0 ||
      p.s <= 0) {
    return absl::InternalError(absl::StrCat("flash attention kernel ", c.KernelName(), " cannot run ", p.ToString()));
  }
  if (p.l > (int64_t{1} << 30) || p.s > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("flash attention takes at most 2^30 queries and keys, got ",
                                                   p.ToString()));
  }
  FlashParams f{.q = q, .k = k, .v = v, .mask = mask, .o = out};
  for (int d = 0; d < backend::kAttentionBatchDims; ++d) {
    f.q_batch[d] = p.q_batch[d], f.k_batch[d] = p.k_batch[d], f.v_batch[d] = p.v_batch[d];
    f.m_batch[d] = p.m_batch[d], f.o_batch[d] = p.o_batch[d], f.batch_sizes[d] = p.batch[d];
  }
  f.q_row = p.q_row, f.k_row = p.k_row, f.v_row = p.v_row, f.m_row = p.m_row, f.m_col = p.m_col, f.o_row = p.o_row;
  f.batch = p.BatchCount();
  f.l = static_cast<int>(p.l), f.s = static_cast<int>(p.s);
  f.scale_log2 = static_cast<float>(p.scale * 1.4426950408889634);
  f.aligned = Aligned16(q, p.q_batch, p.q_row, p.dtype) && Aligned16(k, p.k_batch, p.k_row, p.dtype) &&
              Aligned16(v, p.v_batch, p.v_row, p.dtype);
  FlashWsParams ws{.a = f};
  if (c.warp_specialized) {
    std::optional<CUtensorMap> tq, tk, tv;
    if (f.aligned && (tq = OperandTensorMap(q, p, p.q_batch, p.q_row, p.l, c.block_m(), ws.q_dim)) &&
        (tk = OperandTensorMap(k, p, p.k_batch, p.k_row, p.s, c.block_n, ws.k_dim)) &&
        (tv = OperandTensorMap(v, p, p.v_batch, p.v_row, p.s, c.block_n, ws.v_dim))) {
      ws.tq = *tq, ws.tk = *tk, ws.tv = *tv;
      tma_launches.fetch_add(1, std::memory_order_relaxed);
    } else {
      twin_launches.fetch_add(1, std::memory_order_relaxed);
      absl::StatusOr<const FlashKernel*> twin = GetFlashKernel(FlashCpAsyncTwin(c), device, kernel.arch);
      if (!twin.ok()) return twin.status();
      return LaunchFlashAttention(device, **twin, p, q, k, v, mask, out);
    }
  }
  LaunchDims dims;
  dims.grid_x = static_cast<unsigned>((p.l + c.block_m() - 1) / c.block_m());
  dims.grid_y = static_cast<unsigned>(std::min<int64_t>(f.batch, 65535));
  dims.grid_z = static_cast<unsigned>((f.batch + dims.grid_y - 1) / dims.grid_y);
  if (c.persistent) {  // a block per SM (one fits: __launch_bounds__(kThreads, 1)), at most one per item
    absl::StatusOr<PersistentDevice> persistent = PersistentDeviceOf(device);
    if (!persistent.ok()) return persistent.status();
    ws.a.work = persistent->work;
    dims.grid_x = static_cast<unsigned>(std::min<int64_t>(dims.grid_x * f.batch, persistent->sms));
    dims.grid_y = dims.grid_z = 1;
  }
  dims.block_x = static_cast<unsigned>(c.threads());
  dims.shared_bytes = static_cast<unsigned>(c.SharedBytes());
  void* args[] = {c.warp_specialized ? static_cast<void*>(&ws) : static_cast<void*>(&f)};
  return Driver::Get().Launch(device, kernel.function, dims, args);
}

FlashTmaLaunches CountFlashTmaLaunches() {
  return {.tma = tma_launches.load(std::memory_order_relaxed), .twin = twin_launches.load(std::memory_order_relaxed)};
}

}  // namespace fusebox::cuda
