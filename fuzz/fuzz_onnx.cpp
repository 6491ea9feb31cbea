//===- fuzz_onnx.cpp - libFuzzer target: the ONNX importer ----------------===//
//
// Any byte string is an ONNX file given to `gradc import`: protobuf parsing,
// the ONNX checker, the dynamic-shape check, shape inference (with the
// rounds on a copy where folded constants are initializers), the operator
// table, and then the front end on the text the importer wrote (parse and
// type inference, as `gradc import` checks it). A located error is an
// expected outcome; a crash, a sanitizer report, an uncaught exception, a
// hang or running out of memory is a finding. The seeds are ONNX's backend
// test models (fuzz/run_onnx.sh).
//
//===----------------------------------------------------------------------===//
#include "gradc/frontend/Onnx.h"
#include "gradc/text/Parser.h"
#include "gradc/transform/TypeInfer.h"

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

using namespace gradc;

namespace {
constexpr size_t kMaxInputBytes = 1 << 16;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > kMaxInputBytes)
    return -1;
  static const bool verbose = std::getenv("GRADC_FUZZ_VERBOSE") != nullptr;
  std::ostringstream errors;
  std::optional<OnnxImport> imported =
      import_onnx("fuzz.onnx", std::string(reinterpret_cast<const char *>(data), size), {}, errors);
  if (imported) {
    auto source = std::make_shared<SourceFile>("fuzz.relay", imported->text);
    DiagEngine diag(source, errors);
    try {
      if (std::optional<Module> m = parse_module(source, diag))
        infer_types(*m, diag);
    } catch (const CompileError &) {
    }
  }
  if (verbose)
    std::cerr << (imported ? imported->text : std::string()) << errors.str();
  return 0;
}
