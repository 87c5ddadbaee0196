// The error flag of the index checks that gather-like kernels make
// (StmtKind::kIndexCheck): what a kernel records about the first bad index
// it meets, and the error the host raises from it after the run.
#pragma once

#include <cstdint>
#include <string>

#include "graph/op.h"

namespace fusebox::backend {

// int64 words of the flag: set (0/1), the bad index, the size it must stay
// under, and the check's code (IndexCheckCode).
inline constexpr int kIndexCheckWords = 4;

// The op and the dim it indexes, as one number a kernel can store.
inline int64_t IndexCheckCode(graph::Op op, int64_t dim) { return static_cast<int64_t>(op) << 8 | dim; }

// "index_select: index 7 is out of range for dim 0 of size 5 ...", from a
// set flag.
std::string IndexCheckMessage(const int64_t flag[kIndexCheckWords]);

}  // namespace fusebox::backend
