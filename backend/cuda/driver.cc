#include "backend/cuda/driver.h"

#include <dlfcn.h>

#include <initializer_list>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "tensor/mutex.h"
#include "spdlog/spdlog.h"

namespace fusebox::cuda {

namespace {

// What error messages need; kept apart from Driver::Api (private to Driver)
// so the free helpers below can use it.
struct ErrorText {
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
};

}  // namespace

// Function pointer types come from the declarations in cuda.h; the macros there
// (cuMemAlloc -> cuMemAlloc_v2, ...) make decltype pick the versioned ones,
// which must match the symbol names passed to dlsym in Resolve().
struct Driver::Api : ErrorText {
  void* library = nullptr;
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDriverGetVersion) driver_get_version = nullptr;
  decltype(&::cuDeviceGetCount) device_get_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuDeviceGetName) device_get_name = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuCtxSynchronize) ctx_synchronize = nullptr;
  decltype(&::cuMemAlloc) mem_alloc = nullptr;
  decltype(&::cuMemFree) mem_free = nullptr;
  decltype(&::cuMemcpyHtoD) memcpy_htod = nullptr;
  decltype(&::cuMemcpyDtoH) memcpy_dtoh = nullptr;
  decltype(&::cuMemcpyDtoD) memcpy_dtod = nullptr;
  decltype(&::cuMemcpyDtoHAsync) memcpy_dtoh_async = nullptr;
  decltype(&::cuMemcpyHtoDAsync) memcpy_htod_async = nullptr;
  decltype(&::cuMemsetD32Async) memset_d32_async = nullptr;
  decltype(&::cuMemAllocHost) mem_alloc_host = nullptr;
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuLaunchKernel) launch_kernel = nullptr;
  decltype(&::cuLaunchKernelEx) launch_kernel_ex = nullptr;  // CUDA 12.0+; optional (LaunchDims::programmatic)
  decltype(&::cuFuncSetAttribute) func_set_attribute = nullptr;
  decltype(&::cuFuncGetAttribute) func_get_attribute = nullptr;
  decltype(&::cuTensorMapEncodeTiled) tensor_map_encode_tiled = nullptr;  // CUDA 12.0+; optional (TMA)
  // CUDA graphs (optional, all or none: Driver::graphs_available).
  decltype(&::cuGraphCreate) graph_create = nullptr;
  decltype(&::cuGraphAddKernelNode) graph_add_kernel_node = nullptr;
  decltype(&::cuGraphInstantiate) graph_instantiate = nullptr;
  decltype(&::cuGraphExecKernelNodeSetParams) graph_exec_kernel_node_set_params = nullptr;
  decltype(&::cuGraphLaunch) graph_launch = nullptr;
  decltype(&::cuGraphExecDestroy) graph_exec_destroy = nullptr;
  decltype(&::cuGraphDestroy) graph_destroy = nullptr;
  decltype(&::cuEventCreate) event_create = nullptr;
  decltype(&::cuEventRecord) event_record = nullptr;
  decltype(&::cuEventSynchronize) event_synchronize = nullptr;
  decltype(&::cuEventQuery) event_query = nullptr;
  decltype(&::cuEventElapsedTime) event_elapsed_time = nullptr;
  decltype(&::cuEventDestroy) event_destroy = nullptr;

  std::vector<CUdevice> devices;     // by ordinal, filled at load
  fusebox::Mutex mu;                    // guards contexts
  std::vector<CUcontext> contexts;   // retained primary contexts, null until used
};

