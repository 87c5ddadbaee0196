// One program in one mode: the calls the mode makes (sizes, fresh data,
// aliased arguments), each compared with the reference within its bounds.
#include "tests/fuzz/check.h"

#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/fusebox.h"
#include "tests/fuzz/interpret.h"
#include "tests/fuzz/op_table.h"

namespace fusebox::fuzz {
namespace {

struct Call {
  int assignment;
  uint64_t data;  // which fresh data
  bool alias;     // argument 1 is argument 0's tensor
};

std::vector<Call> Calls(const Program& p, Mode m) {
  switch (m) {
    case Mode::kEager:
    case Mode::kCompiled: return {{0, 0, false}};
    case Mode::kCached: return {{0, 0, false}, {0, 1, false}};
    case Mode::kDynamic:
    case Mode::kAutoDynamic: return {{0, 0, false}, {1, 1, false}, {2, 2, false}};
    case Mode::kReplay:
      if (p.alias) return {{0, 0, true}, {0, 1, true}, {0, 2, true}, {0, 3, false}, {0, 4, false}};
      return {{0, 0, false}, {0, 1, false}, {0, 2, false}, {0, 3, false}};
  }
  return {};
}

struct Fn {
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> call;
  std::function<CompileStats()> stats;
};

template <typename F, size_t... I>
std::vector<Tensor> CallWith(F& f, const std::vector<Tensor>& x, std::index_sequence<I...>) {
  return f(x[I]...);
}
template <size_t N>
Fn Compiled(const Program& p, const CompileOptions& o) {
  auto body = [&p](const auto&... a) { return RunFusebox(p, std::vector<Tensor>{a...}); };
  auto f = std::make_shared<decltype(compile(body, o))>(compile(body, o));
  return {[f](const std::vector<Tensor>& x) { return CallWith(*f, x, std::make_index_sequence<N>()); },
          [f] { return f->stats(); }};
}
Fn MakeFn(const Program& p, Mode m) {
  if (m == Mode::kEager) return {[&p](const std::vector<Tensor>& x) { return RunFusebox(p, x); }, [] { return CompileStats{}; }};
  CompileOptions o;
  if (m == Mode::kDynamic) o.dynamic = true;
  if (m == Mode::kReplay) o.replay = true;
  switch (p.inputs.size()) {
    case 1: return Compiled<1>(p, o);
    case 2: return Compiled<2>(p, o);
    case 3: return Compiled<3>(p, o);
    default: return Compiled<4>(p, o);
  }
}

Outcome Compare(const std::vector<RefArray>& want, const std::vector<Tensor>& got, int call) {
  if (want.size() != got.size()) return {"shape", absl::StrCat("call ", call, ": ", got.size(), " outputs")};
  for (size_t k = 0; k < want.size(); ++k) {
    const RefArray& w = want[k];
    const Dims shape(got[k].shape().begin(), got[k].shape().end());
    if (shape != w.shape) {
      return {"shape", absl::StrCat("call ", call, " output ", k, ": shape ", DimsStr(shape), ", want ", DimsStr(w.shape))};
    }
    if (got[k].dtype() != w.dtype) {
      return {"dtype", absl::StrCat("call ", call, " output ", k, ": ", DTypeName(got[k].dtype()), ", want ",
                                    DTypeName(w.dtype))};
    }
    const std::vector<double> g = got[k].to_double_vector();
    for (int64_t i = 0; i < w.numel(); ++i) {
      const double v = w.v(i), e = w.e(i);
      if (std::isinf(e) || std::isnan(e)) continue;  // the reference cannot bound it (inf - inf, 0 * inf)
      const bool ok = std::isnan(v)   ? std::isnan(g[i])
                      : std::isinf(v) ? g[i] == v
                                      : std::fabs(g[i] - v) <= 2 * e;
      if (!ok) {
        return {"value", absl::StrCat("call ", call, " output ", k, " element ", i, " of ", DimsStr(w.shape), ": got ",
                                      g[i], ", want ", v, " (bound ", 2 * e, ")")};
      }
    }
  }
  return {};
}

}  // namespace

const char* ModeName(Mode m) {
  const char* names[] = {"eager", "compiled", "cached", "dynamic", "auto-dynamic", "replay"};
  return names[static_cast<int>(m)];
}

bool ParseMode(const std::string& name, Mode* out) {
  for (Mode m : kAllModes) {
    if (name == ModeName(m)) {
      *out = m;
      return true;
    }
  }
  return false;
}

Outcome RunProgram(const Program& p, Mode mode, Device device) {
  try {
    Fn fn = MakeFn(p, mode);
    const std::vector<Call> calls = Calls(p, mode);
    for (size_t c = 0; c < calls.size(); ++c) {
      std::vector<RefArray> data;
      std::vector<Tensor> args;
      for (size_t i = 0; i < p.inputs.size(); ++i) {
        const bool alias = calls[c].alias && i == 1;
        data.push_back(alias ? data[0] : InputData(p, static_cast<int>(i), calls[c].assignment, calls[c].data));
        args.push_back(alias ? args[0] : ToTensor(data.back(), p.inputs[i], device));
      }
      std::vector<RefArray> want;
      bool rejected = false;
      try {
        const std::vector<RefArray> values = Reference(p, data);
        for (int o : p.outputs) want.push_back(values[o]);
      } catch (const RefError&) {
        rejected = true;
      } catch (const TooBig&) {
        continue;  // a call's sizes past what the reference evaluates: not checked
      }
      const int64_t plans_before = fn.stats().plan_compiles;
      std::vector<Tensor> got;
      try {
        got = fn.call(args);
      } catch (const Error& e) {
        const std::string what = e.what();
        if (what.find("internal error") != std::string::npos) return {"internal", what};
        if (rejected) return {};
        return {"exception", absl::StrCat("call ", c, ": ", what)};
      }
      if (rejected) return {"no-error", absl::StrCat("call ", c, ": the last step must throw fusebox::Error")};
      if (Outcome o = Compare(want, got, static_cast<int>(c)); !o.ok()) return o;
      // Compiled results are laid out as eager ones (the first call: its
      // shapes' eager kernels are the eager mode's).
      if (mode != Mode::kEager && c == 0) {
        const std::vector<Tensor> eager = RunFusebox(p, args);
        for (size_t k = 0; k < got.size(); ++k) {
          if (got[k].strides() != eager[k].strides()) {
            return {"strides", absl::StrCat("output ", k, ": strides ", ShapeToString(got[k].strides()), ", eager ",
                                            ShapeToString(eager[k].strides()))};
          }
        }
      }
      if (mode == Mode::kCached && c == 1 && fn.stats().plan_compiles != plans_before) {
        return {"recompile", "the second call with the same shapes compiled a plan again"};
      }
    }
  } catch (const Error& e) {
    return {"exception", e.what()};
  } catch (const std::exception& e) {
    return {"foreign-exception", e.what()};
  }
  return {};
}

std::string ProgramText(const Program& p) {
  std::string out;
  for (size_t k = 0; k < p.steps.size(); ++k) {
    const Step& s = p.steps[k];
    if (s.op == kInputOp) {
      const Input& in = p.inputs[s.ints[0]];
      std::vector<std::string> dims;
      for (int d : in.dims) dims.push_back(d < 0 ? "1" : absl::StrCat("s", d));
      absl::StrAppend(&out, "t", k, " = input ", s.ints[0], " [", absl::StrJoin(dims, ","), "] ", DTypeName(in.dtype),
                      in.transposed ? " transposed" : "", "\n");
      continue;
    }
    std::vector<std::string> args;
    for (int a : s.args) args.push_back(a < 0 ? "-" : absl::StrCat("t", a));
    absl::StrAppend(&out, "t", k, " = ", OpTable()[s.op].name, "(", absl::StrJoin(args, ", "), ") ints {",
                    absl::StrJoin(s.ints, ","), "} scalar ", s.scalar, s.flag ? " flag" : "", "\n");
  }
  return out;
}

}  // namespace fusebox::fuzz
