// Shrinking a failing program and printing it as a C++ repro. Every
// candidate must stay a program of the same kind (valid under all size
// assignments, or failing at its last step) before it is run.
#include <algorithm>
#include <functional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/fuzz/check.h"
#include "tests/fuzz/interpret.h"
#include "tests/fuzz/op_table.h"

namespace fusebox::fuzz {
namespace {

std::vector<RefArray> Data(const Program& p, int assignment) {
  std::vector<RefArray> data;
  for (size_t i = 0; i < p.inputs.size(); ++i) data.push_back(InputData(p, static_cast<int>(i), assignment, 0));
  return data;
}

bool StillSameKind(const Program& p) {
  if (p.inputs.empty() || p.inputs.size() > 4 || p.outputs.empty()) return false;
  try {
    if (p.must_fail) {
      Reference(p, Data(p, 0), static_cast<int>(p.steps.size()) - 1);
    } else {
      for (int a = 0; a < kAssignments; ++a) Reference(p, Data(p, a));
      return true;
    }
  } catch (const RefError&) {
    return false;
  } catch (const TooBig&) {
    return false;
  }
  try {
    Reference(p, Data(p, 0));
  } catch (const RefError&) {
    return true;
  }
  return false;
}

// Keeps the steps that `keep` marks, renumbering values and inputs.
Program Keep(const Program& p, const std::vector<bool>& keep) {
  Program q = p;
  q.steps.clear();
  q.inputs.clear();
  std::vector<int> id(p.steps.size(), -1);
  for (size_t k = 0; k < p.steps.size(); ++k) {
    if (!keep[k]) continue;
    Step s = p.steps[k];
    if (s.op == kInputOp) {
      q.inputs.push_back(p.inputs[s.ints[0]]);
      s.ints = {static_cast<int64_t>(q.inputs.size()) - 1};
    }
    for (int& a : s.args) a = a < 0 ? -1 : id[a];
    id[k] = static_cast<int>(q.steps.size());
    q.steps.push_back(s);
  }
  for (int& o : q.outputs) o = id[o];
  q.alias = q.alias && q.inputs.size() >= 2 && q.inputs[0].dims == q.inputs[1].dims && q.inputs[0].dtype == q.inputs[1].dtype;
  return q;
}

// Drops steps no output needs (every input stays an argument only if used).
Program DeadCodeRemoved(const Program& p) {
  std::vector<bool> keep(p.steps.size(), false);
  for (int o : p.outputs) keep[o] = true;
  for (int k = static_cast<int>(p.steps.size()) - 1; k >= 0; --k) {
    if (!keep[k]) continue;
    for (int a : p.steps[k].args) {
      if (a >= 0) keep[a] = true;
    }
  }
  return Keep(p, keep);
}

std::vector<Program> Candidates(const Program& p) {
  std::vector<Program> out;
  out.push_back(DeadCodeRemoved(p));
  if (p.outputs.size() > 1) {
    for (int o : p.outputs) {
      Program q = p;
      q.outputs = {o};
      out.push_back(DeadCodeRemoved(q));
    }
  }
  const int n = static_cast<int>(p.steps.size());
  if (!p.must_fail) {
    for (int k = 0; k < n; ++k) {
      if (p.steps[k].op == kInputOp || std::count(p.outputs.begin(), p.outputs.end(), k)) continue;
      Program q = p;
      q.outputs = {k};
      out.push_back(DeadCodeRemoved(q));
    }
  }
  // Bypass a step: its uses read one of its operands instead.
  for (int k = 0; k < n; ++k) {
    if (p.steps[k].op == kInputOp || (p.must_fail && k == n - 1)) continue;
    for (int a : p.steps[k].args) {
      if (a < 0) continue;
      Program q = p;
      for (Step& s : q.steps) {
        for (int& x : s.args) x = x == k ? a : x;
      }
      for (int& o : q.outputs) o = o == k ? a : o;
      out.push_back(DeadCodeRemoved(q));
    }
  }
  for (size_t v = 0; v < p.sizes.size(); ++v) {
    for (int64_t size : {1, 2, 3, 5}) {
      if (size >= *std::max_element(p.sizes[v].begin(), p.sizes[v].end())) continue;
      Program q = p;
      q.sizes[v] = {size, size, size};
      out.push_back(q);
      if (p.sizes[v][0] > size) {
        Program r = p;
        r.sizes[v][0] = size;
        out.push_back(r);
      }
    }
  }
  Program f32 = p;
  for (Input& in : f32.inputs) in.dtype = DType::kFloat32;
  out.push_back(f32);
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    if (!p.inputs[i].transposed && p.inputs[i].data == 0) continue;
    Program q = p;
    q.inputs[i].transposed = false;
    q.inputs[i].data = 0;
    out.push_back(q);
  }
  if (p.alias) {
    Program q = p;
    q.alias = false;
    out.push_back(q);
  }
  return out;
}

int64_t Weight(const Program& p) {
  int64_t w = static_cast<int64_t>(p.steps.size()) * 1000 + static_cast<int64_t>(p.outputs.size()) * 100;
  for (const auto& s : p.sizes) w += s[0] + s[1] + s[2];
  for (const Input& in : p.inputs) w += (in.dtype != DType::kFloat32) + in.transposed + (in.data != 0) * 2;
  return w + p.alias;
}

std::string InputExpr(const Program& p, int i, int assignment, uint64_t seed, Device device) {
  const Input& in = p.inputs[i];
  Dims shape = p.InputShape(i, assignment);
  const bool transposed = in.transposed && shape.size() >= 2;
  if (transposed) std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  const std::string dev = device.is_cuda() ? "Device::cuda()" : "Device::cpu()";
  std::string e = in.data == 1 ? absl::StrCat("(rand(", DimsStr(shape), ", ", dev, ", ", seed, ") * 2.75 + 0.25)")
                               : absl::StrCat("randn(", DimsStr(shape), ", ", dev, ", ", seed, ")");
  if (in.dtype != DType::kFloat32) e = absl::StrCat(e, ".to(", DTypeSpelling(in.dtype), ")");
  if (transposed) e = absl::StrCat(e, ".transpose(-1, -2)");
  return e;
}

}  // namespace

