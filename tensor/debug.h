// The two debug knobs, read once from the environment:
//   FUSEBOX_LOG=trace|debug|info|warn|error|off   spdlog level (default warn)
//   FUSEBOX_DEBUG=graph,plan,ir,cpp,cuda,schedule,ptx,cache,recompiles   comma list of dumps to stderr
// docs/debugging.md documents them.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fusebox {

// True when `what` is in FUSEBOX_DEBUG (or FUSEBOX_DEBUG=all).
bool DebugDump(std::string_view what);
// The names FUSEBOX_DEBUG takes (`all` last).
std::span<const std::string_view> DebugDumpNames();
// The known names in the comma list `list`; each unknown one warns (spdlog),
// listing the valid names, and is also appended to `warnings` when given.
std::vector<std::string> ParseDebugDumps(std::string_view list, std::vector<std::string>* warnings = nullptr);
// Configures the spdlog default logger from FUSEBOX_LOG; idempotent.
void InitLogging();

}  // namespace fusebox
