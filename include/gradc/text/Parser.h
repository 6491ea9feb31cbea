//===- Parser.h - Relay text format to tensor IR --------------------------===//
#pragma once

#include "gradc/ir/Expr.h"

#include <optional>

namespace gradc {

/// Parses a whole module (SPEC §3). Reports the first syntax error, every
/// unknown operator and every undefined variable with its span; returns
/// nullopt if anything was reported. Types are not inferred here.
std::optional<Module> parse_module(std::shared_ptr<const SourceFile> file, DiagEngine &diag);

} // namespace gradc
