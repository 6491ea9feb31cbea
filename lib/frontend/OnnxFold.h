//===- OnnxFold.h - constant tensors and the nodes folded over them -------===//
//
// A PyTorch export computes shapes, masks and indices with small graphs of
// Shape, Gather, Concat, Range, Where, arithmetic...: the importer folds
// every node whose inputs are all constants and whose operator is folded
// here, exactly as ONNX defines it, in the tensor's own dtype (float32
// rounds, integers wrap, integer Div truncates). A folded value becomes a
// literal or a parameter only where a mapped operator reads it as a tensor;
// a mapping that needs an attribute (a Reshape's shape) reads it whole.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "OnnxProto.h"

#include <optional>
#include <string>
#include <vector>

namespace onnx {
class NodeProto;
class AttributeProto;
} // namespace onnx

namespace gradc::onnx_import {

/// Constants up to this many elements are kept as values (and folded over);
/// a larger one is a weight, made a parameter when read.
constexpr int64_t kMaxFoldedElements = 1 << 16;

/// A constant tensor's elements in its dtype: those of a floating-point
/// dtype as doubles already rounded to it, those of an integer or bool dtype
/// exactly as integers (an int64 beyond 2^53 is not exact as a double).
class ConstValue {
public:
  ConstValue() = default;
  ConstValue(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {}
  static ConstValue of(const Decoded &d);

  DType dtype() const { return dtype_; }
  const Shape &shape() const { return shape_; }
  void set_shape(Shape s) { shape_ = std::move(s); }
  bool is_float() const;
  size_t size() const { return is_float() ? floats_.size() : ints_.size(); }
  /// Element i as a double (an integer converted).
  double number(size_t i) const { return is_float() ? floats_[i] : double(ints_[i]); }
  /// Element i as an integer: exact for an integer dtype; a floating-point
  /// value truncated and saturated to ±2^62 (INT64_MAX, the "to the end" of a
  /// Slice, would overflow what a mapping adds to it), NaN as 0.
  int64_t integer(size_t i) const;
  /// Element i of an integer or bool dtype, exactly.
  int64_t exact(size_t i) const { return ints_[i]; }
  /// Whether every element is the first (NaN as NaN).
  bool uniform() const;
  /// Every element as integer().
  std::vector<int64_t> integers() const;

  /// Appends an integer, converted as ONNX's Cast does: wrapped to int32
  /// (numpy's astype), != 0 for bool, rounded to a floating-point dtype.
  void push_int(int64_t v);
  /// Appends a number rounded to the dtype as a tensor of it holds it (an
  /// integer dtype truncates toward zero and saturates, NaN as 0).
  void push_number(double v);
  /// Appends element i of `from` (any dtype), converted.
  void push_element(const ConstValue &from, size_t i);

  /// The elements as bytes of the dtype (a folded constant made a parameter).
  std::string bytes() const;

private:
  DType dtype_ = DType::Float32;
  Shape shape_;
  std::vector<double> floats_;
  std::vector<int64_t> ints_;
};

/// A scalar of `dtype` holding `v`, rounded to it.
ConstValue scalar_of(double v, DType dtype);

/// One input of a node as the folder sees it: absent (an empty name), or its
/// type and, where it is a constant, its value.
struct FoldInput {
  const Type *type = nullptr;
  const ConstValue *constant = nullptr;
};

/// The value of `node`'s single output where the folder computes it: every
/// input a constant (Shape and Size need only the type), within
/// kMaxFoldedElements. Nothing where it does not (the mapping then takes the
/// node, and says why where it cannot).
std::optional<ConstValue> fold(const onnx::NodeProto &node, const std::vector<FoldInput> &in, int64_t opset);

/// The ONNX operators fold() computes.
const std::vector<std::string> &folded_ops();

/// A node's attribute by name, or null.
const onnx::AttributeProto *find_attr(const onnx::NodeProto &node, const std::string &name);

} // namespace gradc::onnx_import
