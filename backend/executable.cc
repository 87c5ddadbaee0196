#include "backend/executable.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/compile_ahead.h"
#include "backend/compile_cache.h"
#include "backend/cpu/cpp_printer.h"
#include "backend/cpu/host_compiler.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/cuda/cuda_schedule.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/index_flag.h"
#include "backend/cuda/launch_graph.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/row_printer.h"
#include "backend/extern_kernels.h"
#include "backend/index_check.h"
#include "backend/kernel_cost.h"
#include "backend/kernel_entry.h"
#include "backend/lower.h"
#include "backend/parallel_for.h"
#include "profiler/recorder.h"
#include "backend/ptx_summary.h"
#include "backend/source_hooks.h"
#include "fusion/dynamic_shapes.h"
#include "spdlog/spdlog.h"
#include "tensor/debug.h"
#include "tensor/pending_error.h"

namespace fusebox::backend {
namespace {

std::atomic<bool> also_compile_cuda{false};

// A compile error of a kernel compiled under kKernelEntry, told under its own name.
absl::Status NamedAfter(const absl::Status& status, const std::string& name) {
  return absl::Status(status.code(), UnderKernelName(std::string(status.message()), name));
}

constexpr int kNoDeviceArch = 90;  // what CI and GPU-less machines compile for

// One CUDA launch of a run, with its argument values.
struct PendingLaunch {
  CUfunction function = nullptr;
  cuda::LaunchDims dims;
  absl::InlinedVector<void*, 16> args;  // buffers
  long long n = 0;                      // fb_n, when the kernel takes its extent
  bool pass_n = false;
  // Kernel::size_args' values, after fb_n: `int` parameters unless index64
  // (CPrinter::SizeParams).
  absl::InlinedVector<long long, 2> sizes;
  absl::InlinedVector<int, 2> sizes32;
};

// cuLaunchKernel's parameter arrays (a pointer to each argument's value) of
// `pending`, into `params`, one span of it per launch.
void PointParams(absl::Span<PendingLaunch> pending, absl::InlinedVector<void*, 64>* params,
                 absl::InlinedVector<cuda::KernelLaunch, 4>* launches) {
  size_t total = 0;
  for (const PendingLaunch& p : pending) total += p.args.size() + (p.pass_n ? 1 : 0) + p.sizes.size() + p.sizes32.size();
  params->resize(total);  // no regrowth below: the launches point into it
  size_t at = 0;
  for (PendingLaunch& p : pending) {
    const size_t first = at;
    for (void*& a : p.args) (*params)[at++] = &a;
    if (p.pass_n) (*params)[at++] = &p.n;
    for (long long& size : p.sizes) (*params)[at++] = &size;
    for (int& size : p.sizes32) (*params)[at++] = &size;
    launches->push_back({.function = p.function, .dims = p.dims, .params = params->data() + first});
  }
}

// Issues `pending` in order: as one launch of `graph` where there is one and
// no other thread holds it (LaunchGraph::Launch), else kernel by kernel.
absl::Status IssueLaunches(int device, absl::Span<PendingLaunch> pending, cuda::LaunchGraph* graph) {
  absl::InlinedVector<void*, 64> params;
  absl::InlinedVector<cuda::KernelLaunch, 4> launches;
  PointParams(pending, &params, &launches);
  if (graph != nullptr) {
    absl::StatusOr<bool> as_graph = graph->Launch(launches);
    if (!as_graph.ok() || *as_graph) return as_graph.status();
  }
  for (const cuda::KernelLaunch& l : launches) {
    if (absl::Status s = cuda::Driver::Get().Launch(device, l.function, l.dims, l.params); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// The shapes of the buffers `kernel` reads, for the profiler.
std::vector<Shape> InputShapes(const Kernel& kernel, const graph::Graph& g, absl::Span<const Tensor> inputs,
                               const absl::flat_hash_map<graph::NodeId, Tensor>& stored) {
  std::vector<Shape> shapes;
  for (const BufferParam& b : kernel.buffers) {
    if (b.is_output) continue;
    const graph::Node& node = g.node(b.node);
    if (node.op == graph::Op::kInput) {
      shapes.push_back(inputs[node.input_index].shape());
    } else if (auto it = stored.find(b.node); it != stored.end()) {
      shapes.push_back(it->second.shape());
    }
  }
  return shapes;
}

}  // namespace

void SetAlsoCompileCudaForCpu(bool on) { also_compile_cuda = on; }

absl::StatusOr<std::shared_ptr<const CompiledBinary>> CompileCudaSource(const std::string& source,
                                                                        const std::string& name, int arch,
                                                                        const TuningSnapshot& tuning,
                                                                        bool arch_specific) {
  // Knob::kFastMath (A/B runs only): approximate exp, division and square
  // root, denormals flushed. Only in the options, so in the key.
  std::vector<std::string> extra;
  if (tuning.On(Knob::kFastMath)) extra.push_back("--use_fast_math");
  std::vector<std::string> options = cuda::NvrtcBaseOptions(arch, arch_specific);
  options.insert(options.end(), extra.begin(), extra.end());
  const std::string key = absl::StrCat("cuda\n", cuda::NvrtcVersion(), "\n", absl::StrJoin(options, " "), "\n", source);
  return CompileCache::Get().GetOrCompile(
      "cuda", key, [&](const std::string& dir, const std::string& stem) -> absl::StatusOr<CompiledBinary> {
        absl::StatusOr<cuda::NvrtcOutput> out = cuda::CompileWithNvrtc(source, name, arch, extra, arch_specific);
        if (!out.ok()) {
          // Keep the source next to the error so the user can read and retry it.
          const std::string path = absl::StrCat(dir, "/", stem, ".cu");
          if (FILE* f = std::fopen(path.c_str(), "w")) {
            std::fputs(source.c_str(), f);
            std::fclose(f);
          }
          return absl::Status(out.status().code(), absl::StrCat(out.status().message(), "\nsource: ", path));
        }
        return CompiledBinary{.ptx = std::move(out->ptx), .cubin = std::move(out->cubin), .log = std::move(out->log)};
      });
}


struct Executable::CompiledKernel {
  Kernel ir;
  cpu::CpuKernelFn cpu_fn = nullptr;
  CUfunction cuda_fn = nullptr;
  // Split reductions: the partial kernels, one per pass, launched before cuda_fn.
  std::vector<CUfunction> cuda_partial_fns;
  // CUDA: the schedule, chosen once at compile time (cuda_schedule.h), the
  // device's SM count (the grid cap of grid-stride rows), and whether a
  // split's combine is launched as its programmatic dependent (sm_90+; it
  // starts while the partial kernel's last blocks run, hiding most of its launch).
  CudaSchedule schedule;
  int sm_count = 0;
  bool programmatic_combine = false;
  graph::NodeId extern_node = -1;  // extern kernels: the value stored (a matmul, or its epilogue's end)
  fusion::GemmChain chain;          // extern kernels: the matmul and its epilogue (fusion/gemm_epilogue.h)
  ExternPrepared extern_prepared;   // extern kernels: what they compiled ahead (attention's flash kernel)
  KernelCost cost;  // the profiler's roofline facts; a dynamic plan's are recomputed per profiled run
};

Executable::~Executable() = default;

absl::StatusOr<std::shared_ptr<const Executable>> Executable::Compile(fusion::Plan plan, const TuningSnapshot& tuning) {
  std::shared_ptr<Executable> exe(new Executable());
  exe->plan_ = std::move(plan);
  exe->tuning_ = tuning;
  const Device device = exe->plan_.graph.device();
  int arch = kNoDeviceArch, sm_count = 0;
  if (device.is_cuda()) {
    absl::StatusOr<int> capability = cuda::Driver::Get().ComputeCapability(device.index);
    if (!capability.ok()) return capability.status();
    arch = *capability;
    absl::StatusOr<int> sms = cuda::Driver::Get().MultiprocessorCount(device.index);
    if (!sms.ok()) return sms.status();
    sm_count = *sms;
  }
  // Lowered, printed and compiled up front, the compiles in parallel: the loop
  // below loads them (compile-cache hits) and reports a failed compile.
  const int64_t misses_ahead = CompileCache::Get().stats().compiles;
  CompileAheadTimes ahead;
  std::vector<PreparedKernel> prepared =
      CompileAhead(exe->plan_, arch, device.is_cpu() && also_compile_cuda, tuning, sm_count, &ahead);
  const auto compiled_ahead = std::chrono::steady_clock::now();
  exe->compiled_kernels_ = static_cast<int>(CompileCache::Get().stats().compiles - misses_ahead);
  absl::flat_hash_map<const CompiledBinary*, CUmodule> modules;
  for (size_t k = 0; k < prepared.size(); ++k) {
    const fusion::KernelGroup& group = exe->plan_.kernels[k];
    auto compiled = std::make_unique<CompiledKernel>();
    compiled->ir = std::move(prepared[k].ir);
    KernelInfo info{.name = group.name, .device = device.str(), .numel = compiled->ir.numel};
    if (group.kind == fusion::KernelKind::kExtern) {
      compiled->chain = fusion::ChainOf(exe->plan_.graph, group);
      compiled->extern_node = compiled->chain.end;
      compiled->cost = ExternKernelCost(exe->plan_.graph, compiled->chain);
      info.bytes = compiled->cost.bytes;
      info.flops = compiled->cost.flops;
      info.numel = Numel(exe->plan_.graph.node(compiled->extern_node).shape);
      info.source = DescribeExternKernel(exe->plan_.graph, compiled->chain, group.name, arch, tuning);
      if (exe->plan_.dynamic()) {  // it reads its sizes from each call
        absl::StrAppend(&info.source, "// run-time sizes (", absl::StrJoin(fusion::DescribeSymbols(exe->plan_.symbols), "; "),
                        "): the shapes above are those it was compiled at\n");
      }
      // Attention loads its flash kernel here (compiled ahead; a CPU plan: its CUDA twin).
      const int64_t misses_before = CompileCache::Get().stats().compiles;
      absl::StatusOr<ExternPrepared> extern_prepared = PrepareExtern(
          exe->plan_.graph, compiled->extern_node, arch, device.is_cpu() && also_compile_cuda, tuning);
      if (!extern_prepared.ok()) return extern_prepared.status();
      compiled->extern_prepared = *extern_prepared;
      if (const cuda::FlashKernel* flash = extern_prepared->flash) {
        info.ptx_summary = SummarizePtx(flash->binary->ptx, flash->binary->log);
        if (device.is_cuda()) info.ptx = flash->binary->ptx, info.compile_log = flash->binary->log;
      }
      exe->compiled_kernels_ += static_cast<int>(CompileCache::Get().stats().compiles - misses_before);
      exe->infos_.push_back(std::move(info));
      exe->kernels_.push_back(std::move(compiled));
      continue;
    }
    compiled->cost = GeneratedKernelCost(compiled->ir, exe->plan_.graph,
                                         compiled->ir.Iterations(exe->plan_.symbols.Values(exe->plan_.graph)));
    info.bytes = compiled->cost.bytes;
    info.flops = compiled->cost.flops;
    if (DebugDump("ir")) std::fprintf(stderr, "[fusebox ir]\n%s", compiled->ir.ToString().c_str());
    const int64_t misses_before = CompileCache::Get().stats().compiles;
    if (device.is_cpu()) {
      info.source = std::move(prepared[k].source);
      if (DebugDump("cpp")) std::fprintf(stderr, "[fusebox cpp]\n%s", info.source.c_str());
      DumpKernelSource(group.name, ".cc", info.source);
      absl::StatusOr<cpu::LoadedCpuKernel> loaded = cpu::CompileCpuKernel(prepared[k].entry_source, prepared[k].entry_name);
      if (!loaded.ok()) return NamedAfter(loaded.status(), group.name);
      compiled->cpu_fn = loaded->fn;
      if (also_compile_cuda) {
        DumpKernelSource(group.name, ".cu", prepared[k].cuda_source);
        auto cuda_binary = CompileCudaSource(prepared[k].cuda_entry_source, prepared[k].entry_name, arch, tuning);
        if (!cuda_binary.ok()) return NamedAfter(cuda_binary.status(), group.name);
        // What the kernel would look like on a GPU (sm_90): CI checks it too.
        info.ptx_summary = SummarizePtx((*cuda_binary)->ptx, (*cuda_binary)->log);
      }
    } else {
      cuda::Driver& driver = cuda::Driver::Get();
      info.source = std::move(prepared[k].source);
      if (DebugDump("cuda")) std::fprintf(stderr, "[fusebox cuda]\n%s", info.source.c_str());
      DumpKernelSource(group.name, ".cu", info.source);
      auto binary = CompileCudaSource(prepared[k].entry_source, prepared[k].entry_name, arch, tuning);
      if (!binary.ok()) return NamedAfter(binary.status(), group.name);
      info.ptx = UnderKernelName((*binary)->ptx, group.name);
      info.compile_log = UnderKernelName((*binary)->log, group.name);
      info.ptx_summary = SummarizePtx(info.ptx, info.compile_log);
      if (DebugDump("ptx")) {
        std::fprintf(stderr, "[fusebox ptx] %s (%s)\n%s", group.name.c_str(), info.ptx_summary->ToString().c_str(),
                     info.ptx.c_str());
      }
      // Kernels equal but for their names share one binary: load it once.
      CUmodule& module = modules[binary->get()];
      if (module == nullptr) {
        absl::StatusOr<CUmodule> loaded = driver.LoadModule(device.index, (*binary)->cubin);
        if (!loaded.ok()) return loaded.status();
        module = *loaded;
      }
      absl::StatusOr<CUfunction> fn = driver.GetFunction(module, prepared[k].entry_name);
      if (!fn.ok()) return fn.status();
      compiled->cuda_fn = *fn;
      // The schedule the source was printed for: the launch reads the same value.
      FUSEBOX_CHECK(prepared[k].schedule.has_value(), "kernel ", group.name, " has no CUDA schedule");
      const CudaSchedule& schedule = compiled->schedule = *prepared[k].schedule;
      info.schedule = schedule.ToString();
      if (DebugDump("schedule")) std::fprintf(stderr, "[fusebox schedule] %s: %s\n", group.name.c_str(), info.schedule.c_str());
      compiled->sm_count = sm_count;  // read once above: the grid cap of grid-stride rows
      if (schedule.shared_bytes > 0) {
        if (absl::Status s = driver.SetMaxDynamicSharedBytes(*fn, static_cast<int>(schedule.shared_bytes)); !s.ok()) {
          return s;
        }
      }
      if (schedule.spread.split > 1) {
        for (int p = 0; p < schedule.partial_launches; ++p) {
          const std::string name = p == 0 ? absl::StrCat(prepared[k].entry_name, "_partial")
                                        : absl::StrCat(prepared[k].entry_name, "_partial", p);
          absl::StatusOr<CUfunction> partial = driver.GetFunction(module, name);
          if (!partial.ok()) return partial.status();
          compiled->cuda_partial_fns.push_back(*partial);
        }
        compiled->programmatic_combine = arch >= 90;
      }
    }
    exe->compiled_kernels_ += static_cast<int>(CompileCache::Get().stats().compiles - misses_before);
    exe->infos_.push_back(std::move(info));
    exe->kernels_.push_back(std::move(compiled));
  }
  exe->checks_indices_ = std::any_of(exe->kernels_.begin(), exe->kernels_.end(), [](const auto& k) { return k->ir.checks_indices; });
  exe->has_externs_ = std::any_of(exe->kernels_.begin(), exe->kernels_.end(), [](const auto& k) { return k->extern_node >= 0; });
  const int64_t max_elements = cuda::GraphLaunchMaxElements(tuning);
  const bool chainable = std::all_of(exe->kernels_.begin(), exe->kernels_.end(), [&](const auto& k) {
    return k->extern_node < 0 && !k->programmatic_combine && k->ir.numel <= max_elements;
  });
  if (device.is_cuda() && chainable && !exe->kernels_.empty() && cuda::GraphLaunchesEnabled(tuning)) {
    exe->launch_graph_ = std::make_unique<cuda::LaunchGraph>(device.index);
  }
  exe->compile_times_ = {
      .codegen_ms = ahead.codegen_ms,
      .compile_ms = ahead.compile_ms,
      .load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - compiled_ahead).count()};
  return exe;
}

std::vector<std::string> PrintPlanKernels(const fusion::Plan& plan, const TuningSnapshot& tuning) {
  std::vector<std::string> sources;
  for (const fusion::KernelGroup& group : plan.kernels) {
    if (group.kind == fusion::KernelKind::kExtern) {
      sources.push_back(DescribeExternStructure(plan.graph, fusion::ChainOf(plan.graph, group), group.name));
      continue;
    }
    const Kernel ir = LowerKernel(plan, group, tuning);
    sources.push_back(absl::StrCat(PrintCuda(ir, tuning), cpu::PrintCpp(ir)));
  }
  return sources;
}

absl::StatusOr<std::vector<Tensor>> Executable::Run(absl::Span<const Tensor> inputs, StoredValues* stored_values) const {
  const graph::Graph& g = plan_.graph;
  const Device device = g.device();
  // Dynamic plans: the sizes of this call's run-time dims, read off the inputs.
  std::vector<int64_t> sizes;
  for (const auto& dims : plan_.symbols.sources) sizes.push_back(inputs[dims.front().input].shape()[dims.front().dim]);
  auto shape_of = [&](graph::NodeId id) {
    Shape shape = g.node(id).shape;
    for (size_t d = 0; !sizes.empty() && d < shape.size(); ++d) {
      if (const int32_t k = plan_.symbols.symbol(id, d); k >= 0) shape[d] = plan_.symbols.factor(id, d) * sizes[k];
    }
    return shape;
  };
  // Library calls read their sizes from the graph: a dynamic plan's, resized
  // to this call's sizes (FindDimSymbols lets their rows and sequences be
  // run-time sizes).
  std::optional<graph::Graph> resized;
  if (!sizes.empty() && has_externs_) resized = fusion::Resize(g, plan_.symbols, sizes);
  const graph::Graph& extern_graph = resized ? *resized : g;
  absl::flat_hash_map<graph::NodeId, Tensor> stored;
  absl::InlinedVector<void*, 16> args;  // a kernel's buffers: no allocation per call
  // CUDA: with a launch graph and no profiler timing each kernel, the
  // launches are kept and issued at the end, as one graph launch.
  const bool batch = launch_graph_ != nullptr && !profiler::Recording();
  absl::InlinedVector<PendingLaunch, 4> pending;
  // A split reduction's partial results live in scratch tensors until its
  // combine is queued (to the end of the run: launches may be batched).
  std::vector<Tensor> scratch;
  // Kernels that check indices share one error flag (index_check.h), zeroed
  // here. On the CPU it is read after the last kernel; on CUDA its copy to
  // the host is queued and the results carry the check (cuda/index_flag.h).
  Tensor cpu_flag;
  std::optional<cuda::IndexFlag> cuda_flag;
  void* flag_words = nullptr;
  if (checks_indices_ && device.is_cpu()) {
    cpu_flag = Tensor::empty({kIndexCheckWords}, DType::kInt64, device);
    flag_words = UncheckedDataPtr(cpu_flag);
    std::memset(flag_words, 0, kIndexCheckWords * sizeof(int64_t));
  } else if (checks_indices_) {
    absl::StatusOr<cuda::IndexFlag> flag = cuda::IndexFlag::Begin(device.index);
    if (!flag.ok()) return flag.status();
    cuda_flag = *std::move(flag);
    flag_words = cuda_flag->device_words();
  }
  for (const auto& k : kernels_) {
    if (k->extern_node >= 0) {
      if (g.StoreTarget(k->extern_node) >= 0) {
        return absl::UnimplementedError("a matmul's or attention's result stored in place into an input (e.g. "
                                        "x.copy_(a @ b)) is not supported; assign the result instead");
      }
      profiler::KernelRecord record(device);
      std::vector<Shape> operand_shapes;
      absl::StatusOr<Tensor> value = RunExtern(extern_graph, k->chain, inputs, stored, k->extern_prepared,
                                               record.active() ? &operand_shapes : nullptr);
      if (!value.ok()) return value.status();
      stored.emplace(k->extern_node, *std::move(value));
      if (record.active()) {
        KernelCost cost = k->cost;  // TF32 is decided per launch, as the GEMM decides it
        if (device.is_cuda() && cost.math == MathPeak::kFloat32 && MatmulAllowTf32()) cost.math = MathPeak::kTF32;
        record.Finish(k->ir.name, operand_shapes, 1, cost);
      }
      continue;
    }
    args.clear();
    for (const BufferParam& b : k->ir.buffers) {
      const graph::Node& node = g.node(b.node);
      if (b.is_output) {
        // In place: the kernel stores into the target input's tensor.
        const graph::NodeId target = g.StoreTarget(b.node);
        Tensor out = target < 0 ? Tensor::empty(shape_of(b.node), node.dtype, device)
                                : inputs[g.node(target).input_index];
        args.push_back(UncheckedDataPtr(out));
        stored.emplace(b.node, std::move(out));
      } else if (node.op == graph::Op::kInput) {
        args.push_back(UncheckedDataPtr(inputs[node.input_index]));
      } else {  // stored by an earlier kernel of this plan
        auto it = stored.find(b.node);
        if (it == stored.end()) return absl::InternalError(absl::StrCat("kernel ", k->ir.name, " reads %", b.node, " before it is computed"));
        args.push_back(UncheckedDataPtr(it->second));
      }
    }
    if (k->ir.checks_indices) args.push_back(flag_words);
    // The C++ kernels read run-time sizes through pointers after the buffers.
    if (device.is_cpu()) {
      for (int32_t symbol : k->ir.size_args) args.push_back(&sizes.at(symbol));
    }
    // A reduction over an empty dim still stores its identity in every row.
    const int64_t iterations = k->ir.Iterations(sizes);
    if (iterations == 0) continue;
    const int64_t cost = k->ir.is_reduction() ? std::max<int64_t>(k->ir.row_length, 1) : 1;
    profiler::KernelRecord record(device);  // inert (one atomic load) without a profiler
    if (device.is_cpu()) {
      ParallelFor(iterations, cost, [&](int64_t begin, int64_t end) { k->cpu_fn(args.data(), begin, end); });
    } else {
      if (k->schedule.spread.split > 1) {
        const int64_t parts = k->ir.num_rows * k->schedule.spread.split;
        for (const Pass& pass : k->ir.passes) {  // partials of every pass's accumulators, in order
          for (const Accumulator& a : pass.accumulators) {
            scratch.push_back(Tensor::empty({parts}, ComputeDType(a.dtype), device));
            args.push_back(UncheckedDataPtr(scratch.back()));
            if (a.index_temp >= 0) {
              scratch.push_back(Tensor::empty({parts}, DType::kInt64, device));
              args.push_back(UncheckedDataPtr(scratch.back()));
            }
          }
        }
      }
      PendingLaunch launch{.args = args, .n = iterations, .pass_n = k->ir.dynamic_extent};
      for (int32_t symbol : k->ir.size_args) {
        if (k->ir.index64) {
          launch.sizes.push_back(sizes.at(symbol));
        } else {
          launch.sizes32.push_back(static_cast<int>(sizes.at(symbol)));
        }
      }
      cuda::LaunchDims dims;
      const CudaSchedule& schedule = k->schedule;
      dims.grid_x = static_cast<unsigned>(schedule.Grid(iterations, k->sm_count));
      dims.block_x = static_cast<unsigned>(schedule.block);
      dims.shared_bytes = static_cast<unsigned>(schedule.shared_bytes);
      if (schedule.spread.split > 1) {
        // Each partial kernel after the first waits for the one before.
        for (size_t p = 0; p < k->cuda_partial_fns.size(); ++p) {
          PendingLaunch partial = launch;
          partial.function = k->cuda_partial_fns[p];
          partial.dims = dims;
          partial.dims.block_x = static_cast<unsigned>(schedule.partial_block);
          partial.dims.programmatic = p > 0 && k->programmatic_combine;
          pending.push_back(std::move(partial));
        }
        dims.grid_x = static_cast<unsigned>(schedule.combine_grid);
        dims.programmatic = k->programmatic_combine;
      }
      launch.function = k->cuda_fn;
      launch.dims = dims;
      pending.push_back(std::move(launch));
      if (!batch) {
        if (absl::Status s = IssueLaunches(device.index, absl::MakeSpan(pending), nullptr); !s.ok()) return s;
        pending.clear();
      }
    }
    if (record.active()) {
      const int launches = device.is_cuda() ? 1 + static_cast<int>(k->cuda_partial_fns.size()) : 1;
      record.Finish(k->ir.name, InputShapes(k->ir, g, inputs, stored), launches,
                    plan_.dynamic() ? GeneratedKernelCost(k->ir, g, inputs, stored, iterations) : k->cost);
    }
  }
  if (!pending.empty()) {  // batched: one graph launch
    if (absl::Status s = IssueLaunches(device.index, absl::MakeSpan(pending), launch_graph_.get()); !s.ok()) return s;
  }
  if (checks_indices_ && device.is_cpu()) {  // the kernels ran to completion
    const auto* flag = static_cast<const int64_t*>(flag_words);
    if (flag[0] != 0) return absl::InvalidArgumentError(IndexCheckMessage(flag));
  }
  // What this run computed carries the checks still pending for what it
  // read, and its own: a bad index fails the first read of its results.
  PendingError::Probe own;
  if (cuda_flag.has_value()) {
    absl::StatusOr<PendingError::Probe> probe = std::move(*cuda_flag).End();
    if (!probe.ok()) return probe.status();
    own = *std::move(probe);
  }
  absl::InlinedVector<std::shared_ptr<PendingError>, 4> read;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.impl().storage != nullptr) read.push_back(t.impl().storage->pending());
  }
  if (std::shared_ptr<PendingError> pending = PendingError::Join(std::move(own), read)) {
    for (auto& [node, value] : stored) value.impl().storage->set_pending(pending);
  }
  std::vector<Tensor> outputs;
  for (graph::NodeId out : g.outputs()) {
    const graph::Node& node = g.node(out);
    if (node.op == graph::Op::kInput) {
      outputs.push_back(inputs[node.input_index]);
    } else {
      auto it = stored.find(out);
      if (it == stored.end()) return absl::InternalError(absl::StrCat("output %", out, " was not computed"));
      outputs.push_back(it->second);
    }
  }
  if (stored_values != nullptr) *stored_values = std::move(stored);
  return outputs;
}

}  // namespace fusebox::backend
