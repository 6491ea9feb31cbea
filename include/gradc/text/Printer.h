//===- Printer.h - tensor IR to Relay text --------------------------------===//
#pragma once

#include "gradc/ir/Expr.h"

#include <string>

namespace gradc {

struct PrintOptions {
  /// Annotate every binding with `/* ty=... */` and functions with `-> T`.
  bool show_types = false;
  /// Leave out the attributes a call gives its operator's default value
  /// (they read back as the same call): `gradc import`'s text.
  bool omit_default_attrs = false;
};

/// Relay text (kRelayVersion, text/Lexer.h) that parse_module reads back to the same module.
/// Distinct Vars that share a name are printed with a numeric suffix.
std::string print_module(const Module &module, const PrintOptions &opts = {});

} // namespace gradc
