//===- Printer.h - tensor IR to Relay text --------------------------------===//
#pragma once

#include "gradc/ir/Expr.h"

#include <string>

namespace gradc {

struct PrintOptions {
  /// Annotate every binding with `/* ty=... */` and functions with `-> T`.
  bool show_types = false;
};

/// Relay text format 0.0.5 that parse_module reads back to the same module.
/// Distinct Vars that share a name are printed with a numeric suffix.
std::string print_module(const Module &module, const PrintOptions &opts = {});
std::string print_function(const Function &fn, const PrintOptions &opts = {});
/// A constant literal as written in the text format (`0.5f`, `3i64`, ...).
std::string format_constant(const Expr &constant);

} // namespace gradc
