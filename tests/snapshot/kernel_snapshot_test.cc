// The kernel snapshot (tinygrad's process replay, done ahead of time): every
// kernel of the benchmark's cases (fusebox_bench, full and --quick sizes;
// gpt2_forward at its quick size only), of its --sweep grid and of a few
// data-movement programs is lowered and
// printed for both targets, without a device or a compiler, and compared
// with the committed text under tests/snapshot/kernels/ (one file per case:
// each kernel's C++ and CUDA source and its CUDA schedule). A refactoring
// that claims to keep behaviour proves it here; a change that means to alter
// kernels regenerates the files and the diff shows what changed:
//   FUSEBOX_SNAPSHOT_UPDATE=1 build/tests/snapshot_tests
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backend/cpu/cpp_printer.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/cuda/cuda_schedule.h"
#include "backend/cuda/row_spread.h"
#include "backend/extern_kernels.h"
#include "backend/kernel_passes.h"
#include "backend/lower.h"
#include "backend/online_exp_sums.h"
#include "bench/suite.h"
#include "bench/sweep.h"
#include "bench/workloads.h"
#include "frontend/capture.h"
#include "frontend/fusebox.h"
#include "fusion/pipeline.h"
#include "gtest/gtest.h"

namespace fusebox {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(FUSEBOX_TEST_DATA_DIR) / "snapshot" / "kernels";

// The snapshot is of the default kernels, whatever FUSEBOX_TUNE_* says.
const backend::TuningSnapshot& DefaultTuning() {
  static const backend::TuningSnapshot defaults;
  return defaults;
}

// One kernel as printed: a library call's description, or both targets' sources.
struct Printed {
  std::string name, launch, cpp, cuda;  // extern kernels: `cpp` holds the description
  bool is_extern = false;
  bool checks_indices = false;  // its prelude adds the index-check helpers
};

// What a case computes: its ops, called under a capture; the tensors it returns.
using Outputs = std::function<std::vector<Tensor>()>;

// The plan of what `outputs` computes, captured without running anything.
fusion::Plan PlanOf(const Outputs& outputs) {
  frontend::CaptureSession session(/*eager=*/false);
  return fusion::BuildPlan(session.Snapshot(outputs()));
}

Outputs Call(const bench::WorkloadFn& fn, const std::vector<Tensor>& inputs) {
  return [fn, inputs] { return std::vector<Tensor>{bench::Invoke(fn, inputs)}; };
}

// Every kernel of the plan, printed for both targets.
std::vector<Printed> PrintPlan(const Outputs& outputs) {
  const fusion::Plan plan = PlanOf(outputs);
  std::vector<Printed> printed;
  for (const fusion::KernelGroup& group : plan.kernels) {
    if (group.kind == fusion::KernelKind::kExtern) {
      const std::string source =
          backend::DescribeExternKernel(plan.graph, fusion::ChainOf(plan.graph, group), group.name, 90, DefaultTuning());
      printed.push_back({group.name, "", source, "", true});
      continue;
    }
    backend::Kernel k = backend::LowerKernel(plan, group, DefaultTuning());
    k.cuda_arch = 90;
    printed.push_back({group.name, backend::ChooseCudaSchedule(k, DefaultTuning()).ToString(), backend::cpu::PrintCpp(k),
                       backend::PrintCuda(k, DefaultTuning()), false, k.checks_indices});
  }
  return printed;
}

// The case name as a file name: letters, digits, '-', '_' and '.'.
std::string FileName(const std::string& name) {
  std::string s;
  for (char c : name) s.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_');
  return s + ".txt";
}

// Data-movement programs the bench does not run (fixed shapes and dtypes):
// indirect loads (embedding, gather, index_select with int32 indices) and
// cat's masked loads, each fused with pointwise producers or consumers, and
// a reduction over an embedding (stored by a kernel of its own first); and
// cross_entropy over rows too long for registers (its logsumexp folds the
// exp sums online, read once).
struct MoveCase {
  std::string name;
  bench::WorkloadFn fn;
  std::vector<Tensor> inputs;
};
std::vector<MoveCase> MoveCases() {
  constexpr DType kF32 = DType::kFloat32, kBF16 = DType::kBFloat16, kF16 = DType::kFloat16;
  auto e = [](const Shape& s, DType dtype) { return Tensor::empty(s, dtype); };
  return {
      {"embedding_add", bench::Fn3{[](const Tensor& i, const Tensor& w, const Tensor& pos) { return embedding(i, w) + pos; }},
       {e({8, 16}, DType::kInt64), e({1000, 64}, kF32), e({16, 64}, kF32)}},
      {"gather_dim1_tanh", bench::Fn2{[](const Tensor& x, const Tensor& i) { return tanh(gather(x, 1, i)) * 2; }},
       {e({64, 100}, kF32), e({64, 10}, DType::kInt64)}},
      {"cat3_dim1_of_producers",
       bench::Fn3{[](const Tensor& a, const Tensor& b, const Tensor& c) { return cat({a * 2, b, exp(c)}, 1); }},
       {e({4, 3, 32}, kBF16), e({4, 5, 32}, kBF16), e({4, 7, 32}, kF32)}},
      {"index_select_int32", bench::Fn2{[](const Tensor& x, const Tensor& i) { return index_select(x, 0, i); }},
       {e({128, 256}, kF16), e({50}, DType::kInt32)}},
      {"sum_of_embedding", bench::Fn2{[](const Tensor& i, const Tensor& w) { return sum(embedding(i, w) * 3, -1); }},
       {e({7}, DType::kInt64), e({10, 33}, kF32)}},
      {"cross_entropy_long_rows", bench::Fn2{[](const Tensor& x, const Tensor& t) { return cross_entropy(x, t); }},
       {e({4, 50304}, kBF16), e({4}, DType::kInt64)}},
  };
}

// Calls fn(file name, outputs) for every case of the corpus: the suite's
// (full and quick sizes), the sweep grid's and the data-movement ones.
void ForEachCase(const std::function<void(const std::string&, const Outputs&)>& fn) {
  for (bool quick : {false, true}) {
    for (const bench::Case& c : bench::SuiteCases(quick)) {
      const std::string file = FileName(absl::StrCat("suite_", c.name, "_", ShapeToString(c.shape), "_",
                                                     DTypeName(c.dtype), c.epilogue_fusion ? "" : "_no_epilogue",
                                                     c.gpt2 ? absl::StrCat("_", c.label) : ""));
      if (c.gpt2) {
        // GPT-2 small's rows are left out: 88 kernels each (megabytes of text
        // for the four) of the kernels the tiny rows have per layer, and
        // its 124M parameters take seconds to draw.
        if (quick) {
          const gpt2::GPT model(c.gpt2->config, Device::cpu(), c.dtype);
          const Tensor idx = Tensor::empty(c.shape, DType::kInt64);
          fn(file, [&] {
            const gpt2::GPTOutput out = model(idx, idx);
            return std::vector<Tensor>{out.logits, out.loss};
          });
        }
        continue;
      }
      std::vector<Tensor> inputs;
      for (const Shape& s : bench::InputShapes(*c.workload, c.shape)) inputs.push_back(Tensor::empty(s, c.dtype));
      set_matmul_epilogue_fusion(c.epilogue_fusion);
      fn(file, Call(c.workload->fn, inputs));
      set_matmul_epilogue_fusion(true);
    }
  }
  for (const bench::SweepCase& c : bench::SweepCases(/*quick=*/false)) {
    fn(FileName("sweep_" + c.name()),
       Call(bench::SweepFunction(c), bench::MakeSweepInputs(c, Device::cpu(), 0, /*uninitialized=*/true)));
  }
  for (const MoveCase& c : MoveCases()) fn(FileName("move_" + c.name), Call(c.fn, c.inputs));
}

// The lines every source starts with (the printers' helper functions), so
// that each case's file holds what is its own.
std::string CommonPrefix(const std::vector<const std::string*>& sources) {
  if (sources.empty()) return "";
  std::string prefix = *sources[0];
  for (const std::string* s : sources) {
    size_t n = 0;
    while (n < prefix.size() && n < s->size() && prefix[n] == (*s)[n]) ++n;
    prefix.resize(n);
  }
  return prefix.substr(0, prefix.rfind('\n') + 1);  // whole lines
}

std::string StripPrefix(const std::string& source, const std::string& prefix, const char* label = "the prelude") {
  return source.starts_with(prefix) ? absl::StrCat("(", label, ")\n", source.substr(prefix.size())) : source;
}


// Case file name -> printed kernels, over the whole corpus, and the
// preludes: _prelude_cpp.txt and _prelude_cuda.txt, and for the kernels that
// check indices (whose prelude goes on with the index-check helpers)
// _prelude_index_check_cpp.txt and _prelude_index_check_cuda.txt.
std::map<std::string, std::string> Corpus() {
  std::map<std::string, std::vector<Printed>> cases;
  ForEachCase([&](const std::string& file, const Outputs& outputs) {
    cases[file] = PrintPlan(outputs);
  });
  std::vector<const std::string*> cpp[2], cuda[2];  // by checks_indices
  for (const auto& [file, kernels] : cases) {
    for (const Printed& k : kernels) {
      if (k.is_extern) continue;
      cpp[k.checks_indices].push_back(&k.cpp);
      cuda[k.checks_indices].push_back(&k.cuda);
    }
  }
  std::map<std::string, std::string> corpus;
  const std::string cpp_prelude[2] = {CommonPrefix(cpp[0]), CommonPrefix(cpp[1])};
  const std::string cuda_prelude[2] = {CommonPrefix(cuda[0]), CommonPrefix(cuda[1])};
  const char* const label[2] = {"the prelude", "the index-check prelude"};
  const char* const stem[2] = {"_prelude_", "_prelude_index_check_"};
  for (int checks : {0, 1}) {
    if (cpp[checks].empty()) continue;
    corpus[absl::StrCat(stem[checks], "cpp.txt")] = cpp_prelude[checks];
    corpus[absl::StrCat(stem[checks], "cuda.txt")] = cuda_prelude[checks];
  }
  for (const auto& [file, kernels] : cases) {
    std::string& text = corpus[file];
    for (const Printed& k : kernels) {
      if (k.is_extern) {
        absl::StrAppend(&text, "=== ", k.name, "\n", k.cpp, "\n");
      } else {
        const int c = k.checks_indices;
        absl::StrAppend(&text, "=== ", k.name, "\n--- cuda schedule: ", k.launch, "\n--- cpp\n",
                        StripPrefix(k.cpp, cpp_prelude[c], label[c]), "--- cuda\n",
                        StripPrefix(k.cuda, cuda_prelude[c], label[c]));
      }
    }
  }
  return corpus;
}

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The first line where `got` and `want` differ, with a few lines around it.
std::string FirstDifference(const std::string& want, const std::string& got) {
  const std::vector<std::string> a = absl::StrSplit(want, '\n'), b = absl::StrSplit(got, '\n');
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  std::string s = absl::StrCat("first difference at line ", i + 1, ":\n");
  for (size_t j = i; j < i + 4; ++j) {
    if (j < a.size()) absl::StrAppend(&s, "  snapshot: ", a[j], "\n");
    if (j < b.size()) absl::StrAppend(&s, "  now:      ", b[j], "\n");
  }
  return s;
}

TEST(KernelSnapshot, EveryKernelMatchesTheCommittedText) {
  const std::map<std::string, std::string> corpus = Corpus();
  ASSERT_GT(corpus.size(), 100u);
  if (std::getenv("FUSEBOX_SNAPSHOT_UPDATE")) {
    fs::remove_all(kDir);
    fs::create_directories(kDir);
    for (const auto& [file, text] : corpus) std::ofstream(kDir / file) << text;
    GTEST_SKIP() << "wrote " << corpus.size() << " snapshot files to " << kDir;
  }
  ASSERT_TRUE(fs::is_directory(kDir)) << kDir << " is missing: run with FUSEBOX_SNAPSHOT_UPDATE=1";
  std::set<std::string> committed;
  for (const fs::directory_entry& e : fs::directory_iterator(kDir)) committed.insert(e.path().filename().string());
  int changed = 0;
  for (const auto& [file, text] : corpus) {
    committed.erase(file);
    if (!fs::exists(kDir / file)) {
      ADD_FAILURE() << file << ": a case with no snapshot (FUSEBOX_SNAPSHOT_UPDATE=1 writes it)";
      continue;
    }
    const std::string want = Read(kDir / file);
    if (want != text && ++changed <= 10) ADD_FAILURE() << file << ": kernels changed; " << FirstDifference(want, text);
  }
  EXPECT_EQ(changed, 0) << changed << " of " << corpus.size()
                        << " cases print other kernels than their snapshot; if that is meant, regenerate with "
                           "FUSEBOX_SNAPSHOT_UPDATE=1 and commit the diff";
  EXPECT_TRUE(committed.empty()) << "snapshot files of no case: " << absl::StrJoin(committed, ", ");
}

// The kernel's schedule kinds for each way of spreading rows.
bool KindFitsStrategy(backend::CudaScheduleKind kind, backend::RowStrategy strategy) {
  using K = backend::CudaScheduleKind;
  switch (strategy) {
    case backend::RowStrategy::kBlockPerRow: return kind == K::kBlockPerRow || kind == K::kCluster;
    case backend::RowStrategy::kWarpPerRow: return kind == K::kWarpPerRow;
    case backend::RowStrategy::kThreadPerRow:
      return kind == K::kThreadPerRow || kind == K::kColumnTiles || kind == K::kOuterTiles;
  }
  return false;
}

// The schedule launches every kernel of the corpus as the printer's rules
// say (cuda_printer.h, row_layout.h), given the spread it chose first from
// the kernel IR's neutral facts (row_spread.h): the launch reads it, not them.
TEST(CudaSchedule, AgreesWithThePrintersRules) {
  int kernels = 0, splits = 0, multi_pass_splits = 0, tiles = 0, online_rows = 0;
  ForEachCase([&](const std::string& file, const Outputs& outputs) {
    const fusion::Plan plan = PlanOf(outputs);
    for (const fusion::KernelGroup& group : plan.kernels) {
      if (group.kind == fusion::KernelKind::kExtern) continue;
      const backend::Kernel k = backend::LowerKernel(plan, group, DefaultTuning());
      const backend::CudaSchedule s = backend::ChooseCudaSchedule(k, DefaultTuning());
      const backend::CudaRowSpread& spread = s.spread;
      ++kernels;
      SCOPED_TRACE(file + ": " + k.name + ": " + s.ToString());
      // The spread follows from the neutral facts: column reductions take a
      // thread per row, other rows a warp up to Knob::kWarpRowLimit, else a
      // block; only static rows split, single-pass ones with no per-element
      // stores, or columns of any passes (a launch each).
      EXPECT_EQ(spread, backend::ChooseCudaRowSpread(k, DefaultTuning()));
      if (k.is_reduction()) {
        EXPECT_TRUE(KindFitsStrategy(s.kind, spread.strategy));
        EXPECT_EQ(spread.strategy == backend::RowStrategy::kThreadPerRow, k.is_column_reduction());
        if (!k.is_column_reduction()) {
          EXPECT_EQ(spread.strategy == backend::RowStrategy::kWarpPerRow,
                    k.row_length <= DefaultTuning().Get(backend::Knob::kWarpRowLimit));
        }
      }
      if (spread.split > 1) {
        ++splits;
        EXPECT_TRUE(k.kind == fusion::KernelKind::kReduction && !k.dynamic_extent);
        // Several loops over a row split only over columns, a launch per pass.
        const bool single = k.passes.size() == 1 && k.elementwise.empty();
        if (!single) ++multi_pass_splits;
        EXPECT_TRUE(single || spread.strategy == backend::RowStrategy::kThreadPerRow);
        // One launch per pass the CUDA passes leave (online exp sums fold
        // into their max's).
        const backend::Kernel printed =
            backend::RunKernelPasses(k, backend::CudaKernelPasses(), &s, DefaultTuning());
        EXPECT_EQ(s.partial_launches, static_cast<int>(printed.passes.size()));
        EXPECT_EQ(s.online_exp_sums, printed.passes.size() < k.passes.size());
      } else {
        EXPECT_EQ(spread.split, 0) << "no split is 0";
      }
      if (spread.column_tiles) {
        ++tiles;
        EXPECT_EQ(spread.strategy, backend::RowStrategy::kThreadPerRow);
        EXPECT_EQ(s.kind, backend::CudaScheduleKind::kColumnTiles);
      }
      const bool rows = backend::UsesCudaRowLayout(k, spread);
      // Rows that fold their exp sums online are laid out as the folded
      // kernel (read once); the kernel passes fold them.
      const backend::Kernel laid = rows && s.online_exp_sums ? backend::FoldExpSumsOnline(k) : k;
      if (rows && s.online_exp_sums) {
        ++online_rows;
        EXPECT_EQ(laid.passes.size(), 1u);
        EXPECT_TRUE(laid.elementwise.empty());
        EXPECT_LT(laid.passes.size(), k.passes.size());
        EXPECT_EQ(backend::RunKernelPasses(k, backend::CudaKernelPasses(), &s, DefaultTuning()).passes.size(), 1u);
      }
      EXPECT_EQ(s.block, backend::CudaBlockSize(laid, spread, DefaultTuning()));
      EXPECT_EQ(s.rows.has_value(), rows);
      const backend::CudaRowLayout layout =
          rows ? backend::ChooseCudaRowLayout(laid, spread, DefaultTuning()) : backend::CudaRowLayout{};
      EXPECT_EQ(s.shared_bytes, rows ? layout.shared_bytes : 0);
      // Warp rows: every thread of a block is one of its rows' L lanes.
      if (s.kind == backend::CudaScheduleKind::kWarpPerRow) {
        EXPECT_EQ(s.per_block * layout.threads_per_row, s.block);
        EXPECT_EQ(s.per_block, layout.rows_per_block);
      }
      const int sms = 132;
      const int64_t cap = rows && layout.grid_stride ? int64_t{sms} * DefaultTuning().Get(backend::Knob::kLongRowBlocks) : 0;
      for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{100003}, k.Iterations({})}) {
        if (spread.split > 1 && n != k.Iterations({})) continue;  // split kernels never run other sizes
        const int64_t grid = s.Grid(n, sms);
        EXPECT_GE(grid, 1) << n << " iterations";
        if (cap > 0) EXPECT_LE(grid, cap) << n << " iterations";
        if (s.fixed_grid == 0 && cap == 0) EXPECT_GE(grid * s.per_block, n) << "every iteration has a block";
      }
      if (spread.split > 1) {
        EXPECT_EQ(s.partial_block, backend::CudaPartialBlockSize(k, spread, DefaultTuning()));
        EXPECT_EQ(s.combine_grid, backend::CudaCombineGridSize(k, spread));
      }
      // The executable looks up <name>_partial, <name>_partial1, ... exactly
      // where the schedule splits, one per partial launch.
      const std::string source = backend::PrintCuda(k, s, DefaultTuning());
      EXPECT_EQ(source.find(" " + k.name + "_partial(") != std::string::npos, spread.split > 1);
      for (int p = 1; p <= s.partial_launches; ++p) {
        EXPECT_EQ(source.find(absl::StrCat(" ", k.name, "_partial", p, "(")) != std::string::npos,
                  p < s.partial_launches) << "partial kernel " << p;
      }
    }
  });
  EXPECT_GT(kernels, 200);
  EXPECT_GT(splits, 0);
  EXPECT_GT(multi_pass_splits, 0);
  EXPECT_GT(tiles, 0);
  EXPECT_GT(online_rows, 0);
}

// The snapshot can fail: a kernel printed differently is caught.
TEST(KernelSnapshot, ADifferentKernelIsCaught) {
  const std::vector<Tensor> x = {Tensor::empty({33, 17}, DType::kFloat32)};
  const std::vector<Printed> a = PrintPlan(Call(bench::Fn1{[](const Tensor& t) { return exp(t); }}, x));
  const std::vector<Printed> b = PrintPlan(Call(bench::Fn1{[](const Tensor& t) { return log(t); }}, x));
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_NE(a[0].cuda, b[0].cuda);
  EXPECT_NE(a[0].cpp, b[0].cpp);
  const std::string prelude = CommonPrefix({&a[0].cuda, &b[0].cuda});
  EXPECT_TRUE(StripPrefix(a[0].cuda, prelude).starts_with("(the prelude)\n"));
  EXPECT_NE(FirstDifference(a[0].cuda, b[0].cuda).find("first difference at line"), std::string::npos);
}

}  // namespace
}  // namespace fusebox
