// Two hooks on every generated kernel source, between printing and compiling:
// FUSEBOX_DUMP_DIR writes each source to a folder (to read, diff or compile
// by hand), and tests may rewrite a kernel's source to make it deliberately
// wrong (the numerics check must then flag it).
#pragma once

#include <functional>
#include <string>

namespace fusebox::backend {

// With FUSEBOX_DUMP_DIR=<folder> (read at each compile, so tests can set it),
// writes `source` as <folder>/<name><extension> (".cu", ".cc"). A different
// source under the same name (kernel names repeat across plans) goes to
// <name>-1<extension>, <name>-2<extension>, ...; an identical one is not
// written twice.
void DumpKernelSource(const std::string& name, const std::string& extension, const std::string& source);

// Test only: `rewrite(kernel_name, source)` returns the source to compile in
// place of every generated one; pass an empty function to turn it off.
// Executables compiled meanwhile stay in the plan cache for their graph, so a
// test that breaks a kernel should use a graph no other test builds.
using SourceRewrite = std::function<std::string(const std::string& name, const std::string& source)>;
void SetSourceRewriteForTesting(SourceRewrite rewrite);
// `source`, rewritten when a test hook is set.
std::string RewriteSource(const std::string& name, std::string source);

}  // namespace fusebox::backend
