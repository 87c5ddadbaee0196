#include "backend/cuda/cublaslt_gemm.h"

#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tensor/mutex.h"
#include "backend/cuda/driver.h"
#include "backend/tuning.h"

namespace fusebox::backend::cuda {
namespace {

using ::fusebox::cuda::Driver;

// Split-K and stream-K algorithms want scratch; 32 MiB is what PyTorch gives
// cuBLASLt on Hopper. Allocated once per device, kept for the process.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
// What the caching allocator guarantees and cuBLASLt assumes by default.
constexpr uint32_t kMaxAlignment = 256;

// `call` is the call's source text; its name is enough for the message.
absl::Status LtError(cublasStatus_t status, absl::string_view call, const GemmProblem& p) {
  call = call.substr(0, call.find('('));
  return absl::InternalError(absl::StrCat(call, " failed for ", p.ToString(), ": ", cublasLtGetStatusName(status),
                                          " (", cublasLtGetStatusString(status), ")"));
}

#define FUSEBOX_LT(call, p)                                             \
  do {                                                                  \
    if (cublasStatus_t s_ = (call); s_ != CUBLAS_STATUS_SUCCESS) {      \
      return LtError(s_, #call, p);                                     \
    }                                                                   \
  } while (0)

absl::StatusOr<cudaDataType_t> DataType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return CUDA_R_32F;
    case DType::kBFloat16: return CUDA_R_16BF;
    case DType::kFloat16: return CUDA_R_16F;
    default: break;
  }
  return absl::InvalidArgumentError(absl::StrCat("cuBLASLt GEMM does not take ", DTypeName(dtype),
                                                 " (float32, bfloat16 or float16)"));
}

// The row-major view M (rows x cols, strides rs, cs) as a column-major
// operand whose op() is M^T (cols x rows): unit column stride means M is
// M^T stored column-major (no transpose); unit row stride means M itself is
// stored column-major and read transposed. A dim of extent 1 has no stride
// that matters, so its ld is only made legal.
absl::StatusOr<CublasLtOperand> AsTransposed(const char* name, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                                             int64_t batch_stride) {
  if (rs < 0 || cs < 0 || batch_stride < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cuBLASLt: operand ", name, " has a negative stride"));
  }
  CublasLtOperand op;
  op.batch_stride = batch_stride;
  if ((cs == 1 || cols <= 1) && (rows <= 1 || rs >= std::max<int64_t>(cols, 1))) {
    op.rows = cols, op.cols = rows;
    op.ld = rows <= 1 ? std::max<int64_t>(cols, 1) : rs;
    return op;
  }
  if ((rs == 1 || rows <= 1) && (cols <= 1 || cs >= std::max<int64_t>(rows, 1))) {
    op.transpose = true;
    op.rows = rows, op.cols = cols;
    op.ld = cols <= 1 ? std::max<int64_t>(rows, 1) : cs;
    return op;
  }
  return absl::InvalidArgumentError(absl::StrCat("cuBLASLt: operand ", name, " (", rows, " x ", cols, ", strides ", rs,
                                                 ", ", cs, ") needs one unit-stride dim and the other covering it"));
}

}  // namespace

absl::StatusOr<CublasLtShape> CublasLtShapeFor(const GemmProblem& p) {
  if (p.batch < 0 || p.m < 0 || p.n < 0 || p.k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cuBLASLt: negative size in ", p.ToString()));
  }
  if (p.batch > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("cuBLASLt: batch over int32 in ", p.ToString()));
  }
  if (p.batch > 1 && p.c_batch <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("cuBLASLt: C needs a positive batch stride in ", p.ToString()));
  }
  if (absl::StatusOr<cudaDataType_t> type = DataType(p.dtype); !type.ok()) return type.status();
  CublasLtShape shape;
  shape.batch = static_cast<int32_t>(p.batch);
  // cuBLASLt's A is B^T (n x k), its B is A^T (k x m): D = C^T (n x m).
  absl::StatusOr<CublasLtOperand> a = AsTransposed("B", p.k, p.n, p.b_row, p.b_col, p.b_batch);
  if (!a.ok()) return a.status();
  absl::StatusOr<CublasLtOperand> b = AsTransposed("A", p.m, p.k, p.a_row, p.a_col, p.a_batch);
  if (!b.ok()) return b.status();
  absl::StatusOr<CublasLtOperand> d = AsTransposed("C", p.m, p.n, p.c_row, 1, p.c_batch);
  if (!d.ok() || d->transpose) {
    return absl::InvalidArgumentError(absl::StrCat("cuBLASLt: C must be row-major with c_row >= n in ", p.ToString()));
  }
  shape.a = *a, shape.b = *b, shape.d = *d;
  return shape;
}

