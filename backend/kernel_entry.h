// Generated kernels are compiled under one entry name instead of their own:
// kernels that differ only in their names (GPT-2's LayerNorm in each of its
// twelve layers) are then one source to the compile cache, so one compile,
// one binary and one loaded module serve them all (Inductor gives such
// kernels one name; here each keeps its own for the user, who reads its
// source, PTX and profile under that name).
//
// Profilers outside fusebox (nsys, ncu) see the entry name, so every
// generated kernel would read `fusebox_kernel` there: with
// FUSEBOX_UNIQUE_KERNEL_NAMES=1 (Inductor's unique_kernel_names) each kernel
// is compiled under its own name instead (`ncu -k regex:per_fused_...`), at
// the cost of one compile per kernel.
#pragma once

#include <string>

namespace fusebox::backend {

inline constexpr char kKernelEntry[] = "fusebox_kernel";

// FUSEBOX_UNIQUE_KERNEL_NAMES (anything but empty or 0), read once per
// process; ScopedUniqueKernelNames overrides it (tests).
bool UniqueKernelNames();

class ScopedUniqueKernelNames {
 public:
  explicit ScopedUniqueKernelNames(bool unique);
  ~ScopedUniqueKernelNames();
  ScopedUniqueKernelNames(const ScopedUniqueKernelNames&) = delete;
  ScopedUniqueKernelNames& operator=(const ScopedUniqueKernelNames&) = delete;

 private:
  int previous_;
};

// The name kernel `name` is compiled and loaded under: kKernelEntry, or
// `name` itself when `unique`.
std::string EntryName(const std::string& name, bool unique);

// `source`, printed for kernel `name`, with every occurrence of the name (the
// entry, its helpers, its _partial kernels) spelled `entry` (its EntryName).
std::string UnderEntryName(const std::string& source, const std::string& name, const std::string& entry);

// The reverse, for what the compiler returned (PTX, ptxas's log), so the user
// reads it under the kernel's own name.
std::string UnderKernelName(const std::string& text, const std::string& name);

}  // namespace fusebox::backend
