// The kernel snapshot (tinygrad's process replay, done ahead of time): every
// kernel of the benchmark's cases (fusebox_bench, full and --quick sizes) and
// of its --sweep grid is lowered and printed for both targets, without a
// device or a compiler, and compared with the committed text under
// tests/snapshot/kernels/ (one file per case: each kernel's C++ and CUDA
// source and its CUDA launch geometry). A refactoring that claims to keep
// behaviour proves it here; a change that means to alter kernels regenerates
// the files and the diff shows what changed:
//   FUSEBOX_SNAPSHOT_UPDATE=1 build/tests/snapshot_tests
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backend/cpu/cpp_printer.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/cuda/row_layout.h"
#include "backend/extern_kernels.h"
#include "backend/lower.h"
#include "bench/suite.h"
#include "bench/sweep.h"
#include "bench/workloads.h"
#include "frontend/capture.h"
#include "fusion/pipeline.h"
#include "gtest/gtest.h"

namespace fusebox {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(FUSEBOX_TEST_DATA_DIR) / "snapshot" / "kernels";

std::string Launch(const backend::Kernel& k) {
  std::string s = absl::StrCat("block ", backend::CudaBlockSize(k));
  if (k.split > 1) absl::StrAppend(&s, ", split ", k.split, " (partial block ", backend::CudaPartialBlockSize(k), ")");
  if (backend::UsesCudaRowLayout(k)) {
    const backend::CudaRowLayout l = backend::ChooseCudaRowLayout(k);
    absl::StrAppend(&s, "; row layout: threads/row ", l.threads_per_row, ", block ", l.block_size, ", rows/block ",
                    l.rows_per_block, ", V ", l.vector_width, ", on chip ", l.on_chip, ", groups ", l.groups,
                    ", grid stride ", l.grid_stride, ", shared groups ", l.shared_groups, ", shared bytes ",
                    l.shared_bytes, ", min blocks ", l.min_blocks);
  }
  return s;
}

// One kernel as printed: a library call's description, or both targets' sources.
struct Printed {
  std::string name, launch, cpp, cuda;  // extern kernels: `cpp` holds the description
  bool is_extern = false;
};

// Every kernel of fn(inputs)'s plan, printed for both targets.
std::vector<Printed> PrintPlan(const bench::WorkloadFn& fn, const std::vector<Tensor>& inputs) {
  frontend::CaptureSession session(/*eager=*/false);
  const Tensor out = bench::Invoke(fn, inputs);
  const fusion::Plan plan = fusion::BuildPlan(session.Snapshot({out}));
  std::vector<Printed> printed;
  for (const fusion::KernelGroup& group : plan.kernels) {
    if (group.kind == fusion::KernelKind::kExtern) {
      printed.push_back({group.name, "", backend::DescribeExternKernel(plan.graph, group.outputs.at(0), group.name), "",
                         true});
      continue;
    }
    backend::Kernel k = backend::LowerKernel(plan, group);
    k.cuda_arch = 90;
    printed.push_back({group.name, Launch(k), backend::cpu::PrintCpp(k), backend::PrintCuda(k)});
  }
  return printed;
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

std::string StripPrefix(const std::string& source, const std::string& prefix) {
  return source.starts_with(prefix) ? absl::StrCat("(the prelude)\n", source.substr(prefix.size())) : source;
}

// The case name as a file name: letters, digits, '-', '_' and '.'.
std::string FileName(const std::string& name) {
  std::string s;
  for (char c : name) s.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_');
  return s + ".txt";
}

// Case file name -> printed kernels, over the whole corpus, and the two
// preludes (files _prelude_cpp.txt and _prelude_cuda.txt).
std::map<std::string, std::string> Corpus() {
  std::map<std::string, std::vector<Printed>> cases;
  for (bool quick : {false, true}) {
    for (const bench::Case& c : bench::SuiteCases(quick)) {
      std::vector<Tensor> inputs;
      for (const Shape& s : bench::InputShapes(*c.workload, c.shape)) inputs.push_back(Tensor::empty(s, c.dtype));
      set_matmul_epilogue_fusion(c.epilogue_fusion);
      const std::string name = absl::StrCat("suite_", c.name, "_", ShapeToString(c.shape), "_", DTypeName(c.dtype),
                                            c.epilogue_fusion ? "" : "_no_epilogue");
      cases[FileName(name)] = PrintPlan(c.workload->fn, inputs);
      set_matmul_epilogue_fusion(true);
    }
  }
  for (const bench::SweepCase& c : bench::SweepCases(/*quick=*/false)) {
    const std::vector<Tensor> inputs = bench::MakeSweepInputs(c, Device::cpu(), 0, /*uninitialized=*/true);
    cases[FileName("sweep_" + c.name())] = PrintPlan(bench::SweepFunction(c), inputs);
  }
  std::vector<const std::string*> cpp, cuda;
  for (const auto& [file, kernels] : cases) {
    for (const Printed& k : kernels) {
      if (k.is_extern) continue;
      cpp.push_back(&k.cpp);
      cuda.push_back(&k.cuda);
    }
  }
  std::map<std::string, std::string> corpus;
  const std::string cpp_prelude = CommonPrefix(cpp), cuda_prelude = CommonPrefix(cuda);
  corpus["_prelude_cpp.txt"] = cpp_prelude;
  corpus["_prelude_cuda.txt"] = cuda_prelude;
  for (const auto& [file, kernels] : cases) {
    std::string& text = corpus[file];
    for (const Printed& k : kernels) {
      if (k.is_extern) {
        absl::StrAppend(&text, "=== ", k.name, "\n", k.cpp, "\n");
      } else {
        absl::StrAppend(&text, "=== ", k.name, "\n--- cuda launch: ", k.launch, "\n--- cpp\n",
                        StripPrefix(k.cpp, cpp_prelude), "--- cuda\n", StripPrefix(k.cuda, cuda_prelude));
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

// The snapshot can fail: a kernel printed differently is caught.
TEST(KernelSnapshot, ADifferentKernelIsCaught) {
  const std::vector<Tensor> x = {Tensor::empty({33, 17}, DType::kFloat32)};
  const std::vector<Printed> a = PrintPlan(bench::Fn1{[](const Tensor& t) { return exp(t); }}, x);
  const std::vector<Printed> b = PrintPlan(bench::Fn1{[](const Tensor& t) { return log(t); }}, x);
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
