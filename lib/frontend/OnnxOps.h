//===- OnnxOps.h - what an ONNX operator's mapping sees -------------------===//
//
// One entry of the table (OnnxOps.cpp) turns one ONNX node into Relay text
// through a NodeCtx: its inputs as Relay expressions with their types, the
// constant value of an input where there is one (an initializer or a
// Constant node: a Reshape's shape), its attributes, the inferred types of
// its outputs. A mapping reports what it cannot map with ctx.unsupported().
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/DType.h"
#include "gradc/ir/Type.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace onnx {
class NodeProto;
class AttributeProto;
} // namespace onnx

namespace gradc::onnx_import {

/// A constant tensor's elements. `values` holds every element as a double
/// (what a mapping reads: a shape, axes, a scalar bound); `ints` holds the
/// elements of an integer or bool tensor exactly (an int64 beyond 2^53 is not
/// exact as a double), and is empty for a floating-point one.
struct ConstValue {
  DType dtype = DType::Float32;
  Shape shape;
  std::vector<double> values;
  std::vector<int64_t> ints;
};

/// A constant's element as an integer: saturated to ±2^62 (INT64_MAX, the
/// "to the end" of a Slice, would overflow what a mapping adds to it), NaN
/// as 0.
inline int64_t to_int(double v) {
  constexpr double kLimit = 4611686018427387904.0; // 2^62
  return v != v ? 0 : v >= kLimit ? int64_t(kLimit) : v <= -kLimit ? -int64_t(kLimit) : int64_t(v);
}

/// A constant's elements as integers (exact where it has `ints`), saturated
/// to ±2^62 as to_int.
std::vector<int64_t> to_ints(const ConstValue &c);

/// The gradc dtype of an ONNX element type (TensorProto::DataType), if any,
/// and the element type's name ("FLOAT", "UINT8", or the number).
std::optional<DType> dtype_of(int64_t elem);
std::string elem_name(int64_t elem);

/// `s` as it may be pasted into a comment or a message:
/// control characters, quotes and backslashes escaped (`\n`, `\x7f`).
std::string printable(const std::string &s);

/// A floating-point literal of `dtype` ("2f", "0.5f64", "-inff", "nanf16"):
/// infinities and NaN in the spellings the lexer reads.
std::string float_literal(double v, DType dtype);

/// Element i of `c` as a literal of its dtype, exactly ("9223372036854775807i64").
std::string literal_of(const ConstValue &c, size_t i);

/// What a mapping returns: one Relay expression per output, or one
/// expression whose value is a tuple of the outputs. `types`, where not
/// empty, are the outputs' types by gradc's rule where it differs from what
/// ONNX's shape inference says (a ceil_mode pool, which follows PyTorch).
struct Mapped {
  std::vector<std::string> outputs;
  bool tuple = false;
  std::vector<Type> types;
};

/// The opsets of the default domain the table maps; a model importing
/// another is refused (an operator's meaning changes with its opset).
constexpr int64_t kMinOpset = 11, kMaxOpset = 17;

class NodeCtx {
public:
  virtual ~NodeCtx() = default;
  virtual const onnx::NodeProto &node() const = 0;
  virtual int64_t opset() const = 0;

  /// Inputs: absent optional inputs (an empty name, or past the end) are not there.
  virtual size_t num_inputs() const = 0;
  virtual bool has_input(size_t i) const = 0;
  /// The Relay expression of input i (an initializer becomes a parameter).
  virtual std::string input(size_t i) = 0;
  virtual const Type &input_type(size_t i) const = 0;
  /// Input i's value where it is a constant (no parameter is made for it).
  virtual std::optional<ConstValue> constant(size_t i) const = 0;
  /// The inferred type of output i.
  virtual const Type &output_type(size_t i) const = 0;
  virtual size_t num_outputs() const = 0;

  virtual bool has_attr(const std::string &name) const = 0;
  virtual int64_t attr_int(const std::string &name, int64_t fallback) const = 0;
  virtual double attr_float(const std::string &name, double fallback) const = 0;
  virtual std::string attr_string(const std::string &name, const std::string &fallback) const = 0;
  virtual std::vector<int64_t> attr_ints(const std::string &name, std::vector<int64_t> fallback) const = 0;
  virtual std::optional<ConstValue> attr_tensor(const std::string &name) const = 0;

  /// Records that the node cannot be mapped (`what`: an attribute and its
  /// value, an input that must be constant...); the mapping then returns {}.
  virtual void unsupported(const std::string &what) = 0;
  /// A literal of `dtype` with value `v` ("2f", "0.5f64", "3i64").
  virtual std::string literal(double v, DType dtype) const = 0;
};

using Mapping = std::function<Mapped(NodeCtx &)>;

struct OpEntry {
  const char *op_type;
  Mapping map;
};

/// The table: one entry per ONNX operator.
const std::vector<OpEntry> &op_table();

} // namespace gradc::onnx_import
