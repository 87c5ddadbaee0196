// A/B experiment (not part of the build): what one kernel launch costs the
// host on this machine, the floor under fusebox's tiny-gelu row (a call of
// 4096 elements is one launch, so its time per call is host time). Timed as
// fusebox_bench times that row: 100 calls, synchronize, host clock, median
// of 50 trials. Prints the runtime's <<<>>> launch, the driver's
// cuLaunchKernel (fusebox's path) and a one-node CUDA graph's replay.
//   nvcc -O3 -std=c++17 -arch=sm_90a bench/experiments/launch_floor.cu -lcuda -o launch_floor
#include <cuda.h>
#include <cuda_runtime.h>

#include "timing.cuh"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

__global__ void Gelu(const float* __restrict__ x, float* __restrict__ y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
  }
}

// The host's time per launch alone: 100 launches queued, no synchronize
// inside the clock (the queue holds them), median of 50 batches.
template <typename F>
double LaunchOnlyUs(F launch) {
  constexpr int kCalls = 100, kTrials = 50;
  std::vector<double> us;
  for (int t = 0; t < kTrials; ++t) {
    CHECK(cudaDeviceSynchronize());
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) launch();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / kCalls);
  }
  CHECK(cudaDeviceSynchronize());
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

template <typename F>
double HostUsPerCall(F launch) {
  constexpr int kCalls = 100, kTrials = 50;
  for (int i = 0; i < kCalls; ++i) launch();
  CHECK(cudaDeviceSynchronize());
  std::vector<double> us;
  for (int t = 0; t < kTrials; ++t) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) launch();
    CHECK(cudaDeviceSynchronize());
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / kCalls);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

int main() {
  constexpr int n = 4096;
  float *x, *y;
  CHECK(cudaMalloc(&x, n * 4));
  CHECK(cudaMalloc(&y, n * 4));
  const std::vector<float> h = Random(n, 7, 3);
  CHECK(cudaMemcpy(x, h.data(), n * 4, cudaMemcpyHostToDevice));
  int count = n;
  auto report = [](const char* name, auto launch) {
    const double with_sync = HostUsPerCall(launch), alone = LaunchOnlyUs(launch);
    std::printf("%-40s %6.2f us per call, %6.2f us to launch\n", name, with_sync, alone);
  };
  report("runtime <<<>>>, legacy stream", [&] { Gelu<<<n / 256, 256>>>(x, y, count); });

  cudaFunction_t function;
  CHECK(cudaGetFuncBySymbol(&function, reinterpret_cast<const void*>(&Gelu)));
  void* args[] = {&x, &y, &count};
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto driver_launch = [&](CUstream s) {
    return [&, s] {
      if (cuLaunchKernel(reinterpret_cast<CUfunction>(function), n / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr) !=
          CUDA_SUCCESS) {
        std::exit(1);
      }
    };
  };
  report("cuLaunchKernel, legacy stream", driver_launch(nullptr));
  report("cuLaunchKernel, non-blocking stream", driver_launch(reinterpret_cast<CUstream>(stream)));
  report("cuLaunchKernel, per-thread stream", driver_launch(CU_STREAM_PER_THREAD));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  Gelu<<<n / 256, 256, 0, stream>>>(x, y, count);
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  report("one-node graph, non-blocking stream", [&] { CHECK(cudaGraphLaunch(exec, stream)); });
  report("one-node graph, legacy stream", [&] { CHECK(cudaGraphLaunch(exec, nullptr)); });
  // What a traced call would add to replay it as a graph: new arguments.
  cudaGraphNode_t node;
  size_t nodes = 1;
  CHECK(cudaGraphGetNodes(graph, &node, &nodes));
  cudaKernelNodeParams params{};
  CHECK(cudaGraphKernelNodeGetParams(node, &params));
  params.kernelParams = args;
  report("graph: set kernel params, then launch", [&] {
    CHECK(cudaGraphExecKernelNodeSetParams(exec, node, &params));
    CHECK(cudaGraphLaunch(exec, stream));
  });
  std::printf("done\n");
}
