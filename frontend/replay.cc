#include "frontend/replay.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "frontend/capture.h"
#include "frontend/input_values.h"
#include "frontend/random.h"
#include "frontend/runtime.h"

namespace fusebox::frontend {
namespace {

// A view of `base`'s storage (realized first if it is still lazy).
Tensor ViewOf(const Tensor& base, const Shape& shape, const Strides& strides, int64_t offset) {
  Realize(base.impl(), "a replayed call reads its argument", std::source_location::current());
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = base.dtype();
  impl->device = base.device();
  impl->storage = base.impl().storage;
  return Tensor(std::move(impl));
}

// The storage `t`'s memory lives in, realizing a lazy tensor; null when none.
const Storage* StorageOf(const Tensor& t) {
  Realize(t.impl(), "a replayed call compares its arguments' memory", std::source_location::current());
  return t.impl().storage.get();
}

// The earlier argument `args[k]` shares memory with, or -1.
int32_t AliasOf(std::span<const Tensor* const> args, size_t k) {
  if (args[k] == nullptr || !args[k]->defined()) return -1;
  const Storage* storage = StorageOf(*args[k]);
  for (size_t j = 0; j < k && storage != nullptr; ++j) {
    if (args[j] != nullptr && args[j]->defined() && StorageOf(*args[j]) == storage) return static_cast<int32_t>(j);
  }
  return -1;
}

// A tensor read from elsewhere is the same input when it reads the same
// memory the same way: a fresh view object each call (linear's w.t(), a
// broadcast bias) of the same parameter is.
bool SameGlobal(const Tensor& a, const Tensor& b) {
  const TensorImpl& x = a.impl();
  const TensorImpl& y = b.impl();
  if (&x == &y) return true;
  return x.storage != nullptr && x.storage == y.storage && x.dtype == y.dtype && x.shape == y.shape &&
         x.strides == y.strides && x.offset == y.offset;
}

bool SameInput(const ReplayInput& a, const ReplayInput& b) {
  if (a.rng_state || b.rng_state) return a.rng_state == b.rng_state && a.device == b.device;
  return a.argument == b.argument && a.view == b.view && a.shape == b.shape && a.strides == b.strides &&
         a.offset == b.offset && (a.argument >= 0 || SameGlobal(a.global, b.global));
}

bool SameOutput(const ReplayOutput& a, const ReplayOutput& b) {
  return a.graph_output == b.graph_output && a.argument == b.argument && a.shape == b.shape &&
         a.strides == b.strides && a.offset == b.offset;
}

}  // namespace

void NoteAliases(std::span<const Tensor* const> args, std::span<ArgGuard> guards) {
  for (size_t k = 0; k < args.size() && k < guards.size(); ++k) {
    guards[k].alias_of = AliasOf(args, k);
    guards[k].alias_offset =
        guards[k].alias_of < 0 ? 0 : args[k]->storage_offset() - args[guards[k].alias_of]->storage_offset();
  }
}

bool AliasesMatch(std::span<const ArgGuard> guards, std::span<const Tensor* const> args) {
  for (size_t k = 0; k < args.size() && k < guards.size(); ++k) {
    const int32_t of = AliasOf(args, k);
    if (of != guards[k].alias_of) return false;
    if (of >= 0 && args[k]->storage_offset() - args[of]->storage_offset() != guards[k].alias_offset) return false;
  }
  return true;
}

ReplayCandidate MakeReplayCandidate(std::vector<ArgGuard> guards, std::span<const Tensor> args,
                                    std::span<const Tensor* const> results, const GraphRecord& graph,
                                    std::span<const Tensor> graph_inputs) {
  ReplayCandidate c;
  c.entry.guards = std::move(guards);
  c.entry.record = graph;
  c.entry.record.input_tensors.clear();
  for (const Tensor& in : graph_inputs) {
    ReplayInput spec;
    if (in.impl().rng_state) {
      c.entry.inputs.push_back({.rng_state = true, .device = in.device()});
      continue;
    }
    for (size_t k = 0; k < args.size() && spec.argument < 0; ++k) {
      if (!args[k].defined()) continue;
      const TensorImpl& a = args[k].impl();
      if (&a == &in.impl()) {
        spec.argument = static_cast<int32_t>(k);
      } else if (a.storage && a.storage == in.impl().storage) {  // a view of the argument (x.t())
        spec = {.argument = static_cast<int32_t>(k), .view = true, .shape = in.shape(), .strides = in.strides(),
                .offset = in.storage_offset() - a.offset};
      }
    }
    if (spec.argument < 0) {
      spec.global = in;
      if (in.impl().storage != nullptr) spec.rebinds = in.impl().storage->rebinds();
    }
    c.entry.inputs.push_back(std::move(spec));
  }
  // A plan that assumed an argument's values (a mask judged causal) would
  // need them read each call: such calls trace (the runtime checks them).
  for (const fusion::ValueGuard& v : graph.executable->plan().value_guards) {
    if (v.input < 0 || static_cast<size_t>(v.input) >= c.entry.inputs.size() || c.entry.inputs[v.input].argument >= 0) {
      return {.why_not = "its plan assumed the values of an argument (a mask it judged causal)"};
    }
  }
  for (const Tensor* r : results) {
    ReplayOutput spec;
    const TensorImpl* impl = r->defined() ? &r->impl() : nullptr;
    if (impl != nullptr && impl->lazy && impl->lazy->realized) {
      const auto it = std::find(graph.output_nodes.begin(), graph.output_nodes.end(), impl->lazy->node);
      if (it == graph.output_nodes.end()) return {.why_not = "a returned tensor is not an output of the call's graph"};
      spec = {.graph_output = static_cast<int32_t>(it - graph.output_nodes.begin()), .shape = impl->shape,
              .strides = impl->strides, .offset = impl->offset};
    } else {
      for (size_t k = 0; k < args.size() && impl != nullptr; ++k) {
        if (args[k].defined() && &args[k].impl() == impl) spec.argument = static_cast<int32_t>(k);
      }
      if (spec.argument < 0) {
        return {.why_not = "it returns a tensor that its graph did not compute and that is not one of its arguments"};
      }
    }
    c.entry.outputs.push_back(std::move(spec));
  }
  return c;
}

bool SameReplay(const ReplayEntry& a, const ReplayEntry& b) {
  return a.guards == b.guards && a.record.executable == b.record.executable &&
         std::equal(a.inputs.begin(), a.inputs.end(), b.inputs.begin(), b.inputs.end(), SameInput) &&
         std::equal(a.outputs.begin(), a.outputs.end(), b.outputs.begin(), b.outputs.end(), SameOutput);
}

bool GlobalsCurrent(const ReplayEntry& entry) {
  for (const ReplayInput& in : entry.inputs) {
    if (in.argument >= 0 || in.rng_state) continue;
    const Storage* storage = in.global.impl().storage.get();
    if (storage != nullptr && storage->rebinds() != in.rebinds) return false;
  }
  // The values its plan assumed (of tensors read from elsewhere: see
  // MakeReplayCandidate) are still those: the memory is unwritten.
  for (const fusion::ValueGuard& v : entry.record.executable->plan().value_guards) {
    if (!ValueGuardHolds(v, entry.inputs[v.input].global)) return false;
  }
  return true;
}

std::string ReplayDifference(const ReplayEntry& before, const ReplayEntry& now) {
  if (before.guards != now.guards || before.record.executable != now.record.executable ||
      before.inputs.size() != now.inputs.size()) {
    return "";
  }
  for (size_t k = 0; k < now.inputs.size(); ++k) {
    const ReplayInput& a = before.inputs[k];
    const ReplayInput& b = now.inputs[k];
    if (a.rng_state || b.rng_state) continue;  // drawn anew each call (random.h)
    if (a.argument < 0 && b.argument < 0 && !SameGlobal(a.global, b.global)) {
      return absl::StrCat("graph input ", k, " (", b.global.str(),
                          "), a tensor read from outside the arguments, is other memory than the call before read (a "
                          "tensor made anew by each call, or one rebound between calls); calls replay only while it "
                          "is the same");
    }
  }
  return "";
}

std::vector<Tensor> RunReplay(const ReplayEntry& entry, std::span<const Tensor* const> args) {
  std::vector<Tensor> inputs;
  inputs.reserve(entry.inputs.size());
  for (const ReplayInput& in : entry.inputs) {
    if (in.rng_state) {
      inputs.push_back(NextGeneratorStateTensor(in.device));
    } else if (in.argument < 0) {
      inputs.push_back(in.global);
    } else {
      const Tensor& arg = *args[in.argument];
      inputs.push_back(in.view ? ViewOf(arg, in.shape, in.strides, arg.storage_offset() + in.offset) : arg);
    }
  }
  std::vector<Tensor> values = RunPlan(*entry.record.executable, inputs);
  std::vector<Tensor> results;
  results.reserve(entry.outputs.size());
  for (const ReplayOutput& out : entry.outputs) {
    if (out.graph_output < 0) {
      results.push_back(*args[out.argument]);
      continue;
    }
    const Tensor& value = values[out.graph_output];
    const bool whole = out.offset == 0 && out.shape == value.shape() && out.strides == value.strides();
    results.push_back(whole ? value : ViewOf(value, out.shape, out.strides, value.storage_offset() + out.offset));
    AdoptIfRealized(results.back());  // concrete before other threads can read it (compile.h)
  }
  return results;
}

}  // namespace fusebox::frontend
