//===- Type.h - tensor and tuple types of the tensor IR --------------------===//
//
// A value of the tensor IR is a tensor with a static shape and a dtype, a
// tuple of values, or a function (the type of a `fn` value). `Unknown` marks a value whose type could not be inferred
// because of an earlier error; relations treat it as "do not report again".
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/DType.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gradc {

using Shape = std::vector<int64_t>;
struct Type;
/// numpy's limit on the number of dimensions.
constexpr size_t kMaxRank = 64;
/// The most elements a tensor may have (2^44: 128 TiB of float64), so that
/// byte counts, header sizes and workspace offsets never come near int64's
/// limit.
constexpr int64_t kMaxElements = int64_t(1) << 44;
/// Why `shape` cannot be a tensor's (rank over kMaxRank, a negative
/// dimension, more than kMaxElements elements), or nullopt if it can.
/// Types come from three places, and each asks this and reports a located
/// error: the parser (annotations), attribute checking (`shape=[...]`) and
/// op/Check.h for every type a relation infers. Type::tensor itself only
/// refuses a negative dimension (a gradc bug), so a relation may build an
/// over-limit result for its caller to report.
std::optional<std::string> shape_problem(const Shape &shape);
/// shape_problem of every tensor in `type` (tuple fields included).
std::optional<std::string> type_problem(const Type &type);
int64_t num_elements(const Shape &shape);
/// The rows of `shape` seen as a row-major matrix: the product of every
/// dimension but the last (1 for a scalar). Exact even when the last is 0.
int64_t num_rows(const Shape &shape);
std::string shape_str(const Shape &shape); // "(2, 3)"

struct Type {
  enum Kind { Unknown, Tensor, Tuple, Func };
  Kind kind = Unknown;
  Shape shape;                  // Tensor
  DType dtype = DType::Float32; // Tensor
  std::vector<Type> fields;     // Tuple: the fields; Func: the parameters
  std::vector<Type> result;     // Func: exactly one, the result

  static Type tensor(Shape shape, DType dtype);
  static Type tuple(std::vector<Type> fields);
  static Type function(std::vector<Type> params, Type result);
  static Type unknown() { return {}; }

  bool is_tensor() const { return kind == Tensor; }
  bool is_tuple() const { return kind == Tuple; }
  bool is_unknown() const { return kind == Unknown; }
  bool is_function() const { return kind == Func; }
  /// True if this or any field is Unknown.
  bool has_unknown() const;
  int64_t rank() const { return (int64_t)shape.size(); }
  bool operator==(const Type &o) const;
  bool operator!=(const Type &o) const { return !(*this == o); }
  /// Relay text: `Tensor[(2, 3), float32]`, `(T1, T2)`.
  std::string str() const;
};

} // namespace gradc