namespace {

// The device whose primary context this thread last made current; saves a
// driver call per launch. Code outside fusebox that switches contexts on a
// fusebox thread would make this stale.
thread_local int tls_current_device = -1;

template <typename Fn>
bool Resolve(void* library, Fn& fn, std::initializer_list<const char*> names, std::string* missing) {
  for (const char* name : names) {
    if (void* sym = dlsym(library, name)) {
      fn = reinterpret_cast<Fn>(sym);
      return true;
    }
  }
  *missing = *names.begin();
  return false;
}

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", also for codes the driver does
// not know (it then leaves the strings null).
std::string DescribeResult(const ErrorText* api, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  api->get_error_name(result, &name);
  api->get_error_string(result, &text);
  // The stub libcuda.so (linked by mistake or found first) knows no names.
  if (name == nullptr && result == CUDA_ERROR_STUB_LIBRARY) {
    name = "CUDA_ERROR_STUB_LIBRARY";
    text = "the CUDA driver stub library was loaded instead of the real driver";
  }
  return absl::StrCat(name ? name : absl::StrCat("CUresult ", static_cast<int>(result)), " (",
                      text ? text : "unknown error", ")");
}

// "<call> failed: <NAME> (<text>)", with a code callers can act on (the
// caching allocator retries after ResourceExhausted).
absl::Status CallError(const ErrorText* api, CUresult result, absl::string_view call) {
  std::string message = absl::StrCat(call, " failed: ", DescribeResult(api, result));
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY: return absl::ResourceExhaustedError(message);
    case CUDA_ERROR_NOT_FOUND: return absl::NotFoundError(message);
    case CUDA_ERROR_INVALID_VALUE: return absl::InvalidArgumentError(message);
    default: return absl::InternalError(message);
  }
}

// "grid 8192x1x1, block 256x1x1, 0 B shared", for launch errors.
std::string DescribeDims(const LaunchDims& d) {
  return absl::StrFormat("grid %dx%dx%d, block %dx%dx%d, %d B shared", d.grid_x, d.grid_y, d.grid_z, d.block_x,
                         d.block_y, d.block_z, d.shared_bytes);
}

absl::Status CheckAvailable(const Driver& driver) {
  if (driver.available()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("CUDA is not available: ", driver.unavailable_reason()));
}

absl::Status CheckDevice(const Driver& driver, int device) {
  if (absl::Status s = CheckAvailable(driver); !s.ok()) return s;
  if (device < 0 || device >= driver.device_count()) {
    return absl::InvalidArgumentError(absl::StrCat("cuda:", device, " does not exist; this machine has ",
                                                   driver.device_count(), " CUDA device(s)"));
  }
  return absl::OkStatus();
}

}  // namespace

Driver& Driver::Get() {
  // Leaked on purpose: allocators and modules may be released during static
  // destruction and still need the driver.
  static Driver* driver = new Driver();
  return *driver;
}

