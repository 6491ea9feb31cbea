//===- VjpSplit.h - a vjp split into saved values and a backward half -----===//
//
// A rule that differentiates a function it runs many times (scan's body)
// would otherwise recompute, in every backward step, what the forward step
// already computed. split_vjp is the partial evaluation JAX applies to a
// vjp (custom_vjp's fwd and bwd): it picks the values of the function that
// the vjp's adjoint half reads and that are expensive to recompute, so that
// the forward pass can return them too, and gives the vjp that reads them
// as parameters instead.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/Expr.h"

#include <vector>

namespace gradc {

struct VjpSplit {
  /// Indices into the primal's bindings of the values to save, ascending:
  /// each a tensor computed by an operator that is not injective and does
  /// at least two FLOPs per element it writes (products, reductions, ...).
  std::vector<size_t> saved;
  /// The vjp with one parameter per saved value (in `saved`'s order)
  /// inserted before its parameter `insert_at`, and no binding that only
  /// served to recompute them. The injective values between a saved one and
  /// the adjoint half (an activation of a product) are still recomputed:
  /// they cost a pass over memory, not a product.
  FunctionPtr backward;
};

/// Splits `vjp`, which build_vjp(primal, diag, /*keep_primal=*/true) gave:
/// its first `num_primal` bindings are copies of the primal's own, in order,
/// and its last parameter is the adjoint of the primal's result. With
/// nothing worth saving, `saved` is empty and `backward` is the vjp without
/// its dead code.
VjpSplit split_vjp(const Function &vjp, size_t num_primal, size_t insert_at);

} // namespace gradc
