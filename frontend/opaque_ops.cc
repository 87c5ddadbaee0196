// Every op with no codegen takes one path (RunOnHost): a graph break under
// compile(), then host code over concrete, contiguous copies of its inputs.
#include "frontend/opaque_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "tensor/mutex.h"
#include "frontend/capture.h"

namespace fusebox {
namespace {

std::string NoCodegen(const std::string& op) { return absl::StrCat("op '", op, "' has no codegen"); }

// Ends the graph under capture (`reason`, at the user's `loc`), then runs
// `compute` on concrete, contiguous host copies of `inputs` with every op
// eager, and moves its outputs to `device`.
template <typename Compute>
std::vector<Tensor> RunOnHost(const std::string& reason, const std::source_location& loc,
                              const std::vector<Tensor>& inputs, Device device, Compute compute) {
  frontend::BreakGraph(reason, loc);
  frontend::EagerScope eager;
  std::vector<Tensor> host;
  host.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    frontend::Realize(t.impl(), reason.c_str(), loc);
    host.push_back(t.contiguous().to(Device::cpu()));
  }
  std::vector<Tensor> outputs = compute(host);
  for (Tensor& out : outputs) out = out.to(device);
  return outputs;
}

// Sort keys: int64 as is (a double would merge neighbours above 2^53), every
// other dtype exactly as a double.
template <typename K>
K ReadKey(const void* data, DType dtype, int64_t i) {
  if constexpr (std::is_same_v<K, int64_t>) {
    int64_t v;
    std::memcpy(&v, static_cast<const char*>(data) + i * sizeof(int64_t), sizeof(int64_t));
    return v;
  } else {
    return ReadElement(data, dtype, i);
  }
}

// Stable sort of every row along `dim` of contiguous `src`: NaN above every
// number (torch.sort). Values are copied bytewise, so -0.0 and NaNs keep their bits.
template <typename K>
void SortRows(const Tensor& src, int64_t dim, bool descending, const Tensor& values, const Tensor& indices) {
  const Shape& shape = src.shape();
  const int64_t size = src.dim() == 0 ? 1 : shape[dim];
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < src.dim(); ++d) inner *= shape[d];
  const int64_t outer = size * inner == 0 ? 0 : src.numel() / (size * inner);
  const DType dtype = src.dtype();
  const size_t bytes = DTypeSize(dtype);
  const char* in = static_cast<const char*>(src.const_data_ptr());
  char* out = static_cast<char*>(UncheckedDataPtr(values));
  int64_t* out_index = static_cast<int64_t*>(UncheckedDataPtr(indices));
  std::vector<K> keys(size);
  std::vector<int64_t> order(size);
  auto is_nan = [](K k) {
    if constexpr (std::is_floating_point_v<K>) {
      return std::isnan(k);
    } else {
      return false;
    }
  };
  auto before = [&](int64_t a, int64_t b) {
    const K x = keys[a], y = keys[b];
    if (descending) return !is_nan(y) && (is_nan(x) || x > y);
    return !is_nan(x) && (is_nan(y) || x < y);
  };
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * size * inner + i;
      for (int64_t j = 0; j < size; ++j) keys[j] = ReadKey<K>(in, dtype, base + j * inner);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), before);
      for (int64_t j = 0; j < size; ++j) {
        const int64_t at = base + j * inner;
        std::memcpy(out + at * bytes, in + (base + order[j] * inner) * bytes, bytes);
        out_index[at] = order[j];
      }
    }
  }
}

Tensor NonzeroIndices(const Tensor& src) {
  const int64_t rank = src.dim();
  const void* data = src.const_data_ptr();
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < src.numel(); ++i) {
    if (ReadElement(data, src.dtype(), i) != 0) hits.push_back(i);
  }
  Tensor out = Tensor::empty({static_cast<int64_t>(hits.size()), rank}, DType::kInt64);
  int64_t* index = static_cast<int64_t*>(UncheckedDataPtr(out));
  for (size_t k = 0; k < hits.size(); ++k) {
    int64_t flat = hits[k];
    for (int64_t d = rank - 1; d >= 0; --d) {
      index[k * rank + d] = flat % src.shape()[d];
      flat /= src.shape()[d];
    }
  }
  return out;
}

