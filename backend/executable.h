// A compiled plan for one device: every kernel lowered, printed, compiled
// (through the compile cache) and loaded. Run() binds tensors to the graph's
// inputs, allocates the stored values and launches the kernels in order.
#pragma once

#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backend/compile_cache.h"
#include "backend/kernel_info.h"
#include "backend/tuning.h"
#include "fusion/plan.h"
#include "tensor/tensor.h"

namespace fusebox::cuda {
class LaunchGraph;
}  // namespace fusebox::cuda

namespace fusebox::backend {

class Executable {
 public:
  // The one entry point of a compile: `tuning` is passed down to lowering,
  // printing and the launch geometry, and kept for the launches.
  static absl::StatusOr<std::shared_ptr<const Executable>> Compile(fusion::Plan plan,
                                                                    const TuningSnapshot& tuning = CurrentTuning());

  // `inputs[k]` is bound to the input node with input_index k. Returns one
  // tensor per graph output (inputs returned as such are aliased, not copied;
  // an output with a store target is written into, and is, that input).
  // A bad index fails the CPU run; on CUDA the values it computed carry the
  // check instead, with those still pending for its inputs
  // (tensor/pending_error.h): it throws when they are read.
  // `stored_values`, if given, receives every value a kernel stored, by node
  // (the numerics check compares them with an unfused run).
  using StoredValues = absl::flat_hash_map<graph::NodeId, Tensor>;
  absl::StatusOr<std::vector<Tensor>> Run(absl::Span<const Tensor> inputs, StoredValues* stored_values = nullptr) const;

  const fusion::Plan& plan() const { return plan_; }
  const std::vector<KernelInfo>& kernels() const { return infos_; }
  int compiled_kernels() const { return compiled_kernels_; }  // cache misses while building
  const CompileTimes& compile_times() const { return compile_times_; }  // building it (plan_ms: 0, the caller's)
  const TuningSnapshot& tuning() const { return tuning_; }    // what it was compiled under
  bool checks_indices() const { return checks_indices_; }      // some kernel has index checks

  ~Executable();

 private:
  Executable() = default;
  struct CompiledKernel;
  fusion::Plan plan_;
  TuningSnapshot tuning_;
  std::vector<KernelInfo> infos_;
  std::vector<std::unique_ptr<CompiledKernel>> kernels_;
  int compiled_kernels_ = 0;
  CompileTimes compile_times_;
  bool checks_indices_ = false;
  bool has_externs_ = false;  // some kernel is a library call (a dynamic plan resizes their graph per call)
  // CUDA plans of small kernels that a graph can chain (no extern kernel,
  // no programmatic launch; launch_graph.h): Run() issues their launches as
  // one graph.
  std::unique_ptr<::fusebox::cuda::LaunchGraph> launch_graph_;
};

// Every kernel of `plan` lowered and printed for both targets, without
// compiling: what a dynamic plan's kernels look like at other sizes. Library
// calls (GEMMs, attention) read their sizes when they run: they are
// described by what they compute, not their sizes.
std::vector<std::string> PrintPlanKernels(const fusion::Plan& plan, const TuningSnapshot& tuning);

// CUDA source -> PTX + cubin through the compile cache (Knob::kFastMath's
// option is part of the key; `arch_specific`: for sm_<arch>a). On failure the status
// holds NVRTC's log and the path where the source was written.
absl::StatusOr<std::shared_ptr<const CompiledBinary>> CompileCudaSource(const std::string& source,
                                                                        const std::string& name, int arch,
                                                                        const TuningSnapshot& tuning,
                                                                        bool arch_specific = false);

// CI has no GPU: with this on, every kernel compiled for the CPU is also
// printed as CUDA and compiled by NVRTC for sm_90, so a codegen bug in the
// CUDA printer fails the CPU test suite. Tests turn it on.
void SetAlsoCompileCudaForCpu(bool on);

}  // namespace fusebox::backend