Driver::Driver() {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::string first_error = dlerror();
    library = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      reason_ = absl::StrCat("the CUDA driver library libcuda.so.1 could not be loaded (", first_error,
                             "); is the NVIDIA driver installed?");
      spdlog::debug("CUDA unavailable: {}", reason_);
      return;
    }
  }

  auto* api = new Api();
  api->library = library;
  std::string missing;
  bool ok = Resolve(library, api->get_error_name, {"cuGetErrorName"}, &missing) &&
            Resolve(library, api->get_error_string, {"cuGetErrorString"}, &missing) &&
            Resolve(library, api->init, {"cuInit"}, &missing) &&
            Resolve(library, api->driver_get_version, {"cuDriverGetVersion"}, &missing) &&
            Resolve(library, api->device_get_count, {"cuDeviceGetCount"}, &missing) &&
            Resolve(library, api->device_get, {"cuDeviceGet"}, &missing) &&
            Resolve(library, api->device_get_attribute, {"cuDeviceGetAttribute"}, &missing) &&
            Resolve(library, api->device_get_name, {"cuDeviceGetName"}, &missing) &&
            Resolve(library, api->primary_ctx_retain, {"cuDevicePrimaryCtxRetain"}, &missing) &&
            Resolve(library, api->ctx_set_current, {"cuCtxSetCurrent"}, &missing) &&
            Resolve(library, api->ctx_synchronize, {"cuCtxSynchronize"}, &missing) &&
            Resolve(library, api->mem_alloc, {"cuMemAlloc_v2"}, &missing) &&
            Resolve(library, api->mem_free, {"cuMemFree_v2"}, &missing) &&
            Resolve(library, api->memcpy_htod, {"cuMemcpyHtoD_v2"}, &missing) &&
            Resolve(library, api->memcpy_dtoh, {"cuMemcpyDtoH_v2"}, &missing) &&
            Resolve(library, api->memcpy_dtod, {"cuMemcpyDtoD_v2"}, &missing) &&
            Resolve(library, api->memcpy_dtoh_async, {"cuMemcpyDtoHAsync_v2"}, &missing) &&
            Resolve(library, api->memcpy_htod_async, {"cuMemcpyHtoDAsync_v2"}, &missing) &&
            Resolve(library, api->memset_d32_async, {"cuMemsetD32Async"}, &missing) &&
            Resolve(library, api->mem_alloc_host, {"cuMemAllocHost_v2"}, &missing) &&
            Resolve(library, api->module_load_data, {"cuModuleLoadData"}, &missing) &&
            Resolve(library, api->module_get_function, {"cuModuleGetFunction"}, &missing) &&
            Resolve(library, api->launch_kernel, {"cuLaunchKernel"}, &missing) &&
            Resolve(library, api->func_set_attribute, {"cuFuncSetAttribute"}, &missing) &&
            Resolve(library, api->func_get_attribute, {"cuFuncGetAttribute"}, &missing) &&
            Resolve(library, api->event_create, {"cuEventCreate"}, &missing) &&
            Resolve(library, api->event_record, {"cuEventRecord"}, &missing) &&
            Resolve(library, api->event_synchronize, {"cuEventSynchronize"}, &missing) &&
            Resolve(library, api->event_query, {"cuEventQuery"}, &missing) &&
            // _v2 appeared in CUDA 12.8; older drivers only have the original,
            // which has the same signature.
            Resolve(library, api->event_elapsed_time, {"cuEventElapsedTime_v2", "cuEventElapsedTime"},
                    &missing) &&
            Resolve(library, api->event_destroy, {"cuEventDestroy_v2"}, &missing);
  if (!ok) {
    reason_ = absl::StrCat("the CUDA driver library lacks ", missing, " (driver too old?)");
    spdlog::debug("CUDA unavailable: {}", reason_);
    delete api;
    dlclose(library);
    return;
  }
  // Optional: without it, kernels that load by TMA take their cp.async twins.
  api->tensor_map_encode_tiled =
      reinterpret_cast<decltype(api->tensor_map_encode_tiled)>(dlsym(library, "cuTensorMapEncodeTiled"));
  // Optional: without it, programmatic launches are plain ones.
  api->launch_kernel_ex = reinterpret_cast<decltype(api->launch_kernel_ex)>(dlsym(library, "cuLaunchKernelEx"));
  // Optional: without them, plans launch kernel by kernel.
  std::string no_graphs;
  if (!(Resolve(library, api->graph_create, {"cuGraphCreate"}, &no_graphs) &&
        Resolve(library, api->graph_add_kernel_node, {"cuGraphAddKernelNode_v2"}, &no_graphs) &&
        Resolve(library, api->graph_instantiate, {"cuGraphInstantiateWithFlags"}, &no_graphs) &&
        Resolve(library, api->graph_exec_kernel_node_set_params, {"cuGraphExecKernelNodeSetParams_v2"}, &no_graphs) &&
        Resolve(library, api->graph_launch, {"cuGraphLaunch"}, &no_graphs) &&
        Resolve(library, api->graph_exec_destroy, {"cuGraphExecDestroy"}, &no_graphs) &&
        Resolve(library, api->graph_destroy, {"cuGraphDestroy"}, &no_graphs))) {
    spdlog::debug("CUDA graphs unavailable: the driver lacks {}", no_graphs);
    api->graph_create = nullptr;
  }
  api_ = api;

  if (CUresult r = api->init(0); r != CUDA_SUCCESS) {
    reason_ = absl::StrCat("cuInit failed: ", DescribeResult(api, r));
    spdlog::debug("CUDA unavailable: {}", reason_);
    return;
  }
  int count = 0;
  if (CUresult r = api->device_get_count(&count); r != CUDA_SUCCESS) {
    reason_ = absl::StrCat("cuDeviceGetCount failed: ", DescribeResult(api, r));
    spdlog::debug("CUDA unavailable: {}", reason_);
    return;
  }
  if (count == 0) {
    reason_ = "the CUDA driver loaded but reports no CUDA devices";
    spdlog::debug("CUDA unavailable: {}", reason_);
    return;
  }
  api->devices.resize(count);
  for (int i = 0; i < count; ++i) {
    if (CUresult r = api->device_get(&api->devices[i], i); r != CUDA_SUCCESS) {
      reason_ = absl::StrCat("cuDeviceGet(", i, ") failed: ", DescribeResult(api, r));
      spdlog::debug("CUDA unavailable: {}", reason_);
      return;
    }
  }
  api->contexts.assign(count, nullptr);
  device_count_ = count;
  available_ = true;

  int version = 0;
  api->driver_get_version(&version);
  spdlog::debug("CUDA driver {}.{} loaded: {} device(s)", version / 1000, (version % 1000) / 10, count);
}

