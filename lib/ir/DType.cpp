//===- DType.cpp - the table of element-type facts ------------------------===//
#include "gradc/ir/DType.h"

#include <cstdint>
#include <limits>

namespace gradc {
namespace {

constexpr int64_t i32_min = std::numeric_limits<int32_t>::min(), i32_max = std::numeric_limits<int32_t>::max();
constexpr int64_t i64_min = std::numeric_limits<int64_t>::min(), i64_max = std::numeric_limits<int64_t>::max();

// Float16 accumulates in float32, as PyTorch does (see the hardening issue).
const DTypeInfo kTable[] = {
    {DType::Float16, "float16", "uint16_t", "<f2", 2, true, false, "f16", 65504.0, 0, 0, DType::Float32, 0x1p-24},
    {DType::Float32, "float32", "float", "<f4", 4, true, false, "f", double(std::numeric_limits<float>::max()), 0, 0,
     DType::Float32, double(std::numeric_limits<float>::denorm_min())},
    {DType::Float64, "float64", "double", "<f8", 8, true, false, "f64", std::numeric_limits<double>::max(), 0, 0,
     DType::Float64, std::numeric_limits<double>::denorm_min()},
    {DType::Int32, "int32", "int32_t", "<i4", 4, false, true, "", double(i32_max), i32_min, i32_max, DType::Int32, 0},
    {DType::Int64, "int64", "int64_t", "<i8", 8, false, true, "i64", double(i64_max), i64_min, i64_max, DType::Int64,
     0},
    {DType::Bool, "bool", "uint8_t", "|b1", 1, false, false, "", 1.0, 0, 1, DType::Bool, 0},
};

} // namespace

const DTypeInfo &dtype_info(DType dt) { return kTable[static_cast<int>(dt)]; }

std::span<const DTypeInfo> all_dtypes() { return kTable; }

std::optional<DType> parse_dtype(const std::string &name) {
  for (const DTypeInfo &row : kTable)
    if (name == row.name)
      return row.dtype;
  return std::nullopt;
}

} // namespace gradc
