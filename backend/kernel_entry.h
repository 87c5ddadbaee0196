// Generated kernels are compiled under one entry name instead of their own:
// kernels that differ only in their names (GPT-2's LayerNorm in each of its
// twelve layers) are then one source to the compile cache, so one compile,
// one binary and one loaded module serve them all (Inductor gives such
// kernels one name; here each keeps its own for the user, who reads its
// source, PTX and profile under that name).
#pragma once

#include <string>

namespace fusebox::backend {

inline constexpr char kKernelEntry[] = "fusebox_kernel";

// `source`, printed for kernel `name`, with every occurrence of the name (the
// entry, its helpers, its _partial kernels) spelled kKernelEntry.
std::string UnderEntryName(const std::string& source, const std::string& name);

// The reverse, for what the compiler returned (PTX, ptxas's log), so the user
// reads it under the kernel's own name.
std::string UnderKernelName(const std::string& text, const std::string& name);

}  // namespace fusebox::backend