absl::Status Driver::SetDevice(int device) {
  if (absl::Status s = CheckDevice(*this, device); !s.ok()) return s;
  if (tls_current_device == device) return absl::OkStatus();

  CUcontext context = nullptr;
  {
    fusebox::MutexLock lock(&api_->mu);
    context = api_->contexts[device];
    if (context == nullptr) {
      if (CUresult r = api_->primary_ctx_retain(&context, api_->devices[device]); r != CUDA_SUCCESS) {
        return CallError(api_, r, absl::StrCat("cuDevicePrimaryCtxRetain on cuda:", device));
      }
      api_->contexts[device] = context;
    }
  }
  if (CUresult r = api_->ctx_set_current(context); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrCat("cuCtxSetCurrent on cuda:", device));
  }
  tls_current_device = device;
  return absl::OkStatus();
}

// Attribute queries need a device handle but no context, so they do not
// retain one (a primary context costs hundreds of MB of device memory).
absl::StatusOr<int> Driver::ComputeCapability(int device) {
  if (absl::Status s = CheckDevice(*this, device); !s.ok()) return s;
  int major = 0, minor = 0;
  CUresult r = api_->device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, api_->devices[device]);
  if (r == CUDA_SUCCESS) {
    r = api_->device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, api_->devices[device]);
  }
  if (r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrCat("cuDeviceGetAttribute(compute capability) on cuda:", device));
  }
  return major * 10 + minor;
}

absl::StatusOr<int> Driver::MultiprocessorCount(int device) {
  return DeviceAttribute(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
}

absl::StatusOr<int> Driver::DeviceAttribute(int device, CUdevice_attribute attribute) {
  if (absl::Status s = CheckDevice(*this, device); !s.ok()) return s;
  int value = 0;
  CUresult r = api_->device_get_attribute(&value, attribute, api_->devices[device]);
  if (r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrCat("cuDeviceGetAttribute(", static_cast<int>(attribute), ") on cuda:", device));
  }
  return value;
}

absl::StatusOr<std::string> Driver::DeviceName(int device) {
  if (absl::Status s = CheckDevice(*this, device); !s.ok()) return s;
  char name[256] = {};
  if (CUresult r = api_->device_get_name(name, sizeof(name), api_->devices[device]); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrCat("cuDeviceGetName on cuda:", device));
  }
  return std::string(name);
}

absl::StatusOr<CUdeviceptr> Driver::MemAlloc(int device, size_t bytes) {
  if (absl::Status s = SetDevice(device); !s.ok()) return s;
  CUdeviceptr ptr = 0;
  if (CUresult r = api_->mem_alloc(&ptr, bytes); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrFormat("cuMemAlloc(%d bytes) on cuda:%d", bytes, device));
  }
  return ptr;
}

absl::Status Driver::MemFree(int device, CUdeviceptr ptr) {
  if (absl::Status s = SetDevice(device); !s.ok()) return s;
  if (CUresult r = api_->mem_free(ptr); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrFormat("cuMemFree(0x%x) on cuda:%d", ptr, device));
  }
  return absl::OkStatus();
}

absl::Status Driver::CopyHostToDevice(int device, CUdeviceptr dst, const void* src, size_t bytes) {
  if (absl::Status s = SetDevice(device); !s.ok()) return s;
  if (CUresult r = api_->memcpy_htod(dst, src, bytes); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrFormat("cuMemcpyHtoD(%d bytes) on cuda:%d", bytes, device));
  }
  return absl::OkStatus();
}

