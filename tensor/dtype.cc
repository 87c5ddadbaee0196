#include "tensor/dtype.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>

namespace fusebox {
namespace {

constexpr std::array<DTypeTraits, kNumDTypes> kTraits = {{
    {DType::kFloat32, "float32", "f32", 4, true, "float", "float"},
    {DType::kFloat16, "float16", "f16", 2, true, "unsigned short", "float"},
    {DType::kBFloat16, "bfloat16", "bf16", 2, true, "unsigned short", "float"},
    {DType::kInt32, "int32", "i32", 4, false, "int", "int"},
    {DType::kInt64, "int64", "i64", 8, false, "long long", "long long"},
    {DType::kBool, "bool", "b8", 1, false, "bool", "bool"},
}};
static_assert(kTraits.size() == kNumDTypes);

int Rank(DType d) {  // bool < ints < floats, then by width
  switch (d) {
    case DType::kBool: return 0;
    case DType::kInt32: return 1;
    case DType::kInt64: return 2;
    case DType::kFloat16: return 3;
    case DType::kBFloat16: return 3;
    case DType::kFloat32: return 4;
  }
  return 0;
}

}  // namespace

const DTypeTraits& Traits(DType dtype) { return kTraits[static_cast<int>(dtype)]; }

DType ComputeDType(DType d) { return IsFloating(d) ? DType::kFloat32 : d; }

DType PromoteTypes(DType a, DType b) {
  if (a == b) return a;
  // f16 with bf16 has no common 16-bit type: PyTorch gives f32.
  if ((a == DType::kFloat16 && b == DType::kBFloat16) ||
      (a == DType::kBFloat16 && b == DType::kFloat16))
    return DType::kFloat32;
  return Rank(a) >= Rank(b) ? a : b;
}

DType PromoteAcrossCategories(DType higher, DType lower) {
  if (IsFloating(higher)) return higher;
  if (higher == DType::kBool || IsFloating(lower)) return PromoteTypes(higher, lower);
  return higher;
}

DType PromoteWithScalar(DType tensor_dtype) {
  return IsFloating(tensor_dtype) ? tensor_dtype : DType::kFloat32;
}

bool CanCast(DType from, DType to) {
  if (IsFloating(from) && !IsFloating(to)) return false;  // also float -> bool
  return from == DType::kBool || to != DType::kBool;
}

uint16_t FloatToHalf(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mag = x & 0x7fffffffu;
  if (mag >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0u));
  }
  if (mag >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (mag < 0x38800000u) {  // subnormal or zero in half
    // Add the value to 0.5f so the FPU does the round-to-nearest-even shift.
    float v = std::bit_cast<float>(mag) + 0.5f;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(v) - 0x3f000000u));
  }
  uint32_t odd = (mag >> 13) & 1u;
  mag += 0xc8000fffu + odd;  // rebias exponent (-112 << 23) and round
  return static_cast<uint16_t>(sign | (mag >> 13));
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t FloatToBFloat16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float BFloat16ToFloat(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

double ReadElement(const void* data, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kFloat32: return static_cast<const float*>(data)[i];
    case DType::kFloat16: return HalfToFloat(static_cast<const uint16_t*>(data)[i]);
    case DType::kBFloat16: return BFloat16ToFloat(static_cast<const uint16_t*>(data)[i]);
    case DType::kInt32: return static_cast<const int32_t*>(data)[i];
    case DType::kInt64: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case DType::kBool: return static_cast<const bool*>(data)[i] ? 1.0 : 0.0;
  }
  return 0;
}

void WriteElement(void* data, DType dtype, int64_t i, double value) {
  switch (dtype) {
    case DType::kFloat32: static_cast<float*>(data)[i] = static_cast<float>(value); return;
    case DType::kFloat16:
      static_cast<uint16_t*>(data)[i] = FloatToHalf(static_cast<float>(value));
      return;
    case DType::kBFloat16:
      static_cast<uint16_t*>(data)[i] = FloatToBFloat16(static_cast<float>(value));
      return;
    case DType::kInt32: static_cast<int32_t*>(data)[i] = static_cast<int32_t>(value); return;
    case DType::kInt64: static_cast<int64_t*>(data)[i] = static_cast<int64_t>(value); return;
    case DType::kBool: static_cast<bool*>(data)[i] = value != 0.0; return;
  }
}

}  // namespace fusebox
