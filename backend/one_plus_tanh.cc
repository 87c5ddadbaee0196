#include "backend/one_plus_tanh.h"

#include <algorithm>
#include <map>
#include <vector>


namespace fusebox::backend {
namespace {

// Every block of statements in the kernel.
std::vector<std::vector<Stmt>*> Blocks(Kernel& k) {
  std::vector<std::vector<Stmt>*> blocks = {&k.body, &k.elementwise, &k.row_body};
  for (Pass& pass : k.passes) blocks.push_back(&pass.body);
  return blocks;
}

// How many statements and accumulators read each temp.
std::map<int, int> Uses(Kernel& k) {
  std::map<int, int> uses;
  for (std::vector<Stmt>* block : Blocks(k)) {
    for (const Stmt& s : *block) {
      for (int a : s.args) ++uses[a];
    }
  }
  for (const Pass& pass : k.passes) {
    for (const Accumulator& a : pass.accumulators) ++uses[a.value];
  }
  return uses;
}

// Floats computed in f32 (bf16 and f16 too): fb_sigmoid's precision.
bool ComputedInFloat(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16;
}

void Rewrite(std::vector<Stmt>& block, std::map<int, int>& uses, int& num_temps) {
  std::vector<Stmt> out;
  out.reserve(block.size());
  std::map<int, size_t> defined;  // temp -> its statement's index in `out`
  auto emit = [&](Stmt s) {
    if (s.result >= 0) defined[s.result] = out.size();
    out.push_back(std::move(s));
  };
  // The index in `out` of the tanh that `s` adds a constant 1 to, or -1.
  auto one_plus_tanh = [&](const Stmt& s) -> int {
    if (s.kind != StmtKind::kCompute || s.op != graph::Op::kAdd || s.args.size() != 2 || !ComputedInFloat(s.dtype)) {
      return -1;
    }
    for (int k = 0; k < 2; ++k) {
      auto one = defined.find(s.args[k]), tanh = defined.find(s.args[1 - k]);
      if (one == defined.end() || tanh == defined.end()) continue;
      const Stmt& c = out[one->second];
      const Stmt& t = out[tanh->second];
      if (c.kind == StmtKind::kConstant && c.constant == 1.0 && t.kind == StmtKind::kCompute && t.op == graph::Op::kTanh &&
          ComputedInFloat(t.dtype)) {
        return static_cast<int>(tanh->second);
      }
    }
    return -1;
  };
  std::vector<int> dropped;  // the rewritten adds' operands (the tanh, the 1), read by nothing after it
  for (Stmt& s : block) {
    const int at = one_plus_tanh(s);
    if (at < 0) {
      emit(std::move(s));
      continue;
    }
    const Stmt tanh = out[at];
    const int z = tanh.args.at(0);
    Stmt two{.kind = StmtKind::kConstant, .result = num_temps++, .dtype = s.dtype, .constant = 2.0};
    Stmt twice{.kind = StmtKind::kCompute, .result = num_temps++, .dtype = tanh.dtype, .op = graph::Op::kMul,
               .args = {two.result, z}};
    Stmt sigmoid{.kind = StmtKind::kCompute, .result = num_temps++, .dtype = tanh.dtype, .op = graph::Op::kSigmoid,
                 .args = {twice.result}};
    for (int a : s.args) {
      if (--uses[a] == 0) dropped.push_back(a);
    }
    s.op = graph::Op::kMul;
    s.args = {two.result, sigmoid.result};
    for (const Stmt* t : {&twice, &sigmoid, &s}) {
      for (int a : t->args) ++uses[a];
    }
    emit(std::move(two));
    emit(std::move(twice));
    emit(std::move(sigmoid));
    emit(std::move(s));
  }
  block.clear();
  for (Stmt& s : out) {
    if (std::find(dropped.begin(), dropped.end(), s.result) != dropped.end()) {
      for (int a : s.args) --uses[a];  // a constant has none
      continue;
    }
    block.push_back(std::move(s));
  }
}

}  // namespace

Kernel RewriteOnePlusTanh(Kernel kernel) {
  std::map<int, int> uses = Uses(kernel);
  for (std::vector<Stmt>* block : Blocks(kernel)) Rewrite(*block, uses, kernel.num_temps);
  return kernel;
}

}  // namespace fusebox::backend
