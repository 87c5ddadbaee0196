#include "backend/cpu/cascade_pass.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "backend/c_printer.h"

namespace fusebox::backend::cpu {
namespace {

std::string Temp(int t) { return absl::StrCat("t", t); }
std::string Lanes(const Accumulator& a) { return absl::StrCat("t", a.temp, "_lane"); }
// Level k (1-based) folds block results (k = 1) or level k - 1's.
std::string Level(const Accumulator& a, int k) { return absl::StrCat("t", a.temp, "_up", k); }

}  // namespace

bool UsesCascade(const Kernel& kernel, const Pass& pass) {
  return kernel.row_length > kCascadeLaneChain && std::any_of(pass.accumulators.begin(), pass.accumulators.end(), RoundsEachFold);
}

std::string PrintCascadePass(const Kernel& kernel, const Pass& pass,
                             const std::function<const char*(graph::Op)>& op_template) {
  const int64_t n = kernel.row_length, block = kCascadeLanes * kCascadeLaneChain;
  const std::string row = absl::StrCat(n, "LL"), width = absl::StrCat(block, "LL");
  // Levels between the blocks and the accumulator, so that none folds more
  // than kCascadeFanIn values (the accumulator itself is the last).
  int levels = 0;
  for (int64_t reach = kCascadeFanIn; reach < (n + block - 1) / block; reach *= kCascadeFanIn) ++levels;
  std::vector<const Accumulator*> cascaded;
  for (const Accumulator& a : pass.accumulators) {
    if (RoundsEachFold(a)) cascaded.push_back(&a);
  }
  auto fold = [&](const Accumulator& a, const std::string& into, const std::string& value) {
    return absl::StrCat(into, " = ", absl::Substitute(op_template(a.op), into, value), ";");
  };
  auto above = [&](const Accumulator& a, int k) { return k < levels ? Level(a, k + 1) : Temp(a.temp); };
  // The pass body and every fold, with the cascaded ones into lane `lane`.
  auto element = [&](const std::string& lane, const std::string& indent) {
    std::string out = CPrinter::Statements(kernel, pass.body, op_template, indent);
    for (const Accumulator& a : pass.accumulators) {
      if (RoundsEachFold(a)) {
        absl::StrAppend(&out, indent, fold(a, absl::StrCat(Lanes(a), "[", lane, "]"), Temp(a.value)), "\n");
      } else {
        absl::StrAppend(&out, CPrinter::AccumulateStep(a, op_template(a.op), Temp(a.value), "(long long)j", indent));
      }
    }
    return out;
  };

  std::string out;
  for (const Accumulator& a : pass.accumulators) absl::StrAppend(&out, CPrinter::AccumulatorDecl(a, "    "));
  absl::StrAppend(&out, "    {\n");
  for (const Accumulator* a : cascaded) {
    for (int k = 1; k <= levels; ++k) {
      absl::StrAppend(&out, "      ", ComputeCType(a->dtype), " ", Level(*a, k), " = ", CPrinter::IdentityLiteral(*a),
                      ";\n");
    }
  }
  absl::StrAppend(&out, "      for (long long jb = 0, fb_block = 1; jb < ", row, "; jb += ", width, ", ++fb_block) {\n",
                  "        const long long je = jb + ", width, " < ", row, " ? jb + ", width, " : ", row, ";\n");
  for (const Accumulator* a : cascaded) {
    absl::StrAppend(&out, "        ", ComputeCType(a->dtype), " ", Lanes(*a), "[", kCascadeLanes, "];\n",
                    "        for (int l = 0; l < ", kCascadeLanes, "; ++l) ", Lanes(*a), "[l] = ",
                    CPrinter::IdentityLiteral(*a), ";\n");
  }
  // Independent lanes: no reassociation the compiler could not do itself,
  // so they vectorize without -ffast-math.
  absl::StrAppend(&out, "        long long jv = jb;\n", "        for (; jv + ", kCascadeLanes, " <= je; jv += ",
                  kCascadeLanes, ") {\n", "          for (int l = 0; l < ", kCascadeLanes, "; ++l) {\n",
                  "            const long long j = jv + l;\n", element("l", "            "), "          }\n",
                  "        }\n");
  if (n % kCascadeLanes != 0) {  // the row's last elements, in the last block
    absl::StrAppend(&out, "        for (long long j = jv; j < je; ++j) {\n", element("0", "          "), "        }\n");
  }
  for (const Accumulator* a : cascaded) {
    const std::string lane = Lanes(*a);
    absl::StrAppend(&out, "        for (int w = ", kCascadeLanes / 2, "; w > 0; w /= 2) for (int l = 0; l < w; ++l) ",
                    fold(*a, lane + "[l]", lane + "[l + w]"), "\n", "        ",
                    fold(*a, levels > 0 ? Level(*a, 1) : Temp(a->temp), lane + "[0]"), "\n");
  }
  int64_t every = 1;
  for (int k = 1; k <= levels; ++k) {
    every *= kCascadeFanIn;
    absl::StrAppend(&out, "        if (fb_block % ", every, " == 0) {\n");
    for (const Accumulator* a : cascaded) {
      absl::StrAppend(&out, "          ", fold(*a, above(*a, k), Level(*a, k)), " ", Level(*a, k), " = ",
                      CPrinter::IdentityLiteral(*a), ";\n");
    }
    absl::StrAppend(&out, "        }\n");
  }
  absl::StrAppend(&out, "      }\n");
  for (int k = 1; k <= levels; ++k) {
    for (const Accumulator* a : cascaded) absl::StrAppend(&out, "      ", fold(*a, above(*a, k), Level(*a, k)), "\n");
  }
  absl::StrAppend(&out, "    }\n");
  return out;
}

}  // namespace fusebox::backend::cpu
