//===- fuzz_frontend.cpp - libFuzzer target: parse and type-check ---------===//
//
// Any byte string must give either a module or located diagnostics: never a
// crash, a hang, an assertion or an internal error.
//
//===----------------------------------------------------------------------===//
#include "gradc/text/Printer.h"
#include "gradc/text/Parser.h"
#include "gradc/transform/TypeInfer.h"

#include <cstdlib>
#include <sstream>

using namespace gradc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto file = std::make_shared<SourceFile>("fuzz.relay", std::string(reinterpret_cast<const char *>(data), size));
  std::ostringstream sink;
  DiagEngine diag(file, sink);
  try {
    std::optional<Module> m = parse_module(file, diag);
    if (!m)
      return 0;
    Module typed = infer_types(*m, diag);
    if (diag.error_count())
      return 0;
    // A well-typed module must round-trip through the printer.
    std::string text = print_module(typed, {true});
    auto again = std::make_shared<SourceFile>("again.relay", text);
    DiagEngine diag2(again, sink);
    std::optional<Module> m2 = parse_module(again, diag2);
    if (!m2)
      abort();
    Module typed2 = infer_types(*m2, diag2);
    if (diag2.error_count() || print_module(typed2, {true}) != text)
      abort();
  } catch (const InternalError &) {
    abort();
  }
  return 0;
}
