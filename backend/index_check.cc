#include "backend/index_check.h"

#include "absl/strings/str_cat.h"

namespace fusebox::backend {

std::string IndexCheckMessage(const int64_t flag[kIndexCheckWords]) {
  const auto op = static_cast<graph::Op>(flag[3] >> 8);
  const int64_t dim = flag[3] & 255, index = flag[1], size = flag[2];
  return absl::StrCat(graph::OpName(op), ": index ", index, " is out of range for dim ", dim, " of size ", size,
                      " (indices must be in [0, ", size, ")", index < 0 ? "; negative indices are not wrapped" : "",
                      "); the kernel read no element for it, and the call's results are discarded");
}

}  // namespace fusebox::backend
