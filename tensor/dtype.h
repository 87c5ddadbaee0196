// Element types: the traits table (size, name, C spelling), type promotion
// (PyTorch rules, with double scalars as "weak" floats), and the host-side
// f16/bf16 conversions used by from_vector / to_vector.
#pragma once

#include <cstdint>
#include <string_view>

namespace fusebox {

enum class DType { kFloat32, kFloat16, kBFloat16, kInt32, kInt64, kBool };
inline constexpr int kNumDTypes = 6;

struct DTypeTraits {
  DType dtype;
  const char* name;               // "float32": user messages and kernel comments
  const char* short_name;         // "f32"
  int size;                       // bytes per element
  bool is_floating;
  const char* storage_ctype;      // how generated code spells one stored element
  const char* compute_ctype;      // the type generated code computes in
};

const DTypeTraits& Traits(DType dtype);
inline const char* DTypeName(DType d) { return Traits(d).name; }
inline int DTypeSize(DType d) { return Traits(d).size; }
inline bool IsFloating(DType d) { return Traits(d).is_floating; }
inline bool IsIntegral(DType d) { return d == DType::kInt32 || d == DType::kInt64; }

// The type the generated code computes a value of `d` in: f16/bf16 -> f32.
DType ComputeDType(DType d);

// Result type of a binary op on two tensors (PyTorch's promote_types).
DType PromoteTypes(DType a, DType b);
// Result type when operands of a higher category (tensors with dims) promote
// to `higher` and those of a lower one (0-d tensors) to `lower`: PyTorch's
// combine_categories, where a lower category widens only across kinds
// (bf16[4] * f32[] is bf16, int32[4] + int64[] is int32, int32[4] * f32[] is f32).
DType PromoteAcrossCategories(DType higher, DType lower);
// Result type of an op between a tensor and a double scalar: a float tensor
// keeps its dtype; an integer or bool tensor becomes float32.
DType PromoteWithScalar(DType tensor_dtype);
// Whether an in-place op may store a result of `from` into a tensor of `to`
// (PyTorch's can_cast): not float into integer or bool, not integer into bool.
bool CanCast(DType from, DType to);

// Host conversions (round to nearest even, NaN preserved).
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
uint16_t FloatToBFloat16(float f);
float BFloat16ToFloat(uint16_t b);

// Reads element `i` of a buffer of `dtype` as double; writes a double into it
// (rounded/truncated as a C++ cast would).
double ReadElement(const void* data, DType dtype, int64_t i);
void WriteElement(void* data, DType dtype, int64_t i, double value);

}  // namespace fusebox
