// Profiler::export_chrome_trace: the Trace Event Format ("X" complete events,
// microseconds) that chrome://tracing and Perfetto read. Host work is one
// process with a track per thread; each CUDA device is a process of its own.
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/container/btree_set.h"
#include "nlohmann/json.hpp"
#include "profiler/profiler.h"
#include "profiler/recorder.h"
#include "tensor/error.h"

namespace fusebox {
namespace {

using nlohmann::json;

constexpr int kHostPid = 1;
constexpr int kDevicePidBase = 100;  // cuda:N is process 100 + N
constexpr int kStreamTid = 1;        // the default stream, the only one fusebox uses

json Metadata(const char* what, int pid, int tid, const std::string& name) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

json Complete(const std::string& name, const char* cat, int pid, int tid, double ts, double dur, json args) {
  return {{"ph", "X"}, {"name", name}, {"cat", cat}, {"pid", pid}, {"tid", tid},
          {"ts", ts},  {"dur", dur},   {"args", std::move(args)}};
}

// Perfetto draws an arrow from a launch to its kernel ("ac2g", as torch does).
json Flow(const char* ph, int64_t id, int pid, int tid, double ts) {
  json flow = {{"ph", ph}, {"id", id}, {"name", "launch"}, {"cat", "ac2g"}, {"pid", pid}, {"tid", tid}, {"ts", ts}};
  if (ph[0] == 'f') flow["bp"] = "e";
  return flow;
}

}  // namespace

void Profiler::export_chrome_trace(const std::string& path) const {
  json trace_events = json::array();
  absl::btree_set<int> threads, devices;
  for (const ProfilerEvent& e : events()) {
    json args = {{"device", e.device}, {"input_shapes", e.input_shapes}, {"launches", e.launches}};
    threads.insert(e.thread);
    if (e.kind == ProfilerEvent::Kind::kHostOp) {
      args["kernel_compiles"] = e.compiles;
      if (e.device != "cpu") args["cuda_time_us"] = e.cuda_time_us;
      trace_events.push_back(Complete(e.name, "graph_run", kHostPid, e.thread, e.cpu_start_us, e.cpu_time_us, args));
      continue;
    }
    args["bytes"] = e.bytes;  // the kernel's minimal bytes and FLOPs (KernelCost)
    args["flops"] = e.flops;
    if (e.cuda_start_us < 0) {  // a CPU kernel runs on the host
      trace_events.push_back(Complete(e.name, "cpu_kernel", kHostPid, e.thread, e.cpu_start_us, e.cpu_time_us, args));
    } else {
      const int pid = kDevicePidBase + profiler::ParseDevice(e.device).index;
      devices.insert(profiler::ParseDevice(e.device).index);
      args["correlation"] = e.id;
      json launch_args = args;
      launch_args["kernel"] = e.name;
      trace_events.push_back(Complete("cuLaunchKernel", "cuda_launch", kHostPid, e.thread, e.cpu_start_us,
                                      e.cpu_time_us, std::move(launch_args)));
      trace_events.push_back(Complete(e.name, "kernel", pid, kStreamTid, e.cuda_start_us, e.cuda_time_us, args));
      trace_events.push_back(Flow("s", e.id, kHostPid, e.thread, e.cpu_start_us));
      trace_events.push_back(Flow("f", e.id, pid, kStreamTid, e.cuda_start_us));
    }
  }
  trace_events.push_back(Metadata("process_name", kHostPid, 0, "fusebox host"));
  for (int thread : threads) {
    trace_events.push_back(Metadata("thread_name", kHostPid, thread, absl::StrCat("host thread ", thread)));
  }
  for (int device : devices) {
    const std::string name = absl::StrCat("cuda:", device);
    trace_events.push_back(Metadata("process_name", kDevicePidBase + device, 0, name));
    trace_events.push_back(Metadata("thread_name", kDevicePidBase + device, kStreamTid, absl::StrCat(name, " default stream")));
  }
  const json trace = {{"traceEvents", std::move(trace_events)}, {"displayTimeUnit", "ms"}};

  std::ofstream out(path);
  FUSEBOX_ENSURE(out.is_open(), "Profiler: cannot write the Chrome trace to '", path, "': ", std::strerror(errno));
  out << trace.dump() << "\n";
  out.close();
  FUSEBOX_ENSURE(!out.fail(), "Profiler: writing the Chrome trace to '", path, "' failed: ", std::strerror(errno));
}

}  // namespace fusebox
