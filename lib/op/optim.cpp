//===- optim.cpp - an optimizer's update of one parameter, in one kernel --===//
//
// What the training step (transform/TrainStep.h) writes for an update with
// state: one call per parameter returning the new parameter and the new
// state, computed element by element (OpDef::pointwise): one pass over them,
// in the kernel of the product that makes the gradient where there is one
// (its epilogue), else in a loop of its own. Each element stores the state first
// and the parameter last, reading back the state it just stored (Adam's
// update divides the new first moment by the root of the new second), so
// each element of every buffer is read, then written, in one iteration:
// written into the caller's buffers in place (loops/InPlace.h), one pass
// over memory where separate operators took one per state.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/attrs/optim.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Registry.h"
#include "gradc/op/Relations.h"

namespace gradc {
namespace {

/// The parameter (a floating-point tensor), then `tensors` - 1 more of its
/// type (gradient, state), `scalars` scalars of its dtype, and any further
/// arguments of its type again (optional state); the result is a tuple of
/// `outputs` of the parameter's type.
Type update_rel(RelationCtx &ctx, size_t tensors, size_t scalars, size_t outputs) {
  const Type *p = ctx.tensor(0);
  if (!p || !require_float(ctx, *p))
    return Type::unknown();
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    const Type *t = ctx.tensor(i);
    if (!t)
      return Type::unknown();
    bool scalar = i >= tensors && i < tensors + scalars;
    Type want = scalar ? Type::tensor({}, p->dtype) : *p;
    if (*t != want)
      return ctx.fail(ctx.op.args[i].name + " must be " + want.str() + ", found " + t->str());
  }
  return Type::tuple(std::vector<Type>(outputs, *p));
}

Type sgd_momentum_rel(RelationCtx &ctx) { return update_rel(ctx, 3, 2, 2); }
Type adam_rel(RelationCtx &ctx) { return update_rel(ctx, 4, 3, ctx.args.size() == 8 ? 4 : 3); }

/// buf' = momentum · buf + factor · g;  p' = p − lr · (nesterov ? g + momentum · buf' : buf').
StmtPtr sgd_momentum_element(KernelCtx &k, const Index &i, const LExprPtr &at) {
  auto a = k.attrs_as<SgdMomentumAttrs>();
  DType dt = k.arg_type(0).dtype;
  LExprPtr lr = k.in(3, {}), factor = k.in(4, {}), momentum = constant_of(a.momentum, dt), g = k.in(1, i);
  StmtPtr buf = store(k.out(1), at, add(mul(k.in(2, i), momentum), mul(g, factor)));
  LExprPtr fresh = load(k.out(1), at), d = a.nesterov ? add(g, mul(fresh, momentum)) : fresh;
  return seq({buf, store(k.out(0), at, binary(BinaryOp::Sub, k.in(0, i), mul(d, lr)))});
}

/// m' = β1 m + (1 − β1) g;  v' = β2 v + (1 − β2) g²;  amsgrad: v̂' = max(v̂, v');
/// p' = decay · p − step_size · m' / (√v' / bias2_sqrt + eps).
StmtPtr adam_element(KernelCtx &k, const Index &i, const LExprPtr &at) {
  auto a = k.attrs_as<AdamAttrs>();
  DType dt = k.arg_type(0).dtype;
  bool amsgrad = k.call.args.size() == 8;
  LExprPtr step_size = k.in(4, {}), bias2_sqrt = k.in(5, {}), decay = k.in(6, {}), g = k.in(1, i);
  std::vector<StmtPtr> stores;
  stores.push_back(store(k.out(1), at, add(mul(k.in(2, i), constant_of(a.beta1, dt)),
                                           mul(g, constant_of(1 - a.beta1, dt)))));
  stores.push_back(store(k.out(2), at, add(mul(k.in(3, i), constant_of(a.beta2, dt)),
                                           mul(mul(g, g), constant_of(1 - a.beta2, dt)))));
  LExprPtr second = load(k.out(2), at);
  if (amsgrad) {
    stores.push_back(store(k.out(3), at, binary(BinaryOp::Max, k.in(7, i), second)));
    second = load(k.out(3), at);
  }
  LExprPtr denom = add(binary(BinaryOp::Div, unary(UnaryOp::Sqrt, second), bias2_sqrt), constant_of(a.eps, dt));
  LExprPtr step = mul(binary(BinaryOp::Div, load(k.out(1), at), denom), step_size);
  stores.push_back(store(k.out(0), at, binary(BinaryOp::Sub, mul(k.in(0, i), decay), step)));
  return seq(stores);
}

} // namespace

void register_optim_ops(OpRegistry &reg) {
  reg.add("optim.sgd_momentum")
      .describe("SGD with momentum on one parameter (torch.optim.SGD's update): (param', buffer').")
      .notes("buffer' = momentum * buffer + factor * grad, then param' = param - lr * d with d = buffer', or "
             "grad + momentum * buffer' with nesterov. factor is 1 - dampening, or 1 on the first step (the "
             "buffer then starts at zeros). Weight decay and maximize are the caller's, on grad. One kernel "
             "writes both results, the buffer first: the training step writes them into the parameter and "
             "buffer it reads, in place.")
      .arg("param", "Tensor", "The parameter.")
      .arg("grad", "Tensor", "Its gradient (weight decay added).")
      .arg("buffer", "Tensor", "The momentum buffer.")
      .arg("lr", "Tensor[()]", "The learning rate.")
      .arg("factor", "Tensor[()]", "The gradient's factor in the buffer: 1 - dampening (1 on the first step).")
      .attrs<SgdMomentumAttrs>()
      .support_level(10)
      .relation("SgdMomentum", sgd_momentum_rel)
      .no_gradient()
      .pointwise(sgd_momentum_element);
  reg.add("optim.adam")
      .describe("Adam's update of one parameter (torch.optim.Adam/AdamW's): (param', exp_avg', exp_avg_sq'[, "
                "max_exp_avg_sq']).")
      .notes("exp_avg' = beta1 * exp_avg + (1 - beta1) * grad, exp_avg_sq' = beta2 * exp_avg_sq + (1 - beta2) * "
             "grad^2, with amsgrad (an 8th argument) max' = max(max_exp_avg_sq, exp_avg_sq'), then param' = decay * "
             "param - step_size * exp_avg' / (sqrt(exp_avg_sq' or max') / bias2_sqrt + eps). The caller passes "
             "step_size = lr / (1 - beta1^t), bias2_sqrt = sqrt(1 - beta2^t) and decay (1 - lr * weight_decay "
             "for AdamW, else 1); Adam's weight decay and maximize are the caller's, on grad. One kernel writes "
             "every result, the parameter last: the training step writes them into what it reads, in place.")
      .arg("param", "Tensor", "The parameter.")
      .arg("grad", "Tensor", "Its gradient.")
      .arg("exp_avg", "Tensor", "The first moment.")
      .arg("exp_avg_sq", "Tensor", "The second moment.")
      .arg("step_size", "Tensor[()]", "lr / (1 - beta1^t).")
      .arg("bias2_sqrt", "Tensor[()]", "sqrt(1 - beta2^t).")
      .arg("decay", "Tensor[()]", "The parameter's factor: 1 - lr * weight_decay (AdamW), else 1.")
      .arg("max_exp_avg_sq", "Tensor", "amsgrad: the running maximum of the second moment.")
      .arity(7, 8)
      .attrs<AdamAttrs>()
      .support_level(10)
      .relation("Adam", adam_rel)
      .no_gradient()
      .pointwise(adam_element);
}

} // namespace gradc
