// fusebox_fuzz: long differential fuzz runs from the command line.
//   fusebox_fuzz --seed 1 --count 10000 --device cuda --modes eager,compiled,cached,dynamic,auto-dynamic,replay
//                [--minimize] [--palette 1,2,3,5] [--exclude zero-size,zero-dim,mixed-dtype,alias,must-fail,matmul,size1-reduction,float-condition] [--max-steps 6]
//                [--data-movement] (also cat, stack, chunk, split, gather, index_select: GenOptions::data_movement)
//                [--model-ops] (also sin ... sign, clamp, masked_fill, tril/triu: GenOptions::model_ops)
// Prints each finding (seed, mode, what failed), with --minimize a short C++
// repro, and the clean programs per mode; exits 1 when anything was found.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "tests/fuzz/check.h"

using namespace fusebox;
using namespace fusebox::fuzz;

int main(int argc, char** argv) {
  uint64_t seed = 1;
  int64_t count = 100;
  Device device = Device::cpu();
  std::vector<Mode> modes(std::begin(kAllModes), std::end(kAllModes));
  bool minimize = false;
  GenOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--seed") {
      seed = std::strtoull(v, nullptr, 10), ++i;
    } else if (a == "--count") {
      count = std::strtoll(v, nullptr, 10), ++i;
    } else if (a == "--device") {
      device = std::string(v) == "cuda" ? Device::cuda() : Device::cpu(), ++i;
    } else if (a == "--max-steps") {
      options.max_steps = std::atoi(v), ++i;
    } else if (a == "--palette") {  // the sizes dims are drawn from (fuzz_tests: 1,2,3,5)
      options.palette.clear();
      for (const std::string& n : std::vector<std::string>(absl::StrSplit(v, ','))) options.palette.push_back(std::stoll(n));
      ++i;
    } else if (a == "--modes") {
      modes.clear();
      for (const std::string& m : std::vector<std::string>(absl::StrSplit(v, ','))) {
        Mode mode;
        if (!ParseMode(m, &mode)) {
          std::fprintf(stderr, "unknown mode '%s'\n", m.c_str());
          return 2;
        }
        modes.push_back(mode);
      }
      ++i;
    } else if (a == "--exclude") {
      if (!ParseExclusions(v, &options.exclude)) {
        std::fprintf(stderr, "unknown class in '%s'\n", v);
        return 2;
      }
      ++i;
    } else if (a == "--data-movement") {
      options.data_movement = true;
    } else if (a == "--model-ops") {
      options.model_ops = true;
    } else if (a == "--minimize") {
      minimize = true;
    } else {
      std::fprintf(stderr, "usage: %s --seed N --count N --device cpu|cuda --modes a,b --exclude a,b --data-movement --model-ops --minimize\n", argv[0]);
      return 2;
    }
  }
  const RunSummary sum = RunMany(seed, count, modes, device, options, /*verbose=*/true);
  for (const Finding& f : sum.findings) {
    std::printf("FINDING seed %llu mode %s: %s: %s\n", static_cast<unsigned long long>(f.seed), ModeName(f.mode),
                f.outcome.kind.c_str(), f.outcome.detail.c_str());
    if (!minimize) continue;
    const Program p = Minimize(Generate(f.seed, options), [&](const Program& c) {
      return RunIsolated(c, f.mode, device).kind == f.outcome.kind;
    });
    const Outcome again = RunIsolated(p, f.mode, device);
    std::printf("%s\n%s\n", ProgramText(p).c_str(), Repro(p, f.mode, device, again).c_str());
  }
  std::printf("programs: %lld (%lld must fail)\n", static_cast<long long>(count), static_cast<long long>(sum.must_fail));
  for (Mode m : modes) std::printf("  %-12s clean %lld\n", ModeName(m), static_cast<long long>(sum.clean[static_cast<int>(m)]));
  std::printf("findings: %zu\n", sum.findings.size());
  return sum.findings.empty() ? 0 : 1;
}
