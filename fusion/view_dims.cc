#include "fusion/view_dims.h"

#include <algorithm>

#include "tensor/shape.h"

namespace fusebox::fusion {

int64_t KeptInputDim(const graph::Node& view, int64_t e, const graph::Node& in) {
  const Strides contiguous = ContiguousStrides(in.shape);
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (in.shape[d] >= 2 && in.shape[d] == view.shape[e] && contiguous[d] == view.strides[e]) return d;
  }
  return -1;
}

std::optional<std::vector<ReshapeGroup>> ReshapeGroups(const graph::Node& view, const graph::Node& in) {
  if (view.offset != 0 || Numel(view.shape) == 0 || Numel(view.shape) != Numel(in.shape) ||
      view.strides != ContiguousStrides(view.shape)) {
    return std::nullopt;
  }
  std::vector<int64_t> a, b;
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (in.shape[d] != 1) a.push_back(static_cast<int64_t>(d));
  }
  for (size_t e = 0; e < view.shape.size(); ++e) {
    if (view.shape[e] != 1) b.push_back(static_cast<int64_t>(e));
  }
  std::vector<ReshapeGroup> groups;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    ReshapeGroup g{{a[i]}, {b[j]}};
    int64_t pa = in.shape[a[i++]], pb = view.shape[b[j++]];
    while (pa != pb) {
      if (pa < pb) {
        if (i == a.size()) return std::nullopt;
        pa *= in.shape[a[i]], g.in.push_back(a[i++]);
      } else {
        if (j == b.size()) return std::nullopt;
        pb *= view.shape[b[j]], g.out.push_back(b[j++]);
      }
    }
    groups.push_back(std::move(g));
  }
  if (i != a.size() || j != b.size()) return std::nullopt;
  return groups;
}

std::vector<int64_t> StridedSplit(const graph::Node& view, const graph::Node& in, size_t d) {
  const Strides contiguous = ContiguousStrides(in.shape);
  std::vector<int64_t> parts;
  for (size_t e = 0; e < view.shape.size(); ++e) {
    const int64_t step = view.strides[e];
    if (view.shape[e] >= 2 && step > 0 && step % contiguous[d] == 0 && step < contiguous[d] * in.shape[d]) {
      parts.push_back(static_cast<int64_t>(e));
    }
  }
  if (parts.size() < 2) return {};
  std::sort(parts.begin(), parts.end(), [&](int64_t a, int64_t b) { return view.strides[a] < view.strides[b]; });
  int64_t step = contiguous[d];
  for (int64_t e : parts) {
    if (view.strides[e] != step) return {};
    step *= view.shape[e];
  }
  return step == contiguous[d] * in.shape[d] ? parts : std::vector<int64_t>{};
}


}  // namespace fusebox::fusion
