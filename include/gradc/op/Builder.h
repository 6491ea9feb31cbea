//===- Builder.h - emit typed bindings from passes and gradients ----------===//
//
// A Builder appends `%v = op(args)` bindings to a body and infers the type of
// each as it is built (like Relax's BlockBuilder), so gradient rules read as
// math: `g.b.mul(g.grad, g.out)`. A rule that builds an ill-typed call is a
// compiler bug and raises an internal error naming the operator.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"
#include "gradc/op/Check.h"
#include "gradc/op/Ops.h"
#include "gradc/ir/Expr.h"

#include <string>
#include <vector>

namespace gradc {

class Builder {
public:
  Builder(std::vector<Binding> &out, Span span = {}) : out_(out), span_(span) {}
  /// A builder for user-facing checks (a composite's relation): an ill-typed
  /// call goes to `report` and yields an untyped value instead of an
  /// internal error; calls on untyped values stay untyped.
  Builder(std::vector<Binding> &out, Span span, Report report)
      : out_(out), span_(span), report_(std::move(report)) {}

  /// Emits `%v = name(args, attrs)` and returns %v with its inferred type.
  ExprPtr call(const OpDef *op, std::vector<ExprPtr> args, Attrs attrs = {});
  /// The same with the operator's typed attributes (op/Attrs.h).
  template <TypedAttrs T> ExprPtr call(const OpDef *op, std::vector<ExprPtr> args, const T &attrs) {
    return call(op, std::move(args), encode_attrs(attrs));
  }
  /// Binds an already typed value (a Tuple or TupleGet, say) to a fresh Var.
  ExprPtr bind(ExprPtr value, const std::string &hint = "t");
  ExprPtr constant(double value, DType dtype);
  ExprPtr tuple(std::vector<ExprPtr> fields);
  ExprPtr get(ExprPtr tuple, int index);

  ExprPtr add(ExprPtr a, ExprPtr b) { return call(ops::add, {a, b}); }
  ExprPtr sub(ExprPtr a, ExprPtr b) { return call(ops::subtract, {a, b}); }
  ExprPtr mul(ExprPtr a, ExprPtr b) { return call(ops::multiply, {a, b}); }
  ExprPtr div(ExprPtr a, ExprPtr b) { return call(ops::divide, {a, b}); }
  ExprPtr neg(ExprPtr a) { return call(ops::negative, {a}); }
  /// a * c for a scalar constant c of a's dtype.
  ExprPtr scale(ExprPtr a, double c);
  ExprPtr ones_like(ExprPtr a) { return call(ops::ones_like, {a}); }
  /// Zeros of any type (a tuple of zeros for a tuple type).
  ExprPtr zeros(const Type &type);
  /// `a` summed over broadcast axes down to `shape` (no-op when equal).
  ExprPtr sum_to(ExprPtr a, const Shape &shape);
  /// `a` reshaped to exactly `shape` (no-op when equal): built with
  /// allowzero=True, so a 0 in `shape` is a dimension of size 0, never
  /// Relay's "copy the input's dimension", and the dump means the same.
  ExprPtr reshape(ExprPtr a, const Shape &shape);

  /// The layout and reduction operators with their attributes spelled once,
  /// here, so rules read as math and build no Attrs by hand.
  ExprPtr transpose(ExprPtr a, const std::vector<int64_t> &axes);
  /// `a` with its last two axes swapped (a batch of matrices transposed).
  ExprPtr transpose_last2(ExprPtr a);
  ExprPtr broadcast_to(ExprPtr a, const Shape &shape);
  /// sum over `axes` (every other axis with `exclude`).
  ExprPtr sum(ExprPtr a, const std::vector<int64_t> &axes, bool keepdims = false, bool exclude = false);
  ExprPtr cast(ExprPtr a, DType dtype);
  ExprPtr reverse(ExprPtr a, int64_t axis);
  /// nn.pad with zeros: [before, after] per axis (negative crops).
  ExprPtr pad(ExprPtr a, const IntPairs &widths);

  void set_span(Span span) { span_ = span; }
  /// The name the next bindings' variables are printed with ("t" by default).
  void set_hint(std::string hint) { hint_ = std::move(hint); }
  /// The bindings emitted so far (a rule inlines a derived function here).
  std::vector<Binding> &bindings() { return out_; }

private:
  std::vector<Binding> &out_;
  Span span_;
  std::string hint_ = "t";
  Report report_; // empty: an ill-typed call is a compiler bug
};

} // namespace gradc