absl::Status Driver::CopyDeviceToHost(int device, void* dst, CUdeviceptr src, size_t bytes) {
  if (absl::Status s = SetDevice(device); !s.ok()) return s;
  if (CUresult r = api_->memcpy_dtoh(dst, src, bytes); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrFormat("cuMemcpyDtoH(%d bytes) on cuda:%d", bytes, device));
  }
  return absl::OkStatus();
}

absl::Status Driver::CopyDeviceToDevice(int device, CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  if (absl::Status s = SetDevice(device); !s.ok()) return s;
  if (CUresult r = api_->memcpy_dtod(dst, src, bytes); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrFormat("cuMemcpyDtoD(%d bytes) on cuda:%d", bytes, device));
  }
  return absl::OkStatus();
}

absl::Status Driver::CopyHostToDeviceAsync(int device, CUdeviceptr dst, const void* src, size_t bytes) {
  if (absl::Status s = SetDevice(device); !s.ok()) return s;
  if (CUresult r = api_->memcpy_htod_async(dst, src, bytes, /*hStream=*/nullptr); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrFormat("cuMemcpyHtoDAsync(%d bytes) on cuda:%d", bytes, device));
  }
  return absl::OkStatus();
}

absl::Status Driver::CopyDeviceToHostAsync(int device, void* dst, CUdeviceptr src, size_t bytes) {
  if (absl::Status s = SetDevice(device); !s.ok()) return s;
  if (CUresult r = api_->memcpy_dtoh_async(dst, src, bytes, /*hStream=*/nullptr); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrFormat("cuMemcpyDtoHAsync(%d bytes) on cuda:%d", bytes, device));
  }
  return absl::OkStatus();
}

absl::Status Driver::MemsetD32Async(int device, CUdeviceptr dst, uint32_t value, size_t words) {
  if (absl::Status s = SetDevice(device); !s.ok()) return s;
  if (CUresult r = api_->memset_d32_async(dst, value, words, /*hStream=*/nullptr); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrFormat("cuMemsetD32Async(%d words) on cuda:%d", words, device));
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> Driver::HostAlloc(int device, size_t bytes) {
  if (absl::Status s = SetDevice(device); !s.ok()) return s;
  void* ptr = nullptr;
  if (CUresult r = api_->mem_alloc_host(&ptr, bytes); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrFormat("cuMemAllocHost(%d bytes) on cuda:%d", bytes, device));
  }
  return ptr;
}

absl::Status Driver::Synchronize(int device) {
  if (absl::Status s = SetDevice(device); !s.ok()) return s;
  if (CUresult r = api_->ctx_synchronize(); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrCat("cuCtxSynchronize on cuda:", device));
  }
  return absl::OkStatus();
}

absl::StatusOr<CUmodule> Driver::LoadModule(int device, const std::string& cubin) {
  if (absl::Status s = SetDevice(device); !s.ok()) return s;
  CUmodule module = nullptr;
  // c_str(): the driver also accepts NUL-terminated PTX here.
  if (CUresult r = api_->module_load_data(&module, cubin.c_str()); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrFormat("cuModuleLoadData(%d byte image) on cuda:%d", cubin.size(), device));
  }
  return module;
}

absl::StatusOr<CUfunction> Driver::GetFunction(CUmodule module, const std::string& name) {
  if (absl::Status s = CheckAvailable(*this); !s.ok()) return s;
  CUfunction function = nullptr;
  if (CUresult r = api_->module_get_function(&function, module, name.c_str()); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrCat("cuModuleGetFunction(\"", name, "\")"));
  }
  return function;
}

