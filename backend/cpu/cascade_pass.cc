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

void PrintCascadePass(CodeWriter& w, const Kernel& kernel, const Pass& pass,
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
  auto element = [&](const std::string& lane) {
    CPrinter::Statements(w, kernel, pass.body, op_template);
    for (const Accumulator& a : pass.accumulators) {
      if (RoundsEachFold(a)) {
        w.Line(fold(a, absl::StrCat(Lanes(a), "[", lane, "]"), Temp(a.value)));
      } else {
        CPrinter::AccumulateStep(w, a, op_template(a.op), Temp(a.value), "(long long)j");
      }
    }
  };

  for (const Accumulator& a : pass.accumulators) CPrinter::AccumulatorDecl(w, a);
  auto scope = w.Block();
  for (const Accumulator* a : cascaded) {
    for (int k = 1; k <= levels; ++k) {
      w.Line(ComputeCType(a->dtype), " ", Level(*a, k), " = ", CPrinter::IdentityLiteral(*a), ";");
    }
  }
  {
    auto blocks = w.Block("for (long long jb = 0, fb_block = 1; jb < ", row, "; jb += ", width, ", ++fb_block)");
    w.Line("const long long je = jb + ", width, " < ", row, " ? jb + ", width, " : ", row, ";");
    for (const Accumulator* a : cascaded) {
      w.Line(ComputeCType(a->dtype), " ", Lanes(*a), "[", kCascadeLanes, "];");
      w.Line("for (int l = 0; l < ", kCascadeLanes, "; ++l) ", Lanes(*a), "[l] = ", CPrinter::IdentityLiteral(*a), ";");
    }
    // Independent lanes: no reassociation the compiler could not do itself,
    // so they vectorize without -ffast-math.
    w.Line("long long jv = jb;");
    {
      auto steps = w.Block("for (; jv + ", kCascadeLanes, " <= je; jv += ", kCascadeLanes, ")");
      auto lanes = w.Block("for (int l = 0; l < ", kCascadeLanes, "; ++l)");
      w.Line("const long long j = jv + l;");
      element("l");
    }
    if (n % kCascadeLanes != 0) {  // the row's last elements, in the last block
      auto tail = w.Block("for (long long j = jv; j < je; ++j)");
      element("0");
    }
    for (const Accumulator* a : cascaded) {
      const std::string lane = Lanes(*a);
      w.Line("for (int w = ", kCascadeLanes / 2, "; w > 0; w /= 2) for (int l = 0; l < w; ++l) ",
             fold(*a, lane + "[l]", lane + "[l + w]"));
      w.Line(fold(*a, levels > 0 ? Level(*a, 1) : Temp(a->temp), lane + "[0]"));
    }
    int64_t every = 1;
    for (int k = 1; k <= levels; ++k) {
      every *= kCascadeFanIn;
      auto level = w.Block("if (fb_block % ", every, " == 0)");
      for (const Accumulator* a : cascaded) {
        w.Line(fold(*a, above(*a, k), Level(*a, k)), " ", Level(*a, k), " = ", CPrinter::IdentityLiteral(*a), ";");
      }
    }
  }
  for (int k = 1; k <= levels; ++k) {
    for (const Accumulator* a : cascaded) w.Line(fold(*a, above(*a, k), Level(*a, k)));
  }
}

}  // namespace fusebox::backend::cpu
