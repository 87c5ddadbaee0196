// Loss functions, spelled as in torch.nn.functional. Each is a decomposition
// into existing ops (log_softmax, gather, masks, sums), so it fuses like the
// same code written by hand.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/tensor.h"

namespace fusebox {

// F.cross_entropy with class-index targets. logits [N, C] or [N, C, d1, ...]
// (the classes in dim 1), or [C] with a 0-d target; target int64 or int32 of
// logits' shape without the class dim. A position whose target is
// ignore_index counts nowhere (0 under "none"). reduction: "mean" (over the
// positions not ignored: NaN when all are), "sum" or "none".
// label_smoothing eps in [0, 1]: each loss is (1 - eps) * nll + eps * the mean
// over classes of -log_softmax. The result has logits' dtype (16-bit logits
// compute in float32, rounded once). A target outside [0, C) that is not
// ignore_index is a fusebox::Error (when the op runs; inside compile(), when
// the call returns).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     const std::string& reduction = "mean", double label_smoothing = 0.0);

}  // namespace fusebox
