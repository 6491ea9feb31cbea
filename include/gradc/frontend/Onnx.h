//===- Onnx.h - ONNX models as gradc IR (gradc import) --------------------===//
//
// The importer reads a serialized ONNX model of opset 11 to 17, checks it
// (onnx::checker) and builds one function @main as typed gradc IR: its graph
// inputs become parameters (--input-shape fixes their dynamic dimensions),
// then the initializers it reads as tensors (weights), named after the ONNX
// names (sanitised, collisions resolved, long ones shortened with a hash,
// the mapping in a comment at the top). Constants and the nodes computing
// shapes and masks from them are folded, exactly, in their own dtype; every
// other node maps to gradc operators through one entry of the operator
// table (lib/frontend/OnnxOps.cpp), each call typed by its operator's
// relation as it is built. A node without a mapping, with an attribute the
// mapping does not support, or that gradc's relations cannot type is an
// error that names the node, its op type and what is missing, every one in
// the file at once. Each result is compared with the graph output's
// declared type. The module is returned as text (`gradc import` writes it).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/DType.h"
#include "gradc/ir/Type.h"
#include "gradc/support/SharedBytes.h"

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
  SharedBytes data; // numel * dtype_bytes bytes, little-endian, C order (often the model file's own pages)
};

struct OnnxImport {
  std::string text;                    // the module, as gradc text
  std::vector<ImportedWeight> weights; // in parameter order
};

struct OnnxImportOptions {
  /// --input-shape NAME=1,3,224,224: fixes a graph input's dimensions.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  /// --train on an ONNX model (or `import --state-in-place`): the running
  /// statistics a training-mode BatchNormalization computes become results
  /// of @main written into their initializers in place (inplace_indices),
  /// so a training step updates them.
  bool state_in_place = false;
};

/// `bytes` is the content of the model file `path` (named in diagnostics);
/// it is released once parsed, and each weight's bytes move from the parsed
/// model into its ImportedWeight: a model's weights are held once.
/// Errors go to `err` as "PATH: error: ..." lines; nullopt after any.
std::optional<OnnxImport> import_onnx(const std::string &path, std::string bytes, const OnnxImportOptions &options,
                                      std::ostream &err);

/// The same for the model file `path`, parsed where it is mapped into
/// memory: the file's bytes are not held beside the parsed model's.
std::optional<OnnxImport> import_onnx_file(const std::string &path, const OnnxImportOptions &options,
                                           std::ostream &err);

/// Whether `path` names an ONNX model (ends in .onnx, any case) rather than
/// Relay text: how compile, run and check tell the two apart.
bool looks_like_onnx(const std::string &path);

} // namespace gradc