Program Minimize(Program p, const std::function<bool(const Program&)>& fails) {
  for (bool changed = true; changed;) {
    changed = false;
    for (const Program& c : Candidates(p)) {
      if (Weight(c) < Weight(p) && StillSameKind(c) && fails(c)) {
        p = c;
        changed = true;
        break;
      }
    }
  }
  return p;
}

std::string Repro(const Program& p, Mode mode, Device device, const Outcome& why) {
  const auto& table = OpTable();
  std::vector<int64_t> ranks;
  const std::vector<RefArray> data = Data(p, 0);
  for (const Step& s : p.steps) {
    if (s.op == kInputOp) {
      ranks.push_back(static_cast<int64_t>(p.inputs[s.ints[0]].dims.size()));
    } else {
      ranks.push_back(-1);
    }
  }
  try {
    const std::vector<RefArray> values = Reference(p, data, p.must_fail ? static_cast<int>(p.steps.size()) - 1 : -1);
    for (size_t k = 0; k < values.size(); ++k) ranks[k] = values[k].rank();
  } catch (const RefError&) {
  }
  std::vector<std::string> params, body;
  for (size_t k = 0; k < p.steps.size(); ++k) {
    const Step& s = p.steps[k];
    if (s.op == kInputOp) {
      params.push_back(absl::StrCat("const Tensor& t", k));
      continue;
    }
    std::vector<std::string> names;
    std::vector<int64_t> arg_ranks;
    for (int a : s.args) {
      names.push_back(a < 0 ? "Tensor()" : absl::StrCat("t", a));
      arg_ranks.push_back(a < 0 ? 0 : ranks[a]);
    }
    body.push_back(absl::StrCat("    Tensor t", k, " = ", table[s.op].print(names, arg_ranks, s), ";"));
  }
  std::vector<std::string> outs;
  for (int o : p.outputs) outs.push_back(absl::StrCat("t", o));
  std::string options = mode == Mode::kDynamic ? "CompileOptions{.dynamic = true}"
                        : mode == Mode::kReplay ? "CompileOptions{.replay = true}" : "";
  std::string text = absl::StrCat(
      "// fusebox_fuzz --seed ", p.seed, " --count 1 --device ", device.is_cuda() ? "cuda" : "cpu", " --modes ",
      ModeName(mode), "\n// ", why.kind, ": ", why.detail,
      "\n// (the fuzzer's inputs are its own random values; these are randn's)\n"
      "#include <iostream>\n#include <vector>\n\n#include <fusebox/fusebox.h>\n\nusing namespace fusebox;\n\nint main() {\n"
      "  auto fn = [](", absl::StrJoin(params, ", "), ") {\n", absl::StrJoin(body, "\n"), "\n    return std::vector<Tensor>{",
      absl::StrJoin(outs, ", "), "};\n  };\n",
      mode == Mode::kEager ? "  auto& f = fn;\n" : absl::StrCat("  auto f = compile(fn", options.empty() ? "" : ", ", options, ");\n"));
  // The calls of the mode: sizes per assignment, alias in replay (as in check.cc).
  std::vector<std::pair<int, bool>> calls = {{0, false}};
  if (mode == Mode::kCached) calls = {{0, false}, {0, false}};
  if (mode == Mode::kDynamic || mode == Mode::kAutoDynamic) calls = {{0, false}, {1, false}, {2, false}};
  if (mode == Mode::kReplay) {
    calls = p.alias ? std::vector<std::pair<int, bool>>{{0, true}, {0, true}, {0, true}, {0, false}, {0, false}}
                    : std::vector<std::pair<int, bool>>{{0, false}, {0, false}, {0, false}, {0, false}};
  }
  for (size_t c = 0; c < calls.size(); ++c) {
    std::vector<std::string> args;
    absl::StrAppend(&text, "  try {\n");
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      if (calls[c].second && i == 1) {
        args.push_back("a0");
        continue;
      }
      absl::StrAppend(&text, "    Tensor a", i, " = ", InputExpr(p, static_cast<int>(i), calls[c].first, c * 10 + i + 1, device), ";\n");
      args.push_back(absl::StrCat("a", i));
    }
    absl::StrAppend(&text, "    for (const Tensor& r : f(", absl::StrJoin(args, ", "), ")) std::cout << r << \"\\n\";\n",
                    "  } catch (const fusebox::Error& e) {\n    std::cout << \"fusebox::Error: \" << e.what() << \"\\n\";\n  }\n");
  }
  return absl::StrCat(text, "}\n");
}

}  // namespace fusebox::fuzz
