//===- Verify.h - the tensor-IR verifier ----------------------------------===//
//
// Checks what every pass promises its successor. The pipeline runs it after
// every pass when --verify-each is given (always in debug builds and in the
// tests; see driver/Pipeline.cpp). A violation is a gradc bug: it throws
// InternalError naming the pass that broke the invariant.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/Expr.h"

#include <string>

namespace gradc {

/// The shape a function body has at a point of the pipeline.
enum class IRForm {
  Typed, // every node typed; bindings may hold nested expressions
  ANF,   // and every Call/Tuple/TupleGet/GlobalCall is a binding's whole value, with atom operands
  Fused, // ANF whose Call arguments may also be fused injective calls (transform/Fuse.h)
};

/// Checks `fn`: each Var is defined once and before every use (parameters,
/// then bindings in order; a `fn` value sees its own parameters and the
/// enclosing scope); every node is typed, a binding's Var has its value's
/// type, a Tuple/TupleGet the type its operands give, and each Call the type
/// its operator's relation computes for its arguments and attributes;
/// `form`'s structural rules. Throws InternalError "after PASS: ...".
void verify(const Function &fn, IRForm form, const std::string &after_pass);

/// Every function of `m` (a GlobalCall must name one of them).
void verify(const Module &m, IRForm form, const std::string &after_pass);

} // namespace gradc
