#include "tests/fuzz/interpret.h"

#include <random>

#include "tests/fuzz/op_table.h"

namespace fusebox::fuzz {

Dims Program::InputShape(int input, int assignment) const {
  Dims shape;
  for (int d : inputs[input].dims) shape.push_back(d < 0 ? 1 : sizes[d][assignment]);
  return shape;
}

RefArray InputData(const Program& p, int input, int assignment, uint64_t call) {
  const Input& in = p.inputs[input];
  RefArray a = MakeArray(p.InputShape(input, assignment), in.dtype);
  std::mt19937_64 rng(p.seed * 1000003 + input * 7919 + assignment * 131 + call);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> positive(0.25, 3);
  std::uniform_int_distribution<int> coarse(-8, 8);
  for (double& v : *a.val) {
    const double x = in.data == 0 ? normal(rng) : in.data == 1 ? positive(rng) : coarse(rng) / 4.0;
    v = RoundTo(x, in.dtype);
  }
  return a;
}

std::vector<RefArray> Reference(const Program& p, const std::vector<RefArray>& inputs, int upto) {
  const auto& table = OpTable();
  const int n = upto < 0 ? static_cast<int>(p.steps.size()) : upto;
  std::vector<RefArray> values;
  for (int k = 0; k < n; ++k) {
    const Step& s = p.steps[k];
    if (s.op == kInputOp) {
      values.push_back(inputs[s.ints[0]]);
      continue;
    }
    std::vector<RefArray> args;
    for (int a : s.args) args.push_back(a < 0 ? RefArray{} : values[a]);
    values.push_back(table[s.op].ref(args, s));
  }
  return values;
}

Tensor ToTensor(const RefArray& data, const Input& input, Device device) {
  if (!input.transposed || data.rank() < 2) {
    return Tensor::from_vector(*Contiguous(data).val, Shape(data.shape.begin(), data.shape.end()), input.dtype, device);
  }
  const RefArray t = Contiguous(Transpose(data, -1, -2));
  return Tensor::from_vector(*t.val, Shape(t.shape.begin(), t.shape.end()), input.dtype, device).transpose(-1, -2);
}

std::vector<Tensor> RunFusebox(const Program& p, const std::vector<Tensor>& args) {
  const auto& table = OpTable();
  std::vector<Tensor> values;
  for (const Step& s : p.steps) {
    if (s.op == kInputOp) {
      values.push_back(args[s.ints[0]]);
      continue;
    }
    std::vector<Tensor> operands;
    for (int a : s.args) operands.push_back(a < 0 ? Tensor() : values[a]);
    values.push_back(table[s.op].fb(operands, s));
  }
  std::vector<Tensor> out;
  for (int o : p.outputs) out.push_back(values[o]);
  return out;
}

}  // namespace fusebox::fuzz