namespace {

cublasLtEpilogue_t Epilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kNone: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::kBiasRelu: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case GemmEpilogue::kBiasGelu: return CUBLASLT_EPILOGUE_GELU_BIAS;
    case GemmEpilogue::kRelu: return CUBLASLT_EPILOGUE_RELU;
    case GemmEpilogue::kGelu: return CUBLASLT_EPILOGUE_GELU;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// The largest power of two (up to 256) dividing the address; the heuristic
// may only pick kernels that are fine with it.
uint32_t Alignment(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  uint32_t align = kMaxAlignment;
  while (align > 1 && address % align != 0) align /= 2;
  return align;
}

// A handle and workspace per device, made on first use, never freed.
struct DeviceState {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

fusebox::Mutex devices_mu;
absl::flat_hash_map<int, DeviceState>* devices ABSL_PT_GUARDED_BY(devices_mu) = new absl::flat_hash_map<int, DeviceState>;

absl::StatusOr<DeviceState> StateFor(int device, const GemmProblem& p) {
  fusebox::MutexLock lock(&devices_mu);
  if (auto it = devices->find(device); it != devices->end()) return it->second;
  DeviceState state;
  absl::StatusOr<CUdeviceptr> workspace = Driver::Get().MemAlloc(device, kWorkspaceBytes);
  if (!workspace.ok()) return workspace.status();
  state.workspace = reinterpret_cast<void*>(*workspace);
  FUSEBOX_LT(cublasLtCreate(&state.handle), p);
  devices->emplace(device, state);
  return state;
}

// Everything cublasLtMatmul is told about a problem (Prepared keeps one per
// problem; CublasLtAlgorithm makes a throwaway one).
struct Descriptors {
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (matmul) cublasLtMatmulDescDestroy(matmul);
  }
};

template <typename T>
cublasStatus_t SetDesc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, T value) {
  return cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value));
}

absl::Status MakeLayout(const CublasLtOperand& op, cudaDataType_t type, int32_t batch, const GemmProblem& p,
                        cublasLtMatrixLayout_t* layout) {
  FUSEBOX_LT(cublasLtMatrixLayoutCreate(layout, type, static_cast<uint64_t>(op.rows), static_cast<uint64_t>(op.cols),
                                        op.ld),
             p);
  if (batch <= 1) return absl::OkStatus();
  FUSEBOX_LT(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)), p);
  FUSEBOX_LT(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &op.batch_stride,
                                              sizeof(op.batch_stride)),
             p);
  return absl::OkStatus();
}

// The pointers' alignments, as the heuristic sees them (cuBLASLt's A is our
// B; its C is our residual, its D our C).
struct Alignments {
  uint32_t a = kMaxAlignment, b = kMaxAlignment, c = kMaxAlignment, bias = kMaxAlignment, residual = kMaxAlignment;
};

