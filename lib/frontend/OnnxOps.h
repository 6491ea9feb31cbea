//===- OnnxOps.h - what an ONNX operator's mapping sees -------------------===//
//
// One entry of the table (OnnxOps.cpp) turns one ONNX node into typed gradc
// IR through a NodeCtx: its inputs as typed values, the constant value of an
// input where there is one (an initializer or a folded node: a Reshape's
// shape), its attributes, and a Builder that types each call with the
// operator's own relation as it is built (an ill-typed call is an error
// naming the node). Calls are built with the operators' handles (op/Ops.h)
// and typed attribute structs (op/attrs/), never with names as strings. A
// mapping reports what it cannot map with ctx.unsupported().
//
//===----------------------------------------------------------------------===//
#pragma once

#include "OnnxFold.h"
#include "gradc/op/Builder.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace onnx {
class NodeProto;
} // namespace onnx

namespace gradc::onnx_import {

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
  /// Input i as a typed value: a weight or a large constant becomes a
  /// parameter the first time it is read, a small constant a literal.
  virtual ExprPtr input(size_t i) = 0;
  virtual const Type &input_type(size_t i) const = 0;
  /// Input i's value where it is a constant, else null.
  virtual const ConstValue *constant(size_t i) const = 0;
  /// The node's outputs, trailing unnamed ones dropped; an unnamed one
  /// before a named one is not wanted.
  virtual size_t num_outputs() const = 0;
  virtual bool wants_output(size_t i) const = 0;
  /// The type the model declares for output i (a graph output or a
  /// value_info entry with a static shape), if any: where a shape-only
  /// operator's shape is a runtime input (ONNX's node tests pass it so),
  /// the declared type fixes it, and that input is not read.
  virtual std::optional<Type> declared_output(size_t i) const = 0;

  virtual bool has_attr(const std::string &name) const = 0;
  virtual int64_t attr_int(const std::string &name, int64_t fallback) const = 0;
  virtual double attr_float(const std::string &name, double fallback) const = 0;
  virtual std::string attr_string(const std::string &name, const std::string &fallback) const = 0;
  virtual std::vector<int64_t> attr_ints(const std::string &name, std::vector<int64_t> fallback) const = 0;
  virtual std::optional<ConstValue> attr_tensor(const std::string &name) const = 0;

  /// Builds the node's calls, each typed by its operator's relation.
  virtual Builder &b() = 0;
  /// A scalar literal of `dtype` holding `v` rounded to it.
  virtual ExprPtr literal(double v, DType dtype) = 0;
  /// The model's random seed, a scalar int64 parameter `%seed` made on first
  /// use (after the graph's inputs), and a stream number of its own for each
  /// call: the operators that draw random numbers in training mode.
  virtual ExprPtr seed() = 0;
  virtual int64_t next_stream() = 0;

  /// Whether the model's own state is updated in place (OnnxImportOptions::
  /// state_in_place): see update_in_place.
  virtual bool keeps_state() const = 0;
  /// A state the model updates itself (a batch norm's running statistics in
  /// training mode): with keeps_state, @main returns `value` after its
  /// outputs, written into `weight` in place (inplace_indices). A `weight`
  /// that is not a parameter is left alone.
  virtual void update_in_place(const ExprPtr &weight, const ExprPtr &value) = 0;

  /// Records that the node cannot be mapped (`what`: an attribute and its
  /// value, an input that must be constant...); the mapping then returns {}.
  virtual void unsupported(const std::string &what) = 0;
};

/// What a mapping returns: one typed value per output (null for an output
/// not wanted), or nothing after ctx.unsupported().
using Mapped = std::vector<ExprPtr>;
using Mapping = std::function<Mapped(NodeCtx &)>;

struct OpEntry {
  const char *op_type;
  Mapping map;
};

/// The table: one entry per ONNX operator.
const std::vector<OpEntry> &op_table();

} // namespace gradc::onnx_import
