// The two debug knobs, read once from the environment:
//   FUSEBOX_LOG=trace|debug|info|warn|error|off   spdlog level (default warn)
//   FUSEBOX_DEBUG=graph,plan,ir,cpp,cuda,schedule,ptx,cache,recompiles   comma list of dumps to stderr
// docs/debugging.md documents them.
#pragma once

#include <string_view>

namespace fusebox {

// True when `what` is in FUSEBOX_DEBUG (or FUSEBOX_DEBUG=all).
bool DebugDump(std::string_view what);
// Configures the spdlog default logger from FUSEBOX_LOG; idempotent.
void InitLogging();

}  // namespace fusebox
