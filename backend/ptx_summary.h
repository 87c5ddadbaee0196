// What a kernel's PTX does with memory and registers, read off the PTX text
// and ptxas -v: global/shared loads and stores by width, warp shuffles,
// registers, spills, shared memory. The seed read PTX by hand for exactly
// this (is the load vectorized? does it spill?); c.kernels() carries it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/string_view.h"

namespace fusebox {

struct PtxSummary {
  // Memory instructions in the PTX text (static counts, not executed ones),
  // by access width in bytes: ld.global.v4.f32 is one 16-byte load, and
  // ld.global.nc.* (read-only path) counts as a global load.
  std::map<int, int64_t> global_loads, global_stores;
  std::map<int, int64_t> shared_loads, shared_stores;
  // cp.async global -> shared copies by size ("cp.async.cg.shared.global
  // [s], [g], 16;" is one of 16 bytes): loads that bypass the registers.
  std::map<int, int64_t> async_copies;
  int64_t shfl_sync = 0;
  // From ptxas -v. A module with several entry functions (a split reduction
  // and its _partial kernel): the largest registers, shared memory and stack
  // frame of any of them, and their spills added up.
  int registers = 0;
  int64_t spill_store_bytes = 0, spill_load_bytes = 0;
  int64_t shared_memory_bytes = 0, stack_frame_bytes = 0;

  // "loads: 4 x 16B, stores: 4 x 16B, shfl.sync: 10, registers: 24, spills: 0 B, smem: 256 B"
  // (then ", cp.async: 8 x 16B" where there are any)
  std::string ToString() const;
};

namespace backend {

// Pure: PTX text and the ptxas -v log (either may be empty) in, counts out.
PtxSummary SummarizePtx(absl::string_view ptx, absl::string_view ptxas_log);

}  // namespace backend
}  // namespace fusebox
