// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1") so every
// fusebox binary starts on a machine with no GPU and says so plainly. Only the
// entry points fusebox uses are resolved. All work goes to the legacy default
// stream of each device's primary context, so launches and copies are ordered.
#pragma once

#include <cuda.h>  // types and enums only; nothing is linked from libcuda

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fusebox::cuda {

struct LaunchDims {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1, block_y = 1, block_z = 1;
  unsigned shared_bytes = 0;
  // A programmatic dependent launch (sm_90+, CUDA 12+): the kernel may start
  // before the previous one on the stream ends, and must execute
  // `griddepcontrol.wait` before it reads that kernel's results (a split
  // reduction's combine). Where the driver lacks cuLaunchKernelEx, a plain launch.
  bool programmatic = false;
};

// One kernel launch: `params` is the cuLaunchKernel parameter array.
struct KernelLaunch {
  CUfunction function = nullptr;
  LaunchDims dims;
  void** params = nullptr;
};

class Driver {
 public:
  // Loads the driver once (thread-safe); never throws. A missing library, a
  // failing cuInit or zero devices make available() false with a reason.
  static Driver& Get();

  bool available() const { return available_; }
  const std::string& unavailable_reason() const { return reason_; }
  int device_count() const { return device_count_; }

  // Makes `device`'s primary context current on the calling thread (retained
  // on first use, kept for the life of the process).
  absl::Status SetDevice(int device);
  absl::StatusOr<int> ComputeCapability(int device);  // 90 for sm_90
  absl::StatusOr<int> MultiprocessorCount(int device);
  // Any cuDeviceGetAttribute value (the profiler's roofline reads clocks and
  // the memory bus width).
  absl::StatusOr<int> DeviceAttribute(int device, CUdevice_attribute attribute);
  absl::StatusOr<std::string> DeviceName(int device);

  absl::StatusOr<CUdeviceptr> MemAlloc(int device, size_t bytes);
  absl::Status MemFree(int device, CUdeviceptr ptr);
  // Copies are synchronous with respect to the host.
  absl::Status CopyHostToDevice(int device, CUdeviceptr dst, const void* src, size_t bytes);
  absl::Status CopyDeviceToHost(int device, void* dst, CUdeviceptr src, size_t bytes);
  absl::Status CopyDeviceToDevice(int device, CUdeviceptr dst, CUdeviceptr src, size_t bytes);
  // Queued on the stream; the host does not wait (`dst` must be pinned: HostAlloc).
  absl::Status CopyDeviceToHostAsync(int device, void* dst, CUdeviceptr src, size_t bytes);
  // Queued on the stream: a pageable `src` is staged before the call
  // returns (so it may go away), and no device synchronization is done.
  absl::Status CopyHostToDeviceAsync(int device, CUdeviceptr dst, const void* src, size_t bytes);
  absl::Status MemsetD32Async(int device, CUdeviceptr dst, uint32_t value, size_t words);
  // Page-locked host memory (never freed by fusebox: pools keep it).
  absl::StatusOr<void*> HostAlloc(int device, size_t bytes);
  absl::Status Synchronize(int device);

  absl::StatusOr<CUmodule> LoadModule(int device, const std::string& cubin);
  absl::StatusOr<CUfunction> GetFunction(CUmodule module, const std::string& name);
  // Lets launches of `function` ask for `bytes` of dynamic shared memory
  // (over the default 48 KB; up to the device's opt-in limit).
  absl::Status SetMaxDynamicSharedBytes(CUfunction function, int bytes);
  // Any cuFuncGetAttribute value (CU_FUNC_ATTRIBUTE_NUM_REGS: the registers
  // a thread holds at launch).
  absl::StatusOr<int> FunctionAttribute(CUfunction function, CUfunction_attribute attribute);
  // A TMA descriptor (sm_90 on) of a `rank`-dim tensor at `address`: dims
  // innermost first, byte strides of dims 1.., the box each copy moves; no
  // interleave, out-of-bounds elements read as zeros. Unimplemented where the
  // driver predates CUDA 12.0; the driver's error where it rejects the layout.
  absl::StatusOr<CUtensorMap> EncodeTiledTensorMap(CUtensorMapDataType type, int rank, const void* address,
                                                   const uint64_t* dims, const uint64_t* strides, const uint32_t* box,
                                                   CUtensorMapSwizzle swizzle);
  // `args` is the cuLaunchKernel parameter array (pointers to each argument).
  absl::Status Launch(int device, CUfunction function, const LaunchDims& dims, void** args);

  // CUDA graphs of kernel launches in a chain (each node after the one
  // before), for launching a plan's kernels at once (launch_graph.h). The
  // entry points are optional: without them graphs_available() is false.
  bool graphs_available() const;
  // A graph of `launches`, instantiated; `nodes` receives its kernel nodes in order.
  absl::StatusOr<CUgraphExec> InstantiateKernelChain(int device, const KernelLaunch* launches, size_t count,
                                                     CUgraph* graph, CUgraphNode* nodes);
  // The node's function, dims and argument values for the next launches of
  // `exec` (launches already queued keep theirs).
  absl::Status SetKernelNode(CUgraphExec exec, CUgraphNode node, const KernelLaunch& launch);
  absl::Status LaunchGraph(int device, CUgraphExec exec);
  void DestroyGraph(CUgraph graph, CUgraphExec exec);

  // CUDA events on the default stream, for timing (benchmarks, profiler)
  // or, with `timing` off, for knowing when queued work is done.
  absl::StatusOr<CUevent> CreateEvent(int device, bool timing = true);
  absl::Status RecordEvent(int device, CUevent event);
  absl::StatusOr<float> ElapsedMs(CUevent start, CUevent end);  // synchronizes on `end`
  // Whether the work before `event`'s record is done; with `wait`, waits for it.
  absl::StatusOr<bool> EventDone(CUevent event, bool wait);
  void DestroyEvent(CUevent event);

 private:
  Driver();
  struct Api;          // resolved function pointers
  Api* api_ = nullptr; // owned, never freed (process lifetime)
  bool available_ = false;
  std::string reason_;
  int device_count_ = 0;
};

}  // namespace fusebox::cuda
