//===- DType.h - the one table of element-type facts ----------------------===//
//
// Every fact gradc needs about a dtype — its Relay name, C type, numpy
// descriptor, size, range and literal suffix — is one row of one table, so a
// new dtype is taught in one place and no pass keeps a switch of its own.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace gradc {

enum class DType { Float16, Float32, Float64, Int32, Int64, Bool };

struct DTypeInfo {
  DType dtype;
  const char *name;           // Relay: "float32"
  const char *c_type;         // what carries one element across the C ABI: "float"; float16 is its
                              // IEEE bit pattern (uint16_t), bool one byte 0 or 1 (uint8_t)
  const char *npy_descr;      // numpy descriptor, little-endian: "<f4"
  unsigned bytes;             // storage size
  bool is_float, is_int;      // bool is neither
  const char *literal_suffix; // text format: "f", "f64", "i64", "" (int32 and bool)
  double max_finite;          // largest finite value (floats) or largest integer (ints, as a double)
  int64_t int_min, int_max;   // integer range (bool: 0..1; floats: unused)
  DType accumulator;          // what reductions over this dtype accumulate in
  double min_subnormal;       // smallest positive value (floats: the smallest subnormal); 0 for ints and bool
};

/// The row of `dt`.
const DTypeInfo &dtype_info(DType dt);
/// Every dtype's row, in declaration order.
std::span<const DTypeInfo> all_dtypes();

inline const char *dtype_name(DType dt) { return dtype_info(dt).name; }
inline unsigned dtype_bytes(DType dt) { return dtype_info(dt).bytes; }
inline bool is_float(DType dt) { return dtype_info(dt).is_float; }
inline bool is_int(DType dt) { return dtype_info(dt).is_int; }
std::optional<DType> parse_dtype(const std::string &name);

} // namespace gradc
