// Ops with no codegen: built-in ones (sort, nonzero) and CPU-only custom ops
// users register (CustomOp, like torch.library.custom_op). Outside compile()
// they just run. Inside, each is a graph break ("op 'sort' has no codegen" at
// the caller's line): the graph so far is compiled and run, the op computes on
// concrete tensors, and capture resumes with the next op. They compute on the
// host: inputs on a GPU are copied to the host and results copied back.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <source_location>
#include <string>
#include <tuple>
#include <vector>

#include "tensor/tensor.h"

namespace fusebox {

// Sorts along `dim` (negative counts from the end): (values, int64 indices
// into `dim`), as torch.sort. Always stable; NaN sorts above every number, so
// descending puts NaNs first. Every dtype; a 0-d tensor sorts as one element.
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false,
                                std::source_location loc = std::source_location::current());

// Indices of the non-zero elements (NaN counts as non-zero) in row-major
// order: int64 [n, x.dim()], as torch.nonzero. Its shape depends on the values,
// which is why it cannot be captured.
Tensor nonzero(const Tensor& x, std::source_location loc = std::source_location::current());

// A user op that fusebox cannot compile: a C++ function over tensors.
//   fusebox::CustomOp my_op("my_op", [](const std::vector<Tensor>& in) -> std::vector<Tensor> {...});
//   std::vector<Tensor> out = my_op({x, y});
// The function gets concrete, contiguous CPU tensors (a contiguous CPU input
// is passed as is, so do not write into inputs); the fusebox ops it calls run
// eagerly, also inside compile(). Its outputs are moved to the first input's
// device (CPU when there are none). Names are unique among the CustomOps alive
// in the process, as torch.library rejects registering one name twice:
// explain() and errors name the op, so one name must mean one function.
// Copies of a CustomOp share its name; it is free again when the last is gone.
class CustomOp {
 public:
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  CustomOp(std::string name, Fn fn);

  // Inside compile() a graph break, "op '<name>' has no codegen (custom op)".
  // Exceptions thrown by the function propagate unchanged.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs,
                                 std::source_location loc = std::source_location::current()) const;
  const std::string& name() const;

 private:
  struct Registration;
  std::shared_ptr<const Registration> registration_;
};

}  // namespace fusebox
