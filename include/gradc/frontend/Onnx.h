//===- Onnx.h - ONNX models as Relay text (gradc import) ------------------===//
//
// The importer reads a serialized ONNX model of opset 11 to 17, checks it
// (onnx::checker), infers its shapes (onnx::shape_inference, with
// --input-shape fixing the dynamic dimensions of graph inputs) and writes it
// as one Relay function @main: its graph inputs become parameters, then the
// initializers it uses as tensors (weights), named after the ONNX names
// (sanitised, collisions resolved, long ones shortened with a hash, the
// mapping in a comment at the top). Initializers and Constant nodes read as
// attributes (a Reshape's shape, a Slice's starts, ...) are folded into the
// call, exactly, in their own dtype. Every node maps to gradc operators
// through one entry of the operator table (lib/frontend/OnnxOps.cpp). A node
// without a mapping, or with an attribute the mapping does not support, is an
// error that names the node, its op type and what is missing, every one in
// the file at once. The text written is typed with gradc's own relations,
// and each result compared with the graph output's declared type.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/DType.h"
#include "gradc/ir/Type.h"

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace gradc {

/// A weight the model carries (an initializer read as a tensor).
struct ImportedWeight {
  std::string name; // the parameter's name, without '%'
  DType dtype = DType::Float32;
  Shape shape;
  std::string data; // numel * dtype_bytes bytes, little-endian, C order
};

struct OnnxImport {
  std::string text;                    // the Relay module
  std::vector<ImportedWeight> weights; // in parameter order
};

struct OnnxImportOptions {
  /// --input-shape NAME=1,3,224,224: fixes a graph input's dimensions.
  std::map<std::string, std::vector<int64_t>> input_shapes;
};

/// `bytes` is the content of the model file `path` (named in diagnostics).
/// Errors go to `err` as "PATH: error: ..." lines; nullopt after any.
std::optional<OnnxImport> import_onnx(const std::string &path, const std::string &bytes,
                                      const OnnxImportOptions &options, std::ostream &err);

/// Whether `path` names an ONNX model (ends in .onnx, any case) rather than
/// Relay text: how compile, run and check tell the two apart.
bool looks_like_onnx(const std::string &path);

/// The ONNX operators the importer maps, sorted (for `gradc import --list`
/// and the conformance test).
std::vector<std::string> onnx_supported_ops();

} // namespace gradc