absl::Status Describe(const GemmProblem& p, const CublasLtShape& shape, const void* bias, const Alignments& align,
                      Descriptors& out) {
  absl::StatusOr<cudaDataType_t> type = DataType(p.dtype);
  if (!type.ok()) return type.status();
  const cublasComputeType_t compute =
      p.dtype == DType::kFloat32 && p.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  FUSEBOX_LT(cublasLtMatmulDescCreate(&out.matmul, compute, CUDA_R_32F), p);
  FUSEBOX_LT(SetDesc(out.matmul, CUBLASLT_MATMUL_DESC_TRANSA, shape.a.transpose ? CUBLAS_OP_T : CUBLAS_OP_N), p);
  FUSEBOX_LT(SetDesc(out.matmul, CUBLASLT_MATMUL_DESC_TRANSB, shape.b.transpose ? CUBLAS_OP_T : CUBLAS_OP_N), p);
  FUSEBOX_LT(SetDesc(out.matmul, CUBLASLT_MATMUL_DESC_EPILOGUE, Epilogue(p.epilogue)), p);
  if (GemmEpilogueHasBias(p.epilogue)) {
    // One bias per row of D = C^T, i.e. per column of the row-major C; one
    // vector for the whole batch (bias batch stride left at 0).
    FUSEBOX_LT(SetDesc(out.matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias), p);
    FUSEBOX_LT(SetDesc(out.matmul, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(*type)), p);
  }
  if (absl::Status s = MakeLayout(shape.a, *type, shape.batch, p, &out.a); !s.ok()) return s;
  if (absl::Status s = MakeLayout(shape.b, *type, shape.batch, p, &out.b); !s.ok()) return s;
  if (absl::Status s = MakeLayout(shape.d, *type, shape.batch, p, &out.d); !s.ok()) return s;

  FUSEBOX_LT(cublasLtMatmulPreferenceCreate(&out.preference), p);
  const uint64_t workspace = kWorkspaceBytes;
  FUSEBOX_LT(cublasLtMatmulPreferenceSetAttribute(out.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                  sizeof(workspace)),
             p);
  const uint32_t c_align = p.residual ? align.residual : align.c;  // cuBLASLt's C: the residual, else our C
  for (auto [attr, value] : {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align.b},
                             std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align.a},
                             std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, c_align},
                             std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align.c}}) {
    FUSEBOX_LT(cublasLtMatmulPreferenceSetAttribute(out.preference, attr, &value, sizeof(value)), p);
  }
  return absl::OkStatus();
}

// The algorithm a problem runs with, per device, problem and pointer
// alignments: the fastest of the heuristic's first few, timed once.
struct Choice {
  cublasLtMatmulAlgo_t algo;
  size_t workspace_bytes = 0;
};

// How many of the heuristic's candidates the first call of a problem times;
// 1: its first choice, untimed. -1: not set in code (SetCublasLtCandidates):
// Knob::kGemmCandidates, 1 by default (on the H200 timing eight measured within the run-to-run spread of
// the heuristic's first, bench/NOTES.md session 5; as PyTorch, no timing).
std::atomic<int> gemm_candidates{-1};

// Read at a problem's first run, deep in the extern-kernel path, so from
// CurrentTuning() rather than the executable's snapshot (not plumbed through
// RunMatmul in this step); a problem keeps its choice for the process either way.
int GemmCandidates() {
  const int n = gemm_candidates.load(std::memory_order_relaxed);
  return n >= 0 ? n : backend::CurrentTuning().GetInt(backend::Knob::kGemmCandidates);
}

// The pointers a problem's first call times its candidates on.
struct Operands {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  const void* residual = nullptr;  // read as cuBLASLt's C where p.residual
};

absl::Status RunWith(cublasLtHandle_t handle, const Descriptors& desc, const Operands& op, const cublasLtMatmulAlgo_t* algo,
                     void* workspace, size_t workspace_bytes, const GemmProblem& p) {
  // Scale type f32 for every dtype. Without a residual C is not read (beta
  // 0); with one, its C is the residual in D's layout and D our fresh C, so
  // timing runs repeat the same result.
  const float alpha = 1.0f, beta = p.residual ? 1.0f : 0.0f;
  const void* c = p.residual ? op.residual : op.c;
  // cuBLASLt's A is our B: D = C^T = B^T A^T. Stream 0 is the legacy default stream.
  FUSEBOX_LT(cublasLtMatmul(handle, desc.matmul, &alpha, op.b, desc.a, op.a, desc.b, &beta, c, desc.d, op.c, desc.d,
                            algo, workspace, workspace_bytes, /*stream=*/0),
             p);
  return absl::OkStatus();
}