absl::Status Driver::SetMaxDynamicSharedBytes(CUfunction function, int bytes) {
  if (absl::Status s = CheckAvailable(*this); !s.ok()) return s;
  if (CUresult r = api_->func_set_attribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
      r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrCat("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, ", bytes, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Driver::FunctionAttribute(CUfunction function, CUfunction_attribute attribute) {
  if (absl::Status s = CheckAvailable(*this); !s.ok()) return s;
  int value = 0;
  if (CUresult r = api_->func_get_attribute(&value, attribute, function); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrCat("cuFuncGetAttribute(", static_cast<int>(attribute), ")"));
  }
  return value;
}

absl::StatusOr<CUtensorMap> Driver::EncodeTiledTensorMap(CUtensorMapDataType type, int rank, const void* address,
                                                         const uint64_t* dims, const uint64_t* strides,
                                                         const uint32_t* box, CUtensorMapSwizzle swizzle) {
  if (absl::Status s = CheckAvailable(*this); !s.ok()) return s;
  if (api_->tensor_map_encode_tiled == nullptr) {
    return absl::UnimplementedError("the CUDA driver lacks cuTensorMapEncodeTiled (before CUDA 12.0)");
  }
  if (rank < 1 || rank > 5) return absl::InvalidArgumentError(absl::StrCat("a tensor map has 1 to 5 dims, not ", rank));
  CUtensorMap map;
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};  // every element of the box (no heap work per launch)
  static_assert(sizeof(cuuint64_t) == sizeof(uint64_t) && sizeof(cuuint32_t) == sizeof(uint32_t));
  if (CUresult r = api_->tensor_map_encode_tiled(
          &map, type, rank, const_cast<void*>(address), reinterpret_cast<const cuuint64_t*>(dims),
          reinterpret_cast<const cuuint64_t*>(strides), reinterpret_cast<const cuuint32_t*>(box),
          element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      r != CUDA_SUCCESS) {
    return CallError(api_, r, "cuTensorMapEncodeTiled");
  }
  return map;
}

absl::Status Driver::Launch(int device, CUfunction function, const LaunchDims& d, void** args) {
  if (absl::Status s = SetDevice(device); !s.ok()) return s;
  CUresult r;
  const bool programmatic = d.programmatic && api_->launch_kernel_ex != nullptr;
  if (programmatic) {
    CUlaunchAttribute attribute{};
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config{};
    config.gridDimX = d.grid_x;
    config.gridDimY = d.grid_y;
    config.gridDimZ = d.grid_z;
    config.blockDimX = d.block_x;
    config.blockDimY = d.block_y;
    config.blockDimZ = d.block_z;
    config.sharedMemBytes = d.shared_bytes;
    config.hStream = nullptr;
    config.attrs = &attribute;
    config.numAttrs = 1;
    r = api_->launch_kernel_ex(&config, function, args, /*extra=*/nullptr);
  } else {
    r = api_->launch_kernel(function, d.grid_x, d.grid_y, d.grid_z, d.block_x, d.block_y, d.block_z, d.shared_bytes,
                            /*hStream=*/nullptr, args, /*extra=*/nullptr);
  }
  if (r != CUDA_SUCCESS) {
    return CallError(api_, r,
                     absl::StrCat(programmatic ? "cuLaunchKernelEx, programmatic" : "cuLaunchKernel", "(",
                                  DescribeDims(d), ") on cuda:", device));
  }
  return absl::OkStatus();
}

absl::StatusOr<CUevent> Driver::CreateEvent(int device, bool timing) {
  if (absl::Status s = SetDevice(device); !s.ok()) return s;
  CUevent event = nullptr;
  if (CUresult r = api_->event_create(&event, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrCat("cuEventCreate on cuda:", device));
  }
  return event;
}

absl::Status Driver::RecordEvent(int device, CUevent event) {
  if (absl::Status s = SetDevice(device); !s.ok()) return s;
  if (CUresult r = api_->event_record(event, /*hStream=*/nullptr); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrCat("cuEventRecord on cuda:", device));
  }
  return absl::OkStatus();
}

absl::StatusOr<float> Driver::ElapsedMs(CUevent start, CUevent end) {
  if (absl::Status s = CheckAvailable(*this); !s.ok()) return s;
  if (CUresult r = api_->event_synchronize(end); r != CUDA_SUCCESS) {
    return CallError(api_, r, "cuEventSynchronize");
  }
  float ms = 0;
  if (CUresult r = api_->event_elapsed_time(&ms, start, end); r != CUDA_SUCCESS) {
    return CallError(api_, r, "cuEventElapsedTime");
  }
  return ms;
}

absl::StatusOr<bool> Driver::EventDone(CUevent event, bool wait) {
  if (absl::Status s = CheckAvailable(*this); !s.ok()) return s;
  const CUresult r = wait ? api_->event_synchronize(event) : api_->event_query(event);
  if (r == CUDA_ERROR_NOT_READY) return false;
  if (r != CUDA_SUCCESS) return CallError(api_, r, wait ? "cuEventSynchronize" : "cuEventQuery");
  return true;
}

void Driver::DestroyEvent(CUevent event) {
  if (!available_ || event == nullptr) return;
  if (CUresult r = api_->event_destroy(event); r != CUDA_SUCCESS) {
    spdlog::warn("cuEventDestroy failed: {}", DescribeResult(api_, r));
  }
}

namespace {

CUDA_KERNEL_NODE_PARAMS KernelNodeParams(const KernelLaunch& launch) {
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = launch.function;
  p.gridDimX = launch.dims.grid_x;
  p.gridDimY = launch.dims.grid_y;
  p.gridDimZ = launch.dims.grid_z;
  p.blockDimX = launch.dims.block_x;
  p.blockDimY = launch.dims.block_y;
  p.blockDimZ = launch.dims.block_z;
  p.sharedMemBytes = launch.dims.shared_bytes;
  p.kernelParams = launch.params;
  return p;
}

}  // namespace

bool Driver::graphs_available() const { return available_ && api_->graph_create != nullptr; }

absl::StatusOr<CUgraphExec> Driver::InstantiateKernelChain(int device, const KernelLaunch* launches, size_t count,
                                                           CUgraph* graph, CUgraphNode* nodes) {
  if (!graphs_available()) return absl::FailedPreconditionError("this CUDA driver has no graph API");
  if (absl::Status s = SetDevice(device); !s.ok()) return s;
  if (CUresult r = api_->graph_create(graph, 0); r != CUDA_SUCCESS) return CallError(api_, r, "cuGraphCreate");
  for (size_t k = 0; k < count; ++k) {
    const CUDA_KERNEL_NODE_PARAMS p = KernelNodeParams(launches[k]);
    if (CUresult r = api_->graph_add_kernel_node(&nodes[k], *graph, k == 0 ? nullptr : &nodes[k - 1], k == 0 ? 0 : 1, &p);
        r != CUDA_SUCCESS) {
      api_->graph_destroy(*graph);
      return CallError(api_, r, absl::StrCat("cuGraphAddKernelNode (node ", k, " of ", count, ")"));
    }
  }
  CUgraphExec exec = nullptr;
  if (CUresult r = api_->graph_instantiate(&exec, *graph, 0); r != CUDA_SUCCESS) {
    api_->graph_destroy(*graph);
    return CallError(api_, r, absl::StrCat("cuGraphInstantiate (", count, " kernel nodes) on cuda:", device));
  }
  return exec;
}

absl::Status Driver::SetKernelNode(CUgraphExec exec, CUgraphNode node, const KernelLaunch& launch) {
  const CUDA_KERNEL_NODE_PARAMS p = KernelNodeParams(launch);
  if (CUresult r = api_->graph_exec_kernel_node_set_params(exec, node, &p); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrCat("cuGraphExecKernelNodeSetParams(", DescribeDims(launch.dims), ")"));
  }
  return absl::OkStatus();
}

absl::Status Driver::LaunchGraph(int device, CUgraphExec exec) {
  if (absl::Status s = SetDevice(device); !s.ok()) return s;
  if (CUresult r = api_->graph_launch(exec, /*hStream=*/nullptr); r != CUDA_SUCCESS) {
    return CallError(api_, r, absl::StrCat("cuGraphLaunch on cuda:", device));
  }
  return absl::OkStatus();
}

void Driver::DestroyGraph(CUgraph graph, CUgraphExec exec) {
  if (!graphs_available()) return;
  // At process exit the driver may be torn down before the plans that own
  // graphs: nothing is left to free then.
  auto warn = [&](CUresult r, const char* call) {
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED) spdlog::warn("{} failed: {}", call, DescribeResult(api_, r));
  };
  if (exec != nullptr) warn(api_->graph_exec_destroy(exec), "cuGraphExecDestroy");
  if (graph != nullptr) warn(api_->graph_destroy(graph), "cuGraphDestroy");
}

}  // namespace fusebox::cuda
