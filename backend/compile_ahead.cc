#include "backend/compile_ahead.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "backend/cpu/cpp_printer.h"
#include "backend/cpu/host_compiler.h"
#include "backend/cuda/cuda_cluster.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/cuda/flash_attention.h"
#include "backend/executable.h"
#include "backend/extern_kernels.h"
#include "backend/kernel_entry.h"
#include "backend/lower.h"
#include "backend/source_hooks.h"

namespace fusebox::backend {
namespace {

// Runs every job, on up to one thread per core (the calling thread is one).
void RunAll(const std::vector<std::function<void()>>& jobs) {
  static const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min(cores, jobs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t j = next++; j < jobs.size(); j = next++) jobs[j]();
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

}  // namespace

std::vector<PreparedKernel> CompileAhead(const fusion::Plan& plan, int cuda_arch, bool cuda_twins,
                                         const TuningSnapshot& tuning, int cuda_sm_count, CompileAheadTimes* times) {
  const auto start = std::chrono::steady_clock::now();
  const bool cpu = plan.graph.device().is_cpu();
  const bool unique_names = UniqueKernelNames();  // read once: every kernel of the plan alike
  std::vector<PreparedKernel> kernels;
  std::vector<std::function<void()>> jobs;
  // One job per distinct source: kernels equal but for their names compile once
  // (the cache does not join compiles of one source running at the same time).
  absl::flat_hash_set<std::string> cpu_sources, cuda_sources, flash_kernels;
  kernels.reserve(plan.kernels.size());  // the jobs keep pointers into it
  for (const fusion::KernelGroup& group : plan.kernels) {
    PreparedKernel& k = kernels.emplace_back();
    if (group.kind == fusion::KernelKind::kExtern) {  // a library call: nothing to print
      k.ir.name = group.name;
      k.ir.kind = group.kind;
      // Attention's flash kernel (the slowest compile of a plan, 0.4-1.5 s)
      // joins the other compiles, first: the longest job starting last would
      // end last. PrepareExtern then finds it in the compile cache.
      const graph::NodeId end = fusion::ChainOf(plan.graph, group).end;
      if (plan.graph.node(end).op == graph::Op::kAttention && (!cpu || cuda_twins)) {
        const std::optional<cuda::FlashConfig> config =
            cuda::FlashConfigFor(AttentionProblemOf(plan.graph, end), cuda_arch, tuning);
        if (config && flash_kernels.insert(config->KernelName()).second) {
          jobs.insert(jobs.begin(),
                      [config = *config, cuda_arch] { (void)cuda::GetFlashKernel(config, /*device=*/-1, cuda_arch); });
        }
      }
      continue;
    }
    k.ir = LowerKernel(plan, group, tuning);
    k.ir.cuda_arch = cuda_arch;
    k.ir.cuda_sm_count = cuda_sm_count;
    const std::string& name = group.name;
    k.entry_name = EntryName(name, unique_names);
    if (cpu) {
      k.source = RewriteSource(name, cpu::PrintCpp(k.ir));
      k.entry_source = UnderEntryName(k.source, name, k.entry_name);
      if (cpu_sources.insert(k.entry_source).second) {
        jobs.push_back([&k] { (void)cpu::CompileCpuKernel(k.entry_source, k.entry_name); });
      }
    }
    if (!cpu || cuda_twins) {
      std::string& source = cpu ? k.cuda_source : k.source;
      std::string& entry_source = cpu ? k.cuda_entry_source : k.entry_source;
      k.schedule = ChooseCudaSchedule(k.ir, tuning);
      source = RewriteSource(name, PrintCuda(k.ir, *k.schedule, tuning));
      entry_source = UnderEntryName(source, name, k.entry_name);
      if (cuda_sources.insert(entry_source).second) {
        jobs.push_back([&entry_source, &k, cuda_arch, &tuning] {
          (void)CompileCudaSource(entry_source, k.entry_name, cuda_arch, tuning);
        });
      }
    }
  }
  const auto printed = std::chrono::steady_clock::now();
  RunAll(jobs);
  if (times != nullptr) {
    times->codegen_ms = std::chrono::duration<double, std::milli>(printed - start).count();
    times->compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - printed).count();
  }
  return kernels;
}

}  // namespace fusebox::backend