// The index of the fastest candidate: each runs once to warm up, then three
// times, timed apart with events; its best time counts. Candidates that fail
// to run are skipped; the heuristic's first stands if all do.
absl::StatusOr<size_t> FastestCandidate(int device, const std::vector<cublasLtMatmulHeuristicResult_t>& candidates,
                                        cublasLtHandle_t handle, const Descriptors& desc, const Operands& op,
                                        void* workspace, const GemmProblem& p) {
  constexpr int kRuns = 3;
  Driver& driver = Driver::Get();
  absl::StatusOr<CUevent> start = driver.CreateEvent(device);
  if (!start.ok()) return start.status();
  absl::StatusOr<CUevent> end = driver.CreateEvent(device);
  if (!end.ok()) {
    driver.DestroyEvent(*start);
    return end.status();
  }
  size_t best = 0;
  float best_ms = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < candidates.size(); ++i) {
    const cublasLtMatmulHeuristicResult_t& c = candidates[i];
    if (!RunWith(handle, desc, op, &c.algo, workspace, c.workspaceSize, p).ok()) continue;  // warm-up
    float ms = std::numeric_limits<float>::infinity();
    for (int r = 0; r < kRuns; ++r) {
      if (!driver.RecordEvent(device, *start).ok()) break;
      if (!RunWith(handle, desc, op, &c.algo, workspace, c.workspaceSize, p).ok()) break;
      if (!driver.RecordEvent(device, *end).ok()) break;
      absl::StatusOr<float> elapsed = driver.ElapsedMs(*start, *end);
      if (!elapsed.ok()) break;
      ms = std::min(ms, *elapsed);
    }
    if (ms < best_ms) best_ms = ms, best = i;
  }
  driver.DestroyEvent(*start);
  driver.DestroyEvent(*end);
  return best;
}
using ChoiceKey = std::array<int64_t, 22>;

// Every fact the descriptors or the algorithm depend on: a residual changes
// beta and C's alignment, so it is part of the key.
ChoiceKey KeyFor(int device, const GemmProblem& p, const Alignments& align) {
  return {device,        p.batch,      p.m,     p.n,     p.k,         static_cast<int64_t>(p.dtype), p.a_batch,
          p.a_row,       p.a_col,      p.b_batch, p.b_row, p.b_col,   p.c_batch,                     p.c_row,
          static_cast<int64_t>(p.epilogue), p.allow_tf32, align.a, align.b, align.c, align.bias, p.residual,
          align.residual};
}

// The heuristic's candidates for `desc` (at most `count`); Unimplemented when
// cuBLASLt has none.
absl::StatusOr<std::vector<cublasLtMatmulHeuristicResult_t>> Candidates(cublasLtHandle_t handle,
                                                                        const Descriptors& desc, int count,
                                                                        const GemmProblem& p) {
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(count));
  int found = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, desc.matmul, desc.a, desc.b, desc.d, desc.d,
                                                         desc.preference, count, results.data(), &found);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0)) {
    return absl::UnimplementedError(absl::StrCat("cuBLASLt has no algorithm for ", p.ToString()));
  }
  FUSEBOX_LT(status, p);
  results.resize(static_cast<size_t>(found));
  return results;
}

// A problem that has run: its descriptors (made once: building them is
// about ten cuBLASLt calls, the host time of a small GEMM) and its
// algorithm. The bias pointer lives in the matmul descriptor and changes
// from call to call: `mu` holds it from setting it until cublasLtMatmul has
// read it.
struct Prepared {
  Descriptors desc;
  Choice choice;
  fusebox::Mutex mu;
};

fusebox::Mutex prepared_mu;
absl::flat_hash_map<ChoiceKey, std::unique_ptr<Prepared>>* prepared ABSL_PT_GUARDED_BY(prepared_mu) =
    new absl::flat_hash_map<ChoiceKey, std::unique_ptr<Prepared>>;

// The problem's entry, or null before its first call.
Prepared* FindPrepared(const ChoiceKey& key) {
  fusebox::MutexLock lock(&prepared_mu);
  auto it = prepared->find(key);
  return it == prepared->end() ? nullptr : it->second.get();
}

// The first call of a problem: describes it and picks its algorithm, the
// fastest of the heuristic's first GemmCandidates() timed on the call's own
// buffers. Entries are never removed, so the pointer stays valid.
absl::StatusOr<Prepared*> Prepare(int device, const GemmProblem& p, const CublasLtShape& shape, const void* bias,
                                  const Alignments& align, const DeviceState& state, const Operands& operands) {
  auto entry = std::make_unique<Prepared>();
  if (absl::Status s = Describe(p, shape, bias, align, entry->desc); !s.ok()) return s;
  absl::StatusOr<std::vector<cublasLtMatmulHeuristicResult_t>> results =
      Candidates(state.handle, entry->desc, GemmCandidates(), p);
  if (!results.ok()) return results.status();
  size_t pick = 0;
  if (results->size() > 1) {
    absl::StatusOr<size_t> fastest =
        FastestCandidate(device, *results, state.handle, entry->desc, operands, state.workspace, p);
    if (!fastest.ok()) return fastest.status();
    pick = *fastest;
  }
  entry->choice = Choice{(*results)[pick].algo, (*results)[pick].workspaceSize};
  fusebox::MutexLock lock(&prepared_mu);
  // A racing thread may have prepared the same problem: keep the first.
  auto [it, inserted] = prepared->try_emplace(KeyFor(device, p, align), std::move(entry));
  return it->second.get();
}

}  // namespace

