//===- Passes.h - the small structural passes of the tensor IR ------------===//
//
// Each is one function in one .cpp under lib/transform/. The larger passes
// (Gradient, Remat, Fuse) have headers of their own.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/Expr.h"

#include <string>
#include <unordered_map>

namespace gradc {

/// A-normal form. Pre: typed. Post: every Call, GlobalCall, Tuple and TupleGet
/// is the whole value of its own binding, arguments and the result are atoms,
/// and bindings whose value is an atom are substituted away.
FunctionPtr normalize(const Function &fn);

/// The most bindings a function may have once inlined (inlining copies the
/// callee at every call site: 21 functions each calling the previous twice
/// would be 2^20 copies of the first).
constexpr int64_t kMaxInlinedBindings = 1'000'000;
/// The bindings `fn` has once its calls are inlined, saturating at limit + 1;
/// `memo` carries sizes between calls for the same module and limit.
int64_t inlined_size(const Module &module, const Function &fn, int64_t limit,
                     std::unordered_map<std::string, int64_t> &memo);
/// Reports each function over kMaxInlinedBindings; false if one is.
bool check_inline_size(const Module &module, DiagEngine &diag);

/// Replaces every `@f(...)` call by a fresh copy of @f's body.
/// Pre: typed, ANF, no recursion. Post: no GlobalCall remains in `fn`.
FunctionPtr inline_calls(const Function &fn, const Module &module);

/// Which composites expand_composites expands: before differentiation, those
/// without a gradient rule of their own (the others are differentiated by
/// their rule, then expanded); after it, all.
enum class Composites { WithoutGradientRule, All };

/// Replaces every call of a composite operator (OpDef::decompose) by the
/// bindings of its composition. Pre and post: ANF. Runs before the gradient
/// pass (WithoutGradientRule), right after it (All), and again before
/// fusion (gradient rules may emit composites).
FunctionPtr expand_composites(const Function &fn, Composites which = Composites::All);

/// Replaces every grad.start_checkpoint / grad.end_checkpoint binding by its
/// input: after rematerialization the markers have served. Pre and post: ANF.
FunctionPtr drop_checkpoint_markers(const Function &fn);

/// Replaces a call whose operator computes each field of its tuple result on
/// its own (OpDef::project: split), and whose value is read only through
/// projections in its own body, by one call per projection: `%p =
/// split(%x, 2); %a = %p.0` becomes `%a = strided_slice(%x, ...)`, which
/// fuses into %a's consumers where split's kernel wrote every part to
/// memory. Runs on the bodies of `fn` values too. Pre and post: ANF.
FunctionPtr project_fields(const Function &fn);

/// transpose(P) of a 2-D matmul or nn.dense P read only there becomes the
/// product of the transposed operands (bᵀ · aᵀ; dense(w, x)): a weight used
/// transposed gets its gradient from one product kernel, into which its
/// update fuses (TransposeProducts.cpp). The dead product is left to
/// dead-code elimination.
FunctionPtr transpose_products(const Function &fn);

/// Two `sum`s over the same axes of tensors of one type that read a common
/// value of that size (a batch norm's backward Σ g and Σ g·(x - mean))
/// become one sum_pair at the later one's place, its fields bound to the
/// sums' Vars, where nothing between them reads the earlier one
/// (SiblingSums.cpp): fused, one kernel reads what they share once. Runs on
/// the bodies of `fn` values too. Pre and post: ANF.
FunctionPtr pair_sibling_sums(const Function &fn);

/// Replaces a binding that applies the same operator, with the same
/// attributes, to the same operands (Vars by identity, constants by bits)
/// as an earlier one by that one. A function with checkpoint markers or `fn`
/// values is returned unchanged. Pre and post: ANF.
FunctionPtr eliminate_common_subexpressions(const Function &fn);

/// Removes bindings whose value the result does not depend on (a use inside
/// the body of a `fn` value counts); a checkpoint segment whose start is live
/// keeps its ends, so that no start is left open. Pre and post: ANF.
FunctionPtr eliminate_dead_code(const Function &fn);

/// For a function that writes results into its parameters
/// (FunctionAttrs::inplace): moves each binding that makes such a result
/// after every other binding that reads the parameter's old value, where
/// that does not reorder a dependence, so lowering may write it in place
/// (loops/InPlace.h). Otherwise the order is kept (a stable topological
/// order). Pre and post: ANF or fused.
FunctionPtr order_in_place_updates(const Function &fn);

} // namespace gradc
