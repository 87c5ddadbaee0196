// Kernel IR -> C++ for the host compiler: `extern "C" void name(void* const*
// args, long long begin, long long end)` runs elements [begin, end), so the
// runtime can split a kernel across threads. No #includes: the prelude uses
// compiler builtins, which keeps each compile around a tenth of a second.
#pragma once

#include <string>

#include "backend/kernel_ir.h"

namespace fusebox::backend::cpu {

// The C signature every CPU kernel has.
using CpuKernelFn = void (*)(void* const* args, long long begin, long long end);

std::string PrintCpp(const Kernel& kernel);

}  // namespace fusebox::backend::cpu
