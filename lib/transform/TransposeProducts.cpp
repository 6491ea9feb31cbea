//===- TransposeProducts.cpp - a product's transpose as the product -------===//
//
// Part of the `fused` stage, before fusion. (a · b)ᵀ = bᵀ · aᵀ. A model that
// uses a weight transposed (PyTorch's nn.Linear exported to ONNX as
// x · transpose(W)) gets that weight's gradient as the transpose of a
// product,
//   %p = matmul(transpose(%x), %dy); %dW = transpose(%p, axes=[1, 0])
// which cost a kernel storing dWᵀ and another reading it across (GPT-2's
// weight gradients, an adjoint's or a training step's, whose optimizer
// update then read the gradient across instead of taking the product's
// kernel as its own). A 2-D `matmul` or `nn.dense` whose value only such a
// transpose reads becomes the product of the transposed operands, bound
// to the transpose's Var:
//   %dW = matmul(transpose(%dy), %x)         (transposes of transposes cancel)
//   transpose(dense(x, w)) = dense(w, x)     (dense(x, w) = x · wᵀ)
// The operand transposes fuse into the product as producers (the packed
// product reads any layout), so the product stores dW itself and an update
// of W fuses into it as its epilogue.
//
//===----------------------------------------------------------------------===//
#include "gradc/ir/Functor.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Registry.h"
#include "gradc/op/attrs/linear.h"
#include "gradc/op/attrs/shape.h"
#include "gradc/transform/Passes.h"

#include <unordered_map>

namespace gradc {
namespace {

bool is_matrix(const ExprPtr &e) { return e->type.is_tensor() && e->type.shape.size() == 2; }

/// Whether `v` is transpose(x, axes=[1, 0]) of a matrix (or with no axes).
bool swaps_matrix(const Expr &v) {
  if (v.kind != ExprKind::Call || v.op != ops::transpose || !is_matrix(v.args[0]))
    return false;
  std::vector<int64_t> axes = call_attrs<TransposeAttrs>(v).permutation(2);
  return axes == std::vector<int64_t>{1, 0};
}

class TransposeProducts : public ExprMutator {
public:
  explicit TransposeProducts(const Function &fn) : uses_(count_uses(fn)) {
    for (const Binding &b : fn.body.bindings)
      bound_[b.var.get()] = b.value;
  }

protected:
  void mutate_binding(const Binding &b, std::vector<Binding> &out) override {
    const Expr *product = transposed_product(*b.value);
    if (!product)
      return ExprMutator::mutate_binding(b, out);
    std::vector<Binding> parts;
    Builder builder(parts, b.value->span);
    const ExprPtr &a = product->args[0], &c = product->args[1];
    ExprPtr swapped = product->op == ops::matmul
                          ? builder.call(ops::matmul, {transposed(builder, c), transposed(builder, a)}, product->attrs)
                          : builder.call(ops::dense, {mutate(c), mutate(a)}, product->attrs);
    GRADC_CHECK(swapped->type == b.var->type, "transpose products",
                "the swapped product's type " + swapped->type.str() + " is not the transpose's " + b.var->type.str());
    parts.back().var = b.var; // bound to the transpose's Var; the product is left to dead-code elimination
    out.insert(out.end(), parts.begin(), parts.end());
  }

private:
  std::unordered_map<const Expr *, int> uses_;
  std::unordered_map<const Expr *, ExprPtr> bound_; // each Var's value, as the function had it

  /// The product `v` transposes, if `v` is the transpose of a 2-D matmul or
  /// nn.dense (without units: they would name the other side) read only there.
  const Expr *transposed_product(const Expr &v) const {
    if (!swaps_matrix(v) || v.args[0]->kind != ExprKind::Var)
      return nullptr;
    if (auto n = uses_.find(v.args[0].get()); n == uses_.end() || n->second != 1)
      return nullptr;
    auto it = bound_.find(v.args[0].get());
    if (it == bound_.end() || it->second->kind != ExprKind::Call)
      return nullptr;
    const Expr &p = *it->second;
    bool product = p.op == ops::matmul || (p.op == ops::dense && !call_attrs<DenseAttrs>(p).units);
    if (!product || p.args.size() != 2 || !is_matrix(it->second) || !is_matrix(p.args[0]) || !is_matrix(p.args[1]))
      return nullptr;
    return &p;
  }
  /// `x` transposed: the matrix a transpose binding swapped, else a new transpose.
  ExprPtr transposed(Builder &builder, const ExprPtr &x) {
    if (x->kind == ExprKind::Var)
      if (auto it = bound_.find(x.get()); it != bound_.end() && swaps_matrix(*it->second))
        return mutate(it->second->args[0]);
    return builder.transpose(mutate(x), {1, 0});
  }
};

FunctionPtr transpose_body(const Function &fn) { return TransposeProducts(fn).mutate_function(fn); }

} // namespace

FunctionPtr transpose_products(const Function &fn) { return transpose_body(*map_nested_functions(fn, transpose_body)); }

} // namespace gradc