void SetCublasLtCandidates(int n) {
  gemm_candidates.store(std::clamp(n, 1, kMaxGemmCandidates), std::memory_order_relaxed);
}

absl::Status CublasLtGemm(int device, const GemmProblem& p, const void* a, const void* b, void* c, const void* bias,
                          const void* residual) {
  absl::StatusOr<CublasLtShape> shape = CublasLtShapeFor(p);
  if (!shape.ok()) return shape.status();
  if (p.batch == 0 || p.m == 0 || p.n == 0) return absl::OkStatus();
  if (p.k == 0) return absl::InvalidArgumentError(absl::StrCat("cuBLASLt: k of 0 in ", p.ToString()));
  if (GemmEpilogueHasBias(p.epilogue) && bias == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cuBLASLt: no bias pointer for ", p.ToString()));
  }
  if (p.residual && (residual == nullptr || residual == c)) {
    return absl::InvalidArgumentError(absl::StrCat("cuBLASLt: the residual of ", p.ToString(),
                                                   " needs its own pointer, apart from C"));
  }
  absl::StatusOr<DeviceState> state = StateFor(device, p);
  if (!state.ok()) return state.status();
  const bool has_bias = GemmEpilogueHasBias(p.epilogue);
  const Alignments align{Alignment(a), Alignment(b), Alignment(c), has_bias ? Alignment(bias) : kMaxAlignment,
                         p.residual ? Alignment(residual) : kMaxAlignment};
  const Operands operands{a, b, c, p.residual ? residual : nullptr};
  Prepared* entry = FindPrepared(KeyFor(device, p, align));
  if (entry == nullptr) {
    absl::StatusOr<Prepared*> made = Prepare(device, p, *shape, bias, align, *state, operands);
    if (!made.ok()) return made.status();
    entry = *made;
  }
  fusebox::MutexLock lock(&entry->mu);
  if (has_bias) FUSEBOX_LT(SetDesc(entry->desc.matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias), p);
  return RunWith(state->handle, entry->desc, operands, &entry->choice.algo, state->workspace,
                 entry->choice.workspace_bytes, p);
}

absl::StatusOr<std::string> CublasLtAlgorithm(int device, const GemmProblem& p) {
  absl::StatusOr<CublasLtShape> shape = CublasLtShapeFor(p);
  if (!shape.ok()) return shape.status();
  absl::StatusOr<DeviceState> state = StateFor(device, p);
  if (!state.ok()) return state.status();
  Choice choice;
  if (Prepared* entry = FindPrepared(KeyFor(device, p, Alignments{}))) {
    choice = entry->choice;  // written once, before the entry was published
  } else {
    // A stand-in bias address with the allocator's alignment: the heuristic
    // reads the pointer's value, never the memory.
    const void* bias =
        GemmEpilogueHasBias(p.epilogue) ? reinterpret_cast<const void*>(uintptr_t{kMaxAlignment}) : nullptr;
    Descriptors desc;
    if (absl::Status s = Describe(p, *shape, bias, Alignments{}, desc); !s.ok()) return s;
    absl::StatusOr<std::vector<cublasLtMatmulHeuristicResult_t>> results = Candidates(state->handle, desc, 1, p);
    if (!results.ok()) return results.status();
    choice = Choice{results->front().algo, results->front().workspaceSize};
  }
  int32_t id = 0, splitk = 0;
  uint32_t tile = 0, stages = 0, swizzle = 0;
  const cublasLtMatmulAlgo_t* algo = &choice.algo;
  FUSEBOX_LT(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), nullptr), p);
  FUSEBOX_LT(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), nullptr), p);
  FUSEBOX_LT(
      cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages), nullptr), p);
  FUSEBOX_LT(
      cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), nullptr), p);
  FUSEBOX_LT(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle, sizeof(swizzle),
                                                  nullptr),
             p);
  return absl::StrCat("algo ", id, " tile ", tile, " stages ", stages, " splitk ", splitk, " swizzle ", swizzle, " ws ",
                      choice.workspace_bytes);
}

}  // namespace fusebox::backend::cuda
