//===- OpReference.h - derived lines of an operator's reference page ------===//
#pragma once

#include "gradc/op/Registry.h"

#include <string>
#include <vector>

namespace gradc {

/// The operator's gradient rule applied to its first example, as one line per
/// argument: "dARG = EXPR" over the example's parameters, the result %out and
/// its adjoint %grad. Empty when it has no rule (or no example).
std::vector<std::string> derived_gradient(const OpDef &op);
/// A composite's expansion of its first example, as one expression; "" if none.
std::string derived_decomposition(const OpDef &op);
/// The first example as a one-line program; "" if none.
std::string example_text(const OpDef &op);

} // namespace gradc
