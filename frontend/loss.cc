#include "frontend/loss.h"

#include "frontend/data_movement.h"
#include "frontend/ops.h"
#include "frontend/reductions.h"
#include "tensor/creation.h"
#include "tensor/error.h"

namespace fusebox {

Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index, const std::string& reduction,
                     double label_smoothing) {
  FUSEBOX_ENSURE(logits.defined() && target.defined(), "cross_entropy: undefined Tensor");
  FUSEBOX_ENSURE(IsFloating(logits.dtype()), "cross_entropy: logits must be floating-point, got ", logits.str(),
                 "; convert first, e.g. .to(DType::kFloat32)");
  FUSEBOX_ENSURE(target.dtype() == DType::kInt64 || target.dtype() == DType::kInt32,
                 "cross_entropy: target must be int64 or int32 class indices, got ", target.str(),
                 " (class probabilities are not supported)");
  FUSEBOX_ENSURE(logits.device() == target.device(), "cross_entropy: expected logits and target on one device, got ",
                 logits.str(), " and ", target.str(), "; move them with .to(Device) first");
  FUSEBOX_ENSURE(reduction == "mean" || reduction == "sum" || reduction == "none",
                 "cross_entropy: reduction must be \"mean\", \"sum\" or \"none\", got \"", reduction, "\"");
  FUSEBOX_ENSURE(label_smoothing >= 0 && label_smoothing <= 1, "cross_entropy: label_smoothing must be in [0, 1], got ",
                 label_smoothing);
  FUSEBOX_ENSURE(logits.dim() >= 1, "cross_entropy: logits must be [C], [N, C] or [N, C, d1, ...], got ", logits.str());
  const bool single = logits.dim() == 1;  // [C]: one row of [1, C]
  Shape want = logits.shape();
  want.erase(want.begin() + (single ? 0 : 1));
  FUSEBOX_ENSURE(target.shape() == want, "cross_entropy: target must be ", ShapeToString(want),
                 " (logits' shape without the class dim) for logits ", logits.str(), ", got ", target.str());
  const Tensor x = single ? logits.unsqueeze(0) : logits, t = single ? target.unsqueeze(0) : target;
  const int64_t classes = x.shape()[1];
  FUSEBOX_ENSURE(classes > 0 || t.numel() == 0, "cross_entropy: logits ", logits.str(), " have no classes");

  // 16-bit logits compute in float32 and round once at the end.
  const DType compute = ComputeDType(logits.dtype());
  const Tensor logp = log_softmax(x.to(compute), 1);
  // Compared in int64 (a double scalar would compare in float32); ignored
  // positions gather class 0, so gather's index check sees only real targets.
  const Tensor t64 = t.to(DType::kInt64);
  const Tensor valid = ne(t64, full({}, static_cast<double>(ignore_index), t.device(), DType::kInt64));
  const Tensor index = t64 * valid.to(DType::kInt64);
  Tensor loss = -gather(logp, 1, index.unsqueeze(1)).squeeze(1);
  if (label_smoothing > 0) {
    loss = (1 - label_smoothing) * loss - (label_smoothing / static_cast<double>(classes)) * sum(logp, 1);
  }
  loss = where(valid, loss, 0.0);

  Tensor out;
  if (reduction == "none") {
    out = single ? loss.reshape({}) : loss;
  } else if (reduction == "sum") {
    out = sum(loss);
  } else {
    out = sum(loss) / sum(valid);  // 0 / 0 = NaN when every position is ignored, as PyTorch
  }
  return out.to(logits.dtype());
}

}  // namespace fusebox