// Names of the live CustomOps. Never destroyed: a static CustomOp may be
// destroyed after it.
struct Registry {
  fusebox::Mutex mu;
  absl::flat_hash_set<std::string> names ABSL_GUARDED_BY(mu);
};
Registry& GetRegistry() {
  static auto* registry = new Registry;
  return *registry;
}

}  // namespace

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, std::source_location loc) {
  FUSEBOX_ENSURE(x.defined(), "sort: the input is an undefined Tensor");
  const int64_t d = WrapDim(dim, x.dim(), "sort");
  std::vector<Tensor> out = RunOnHost(NoCodegen("sort"), loc, {x}, x.device(), [&](const std::vector<Tensor>& in) {
    const Tensor& src = in[0];
    Tensor values = Tensor::empty(src.shape(), src.dtype());
    Tensor indices = Tensor::empty(src.shape(), DType::kInt64);
    if (src.dtype() == DType::kInt64) {
      SortRows<int64_t>(src, d, descending, values, indices);
    } else {
      SortRows<double>(src, d, descending, values, indices);
    }
    return std::vector<Tensor>{values, indices};
  });
  return {out[0], out[1]};
}

Tensor nonzero(const Tensor& x, std::source_location loc) {
  FUSEBOX_ENSURE(x.defined(), "nonzero: the input is an undefined Tensor");
  return RunOnHost(NoCodegen("nonzero"), loc, {x}, x.device(), [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{NonzeroIndices(in[0])};
  })[0];
}

struct CustomOp::Registration {
  std::string name;
  Fn fn;
  ~Registration() {
    Registry& registry = GetRegistry();
    fusebox::MutexLock lock(&registry.mu);
    registry.names.erase(name);
  }
};

CustomOp::CustomOp(std::string name, Fn fn) {
  FUSEBOX_ENSURE(!name.empty(), "CustomOp: the name is empty; give the op a name (graph-break reasons and errors "
                 "use it)");
  FUSEBOX_ENSURE(fn != nullptr, "CustomOp '", name, "': the function is empty; pass a callable taking "
                 "const std::vector<Tensor>& and returning std::vector<Tensor>");
  Registry& registry = GetRegistry();
  {
    fusebox::MutexLock lock(&registry.mu);
    FUSEBOX_ENSURE(registry.names.insert(name).second, "CustomOp '", name,
                   "': an op with this name is already registered; give each custom op its own name, or "
                   "share one CustomOp object (copies of it keep the name)");
  }
  registration_.reset(new Registration{std::move(name), std::move(fn)});
}

const std::string& CustomOp::name() const {
  FUSEBOX_ENSURE(registration_ != nullptr, "CustomOp: use of a moved-from CustomOp");
  return registration_->name;
}

std::vector<Tensor> CustomOp::operator()(const std::vector<Tensor>& inputs, std::source_location loc) const {
  const std::string& op = name();
  for (size_t k = 0; k < inputs.size(); ++k) {
    FUSEBOX_ENSURE(inputs[k].defined(), "custom op '", op, "': input ", k, " is an undefined Tensor");
  }
  const Device device = inputs.empty() ? Device::cpu() : inputs[0].device();
  return RunOnHost(absl::StrCat(NoCodegen(op), " (custom op)"), loc, inputs, device,
                   [&](const std::vector<Tensor>& host) {
                     std::vector<Tensor> outputs = registration_->fn(host);
                     for (size_t k = 0; k < outputs.size(); ++k) {
                       FUSEBOX_ENSURE(outputs[k].defined(), "custom op '", op, "': output ", k,
                                      " returned by its function is an undefined Tensor; return defined "
                                      "tensors only");
                     }
                     return outputs;
                   });
}

}  // namespace fusebox
