//===- InPlace.h - what updating a parameter in place requires -----------===//
//
// A function may write a result leaf into one of its parameters (an InOut
// buffer, FunctionAttrs::inplace): the caller's buffer is read, then
// updated. Lowering writes a leaf straight into the parameter where the
// kernels that make it satisfy the rule below, and copies it there last
// otherwise; the verifier checks the rule after every loop pass.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/loops/LoopIR.h"

#include <string>

namespace gradc {

/// Why the kernels of `fn` do not update `buf` safely in place, or "" if
/// they do: at most one kernel stores into it, outside every time loop; and
/// in it every read of `buf` is part of the value stored to `buf` at the
/// same index, under loops whose variables all appear in that index (each
/// element is written once, after the only read of its old value). Kernels
/// before the writer read the old value, kernels after it the new one:
/// which a binding wants is the lowering's to keep (Lower.cpp writes a
/// result in place only where no later kernel wants the old value).
std::string in_place_violation(const LoweredFunction &fn, const Buffer &buf);

} // namespace gradc
