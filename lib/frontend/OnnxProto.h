//===- OnnxProto.h - ONNX protobuf messages read as gradc values ----------===//
//
// The importer's lowest layer: ONNX element types as gradc dtypes, tensors
// (initializers, Constant values) decoded into bytes of their dtype, declared
// value types as gradc types, and a sandbox for the ONNX library's checker,
// which crashes on some malformed models. Nothing here knows an operator.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/DType.h"
#include "gradc/ir/Type.h"
#include "gradc/support/SharedBytes.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace onnx {
class TensorProto;
class TypeProto;
class TypeProto_Tensor;
class GraphProto;
} // namespace onnx

namespace gradc::onnx_import {

/// The most elements a tensor of an imported model may have (2^40).
constexpr int64_t kMaxImportElements = int64_t(1) << 40;

/// The gradc dtype of an ONNX element type (TensorProto::DataType), if any,
/// and the element type's name ("FLOAT", "UINT8", or the number).
std::optional<DType> dtype_of(int64_t elem);
std::string elem_name(int64_t elem);
/// ONNX's element type for a gradc dtype.
int32_t elem_of(DType dt);

/// `s` as it may be pasted into a comment or a message: control characters,
/// quotes and backslashes escaped (`\n`, `\x7f`).
std::string printable(const std::string &s);
/// A message of the ONNX library on one line (the checker prints a node over
/// several), its control characters escaped.
std::string one_line(const std::string &text);

/// float32 <-> IEEE binary16, rounding to nearest even.
uint16_t half_bits(float f);
float half_value(uint16_t h);

/// A tensor's elements as bytes of its gradc dtype (little-endian, C order),
/// or why not.
struct Decoded {
  DType dtype = DType::Float32;
  Shape shape;
  SharedBytes data;
  std::string error;
};
/// Decodes `t`. Raw data is moved out of the message, not copied: a weight's
/// bytes are held once (the message keeps an empty tensor). Where the raw
/// data was left in the model file (strip_large_tensors), `mapped` is it.
Decoded decode(onnx::TensorProto &t, const SharedBytes *mapped = nullptr);
/// Decodes a copy of `t`, which is left as it is.
Decoded decode_copy(const onnx::TensorProto &t);

/// Where a stripped tensor's raw data lies in the model file.
struct FileRange {
  size_t offset = 0, size = 0;
};
/// The serialized model `file` with the raw data of each graph initializer
/// of at least `threshold` bytes left out (a one-byte placeholder stands in,
/// so that the message and ONNX's checker still see raw data), and for each
/// initializer in order where its data lies in `file` (nullopt: kept). Reads
/// only protobuf's wire format, so protobuf never copies a weight; nullopt
/// where the bytes do not read as that format (the caller parses them
/// whole, for its diagnostics).
std::optional<std::string> strip_large_tensors(std::string_view file, size_t threshold,
                                               std::vector<std::optional<FileRange>> &initializers);

/// A declared value type as a gradc type, or why it is not one (not a
/// tensor, an element type gradc has not, an unknown or dynamic dimension,
/// too many elements).
struct DeclaredType {
  std::optional<Type> type;
  std::string problem;
};
DeclaredType declared_type(const onnx::TypeProto &t);
/// A declared tensor type as text ("float32 (3, ?)"), `?` for a dimension it
/// leaves open.
std::string declared_text(const onnx::TypeProto_Tensor &t);

/// Names of the tensors of `g` (and of its subgraphs) whose data is stored
/// outside the model file.
void external_tensors(const onnx::GraphProto &g, std::vector<std::string> &out);

/// Runs `work` in a child process and returns what it wrote, or why it did
/// not finish: the ONNX library's checker crashes on some malformed models,
/// and a model must never crash gradc. The child dies by the default action
/// of any fatal signal, and after a timeout.
struct Isolated {
  std::string out;
  std::string failure; // empty: finished
};
Isolated run_isolated(const std::function<std::string()> &work);

} // namespace gradc::onnx_import
