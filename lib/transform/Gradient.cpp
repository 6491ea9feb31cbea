//===- Gradient.cpp - reverse-mode differentiation ------------------------===//
//
// The shared work of every gradient lives here, once: the reverse walk,
// fan-out accumulation, summing broadcast adjoints back to input shapes,
// no_grad, and the error for an operator without a gradient. Per-operator
// rules (FPrimalGradient) live with their operators under lib/op/.
//
//===----------------------------------------------------------------------===//
#include "gradc/transform/Gradient.h"
#include "gradc/ir/Functor.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Check.h"
#include "gradc/op/Registry.h"
#include "gradc/transform/Passes.h"

#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace gradc {
namespace {

/// The adjoint of one value: an expression for a tensor, and for a tuple one
/// adjoint per field, at any depth (a field may itself be a tuple). Parts no
/// path has reached yet are empty.
struct Adjoint {
  ExprPtr tensor;
  std::vector<Adjoint> fields;
};

/// The adjoints accumulated so far, one tree per forward Var.
class Adjoints {
public:
  explicit Adjoints(Builder &b) : b_(b) {}

  /// adj[x] += g, where g has x's type (a tuple's adjoint is a tuple); each
  /// tensor part is summed back to its shape if it was broadcast.
  void add(const ExprPtr &x, const ExprPtr &g) {
    if (g)
      add(x, split(g, x->type));
  }
  void add(const ExprPtr &x, const Adjoint &a) {
    if (x->kind == ExprKind::Var)
      merge(slots_[x.get()], x->type, a);
  }

  /// adj[tuple.index] += a: what a projection passes back to its tuple.
  void add_field(const ExprPtr &tuple, int index, const Adjoint &a) {
    if (tuple->kind != ExprKind::Var || (!a.tensor && a.fields.empty()))
      return;
    Adjoint &slot = slots_[tuple.get()];
    slot.fields.resize(tuple->type.fields.size());
    merge(slot.fields[size_t(index)], tuple->type.fields[size_t(index)], a);
  }

  /// The tree accumulated for `x` (empty if none).
  const Adjoint &find(const ExprPtr &x) const {
    static const Adjoint none;
    auto it = slots_.find(x.get());
    return it == slots_.end() ? none : it->second;
  }

  /// adj[x] as one expression of x's type, zeros for the parts no path
  /// reached; null if no path reached x at all.
  ExprPtr value(const ExprPtr &x) { return materialize(find(x), x->type); }

private:
  Builder &b_;
  std::unordered_map<const Expr *, Adjoint> slots_; // looked up only, never iterated

  /// g (an expression of type `type`) as a tree: a tuple's fields projected.
  Adjoint split(const ExprPtr &g, const Type &type) {
    Adjoint a;
    if (!type.is_tuple()) {
      a.tensor = g;
      return a;
    }
    for (size_t i = 0; i < type.fields.size(); ++i)
      a.fields.push_back(split(b_.get(g, int(i)), type.fields[i]));
    return a;
  }

  /// dst += src, part by part; integer and bool parts have no adjoint.
  void merge(Adjoint &dst, const Type &type, const Adjoint &src) {
    if (type.is_tuple()) {
      if (src.fields.empty())
        return;
      dst.fields.resize(type.fields.size());
      for (size_t i = 0; i < type.fields.size(); ++i)
        merge(dst.fields[i], type.fields[i], src.fields[i]);
      return;
    }
    if (!src.tensor || !type.is_tensor() || !is_float(type.dtype))
      return;
    GRADC_CHECK(src.tensor->type.is_tensor() && src.tensor->type.dtype == type.dtype, "gradient",
                "adjoint of type " + src.tensor->type.str() + " for a value of type " + type.str());
    ExprPtr g = b_.sum_to(src.tensor, type.shape);
    dst.tensor = dst.tensor ? b_.add(dst.tensor, g) : g;
  }

  ExprPtr materialize(const Adjoint &a, const Type &type) {
    if (!type.is_tuple())
      return a.tensor;
    if (a.fields.empty())
      return nullptr;
    std::vector<ExprPtr> fields;
    for (size_t i = 0; i < type.fields.size(); ++i) {
      ExprPtr f = materialize(a.fields[i], type.fields[i]);
      fields.push_back(f ? f : b_.zeros(type.fields[i]));
    }
    return b_.tuple(fields);
  }
};

/// Rebinds the listed Vars under new names (nodes are immutable).
class Renamer : public ExprMutator {
public:
  explicit Renamer(const std::unordered_map<const Expr *, std::string> &names) : names_(names) {}

protected:
  void mutate_binding(const Binding &b, std::vector<Binding> &out) override {
    auto it = names_.find(b.var.get());
    if (it == names_.end())
      return ExprMutator::mutate_binding(b, out);
    ExprPtr var = make_var(it->second, b.var->annotation, b.var->span, b.var->type);
    remap(b.var, var);
    out.push_back({var, mutate(b.value), b.is_let});
  }

private:
  const std::unordered_map<const Expr *, std::string> &names_;
};

/// The adjoint rule of one forward binding, chosen by the kind of its value:
/// a call's registered gradient, a tuple's fields, a projection's field.
class BackwardStep : ExprFunctor<void(const ExprPtr &)> {
public:
  BackwardStep(Builder &b, Adjoints &adj, std::map<std::string, std::vector<Span>> &missing,
               std::unordered_set<const Expr *> &blocked, DiagEngine &diag)
      : b_(b), adj_(adj), missing_(missing), blocked_(blocked), diag_(diag) {}
  /// The rule of body[at]; `forward` says whether a rule may rewrite the
  /// forward pass (GradCtx::augment_forward), inserting bindings before it.
  /// Returns how many it inserted.
  size_t run(std::vector<Binding> &body, size_t at, bool forward) {
    body_ = &body;
    at_ = at;
    forward_ = forward;
    inserted_ = 0;
    Binding bind = body[at]; // copied: `body` grows as the walk emits and as a rule augments
    dispatch(bind.value, bind.var);
    return inserted_;
  }

private:
  Builder &b_;
  Adjoints &adj_;
  std::map<std::string, std::vector<Span>> &missing_;
  std::unordered_set<const Expr *> &blocked_;
  DiagEngine &diag_;
  std::vector<Binding> *body_ = nullptr;
  size_t at_ = 0, inserted_ = 0;
  bool forward_ = false;

  /// GradCtx::augment_forward for the binding body[at_] of `var`.
  ExprPtr augment(const ExprPtr &var, const std::function<ExprPtr(Builder &)> &emit) {
    std::vector<Binding> &body = *body_;
    GRADC_CHECK(inserted_ == 0 && body[at_].var == var, "gradient", "a rule rewrote the forward pass twice");
    std::vector<Binding> fwd;
    Builder fb(fwd, body[at_].value->span);
    ExprPtr aug = emit(fb);
    GRADC_CHECK(aug->kind == ExprKind::Var && aug->type.is_tuple() && !aug->type.fields.empty() &&
                    aug->type.fields[0] == var->type,
                "gradient", "an augmented forward value must be a tuple whose field 0 has the call's type");
    body[at_].value = check_tuple_get(aug, 0, body[at_].value->span, [](Span, const std::string &message) {
      internal_error("gradient", message);
    });
    body.insert(body.begin() + std::ptrdiff_t(at_), fwd.begin(), fwd.end());
    inserted_ = fwd.size();
    return aug;
  }

  void on_call(const ExprPtr &e, const ExprPtr &var) override {
    const Expr &value = *e;
    ExprPtr g = adj_.value(var);
    if (!g || value.op->no_gradient || blocked_.count(var.get()))
      return;
    // The inputs: the arguments, then what a body captures (OpDef::takes_fn).
    std::vector<ExprPtr> inputs = value.args;
    for (const ExprPtr &v : captured_inputs(value))
      inputs.push_back(v);
    if (!value.op->gradient) {
      missing_[value.op->name].push_back(value.span);
      for (const ExprPtr &a : inputs)
        blocked_.insert(a.get());
      return;
    }
    GradCtx ctx{b_, value, var, g,
                [this](const Function &f, bool keep_primal) { return build_vjp(f, diag_, keep_primal); }};
    if (forward_)
      ctx.augment_forward = [this, var](const std::function<ExprPtr(Builder &)> &emit) { return augment(var, emit); };
    Grads grads = value.op->gradient(ctx);
    GRADC_CHECK(grads.size() == inputs.size(), "gradient",
                value.op->name + " gradient returned " + std::to_string(grads.size()) + " adjoints for " +
                    std::to_string(inputs.size()) + " inputs");
    for (size_t k = 0; k < grads.size(); ++k)
      adj_.add(inputs[k], grads[k]);
  }
  // adj[a_k] += adj[(a_1, ..., a_n)].k, each field a tree of its own.
  void on_tuple(const ExprPtr &e, const ExprPtr &var) override {
    const Adjoint &a = adj_.find(var);
    for (size_t k = 0; k < a.fields.size(); ++k)
      adj_.add(e->args[k], a.fields[k]);
  }
  // adj[t].k += adj[t.k]
  void on_tuple_get(const ExprPtr &e, const ExprPtr &var) override {
    adj_.add_field(e->args[0], e->index, adj_.find(var));
  }
  // Anything else cannot be a binding's value in inlined ANF.
  void on_var(const ExprPtr &, const ExprPtr &) override { not_anf(); }
  void on_constant(const ExprPtr &, const ExprPtr &) override { not_anf(); }
  void on_global_call(const ExprPtr &, const ExprPtr &) override { not_anf(); }
  void on_func(const ExprPtr &, const ExprPtr &) override { not_anf(); }
  [[noreturn]] static void not_anf() {
    internal_error("gradient", "unexpected binding (input not in ANF or not inlined)");
  }
};

/// The reverse walk, apart from what a caller wraps around it (which values
/// are seeded, what the result is, how adjoints are named): over the forward
/// bindings from last to first, each binding's rule adds to its inputs'
/// adjoints; the backward bindings are appended through the builder.
class ReverseWalk {
public:
  ReverseWalk(Builder &b, DiagEngine &diag) : b_(b), adj_(b), step_(b, adj_, missing_, blocked_, diag) {}

  /// adj[x] += g before the walk (g has x's type).
  void seed(const ExprPtr &x, const ExprPtr &g) { adj_.add(x, g); }

  /// Walks body[0, num_forward) backwards. Once a rule is missing, the walk
  /// goes on marking what lies behind it as blocked, so every missing rule
  /// on the way to a seeded value is found. With `forward`, rules may insert
  /// forward bindings (GradCtx::augment_forward); returns the forward
  /// bindings' count after the walk.
  size_t run(std::vector<Binding> &body, size_t num_forward, bool forward) {
    size_t count = num_forward;
    for (size_t i = num_forward; i-- > 0;) {
      Binding bind = body[i]; // copied: the walk emits after the body, and a rule may insert before i
      const Expr &value = *bind.value;
      b_.set_span(value.span);
      if (blocked_.count(bind.var.get())) {
        if (value.kind == ExprKind::Call && !value.op->has_gradient())
          missing_[value.op->name].push_back(value.span);
        if (value.kind != ExprKind::Call || !value.op->no_gradient)
          for (const ExprPtr &a : free_vars(bind.value)) // the arguments, and what a body captures
            blocked_.insert(a.get());
      }
      count += step_.run(body, i, forward);
    }
    return count;
  }

  /// Every operator without a gradient that the walk reached, in source
  /// order, as errors; throws CompileError if there was one.
  void report(DiagEngine &diag) const {
    std::vector<std::pair<Span, std::string>> errors;
    for (const auto &[name, spans] : missing_)
      for (Span s : spans)
        errors.push_back({s, name});
    std::sort(errors.begin(), errors.end(), [](auto &a, auto &b) { return a.first.begin < b.first.begin; });
    for (const auto &[span, name] : errors)
      diag.error(span, "no gradient is registered for operator '" + name + "'");
    diag.check();
  }

  /// adj[x] as one expression of x's type; null if no path reached x.
  ExprPtr value(const ExprPtr &x) { return adj_.value(x); }
  /// adj[x] if it is a single tensor expression already, else null.
  ExprPtr tensor(const ExprPtr &x) const { return adj_.find(x).tensor; }

private:
  Builder &b_;
  Adjoints adj_;
  std::map<std::string, std::vector<Span>> missing_;
  std::unordered_set<const Expr *> blocked_;
  BackwardStep step_;
};

/// Each adjoint named after its primal value (`%d_w1`), parameters first, so
/// that the dumps read like the math; then dead code removed.
FunctionPtr name_adjoints(const Function &fn, const ReverseWalk &walk, size_t num_forward, bool drop_dead = true) {
  std::unordered_map<const Expr *, std::string> names;
  auto name_adjoint = [&](const ExprPtr &x) {
    if (ExprPtr g = walk.tensor(x); g && g->kind == ExprKind::Var)
      names.emplace(g.get(), "d_" + x->name);
  };
  for (const ExprPtr &p : fn.params)
    name_adjoint(p);
  for (size_t i = 0; i < num_forward; ++i)
    name_adjoint(fn.body.bindings[i].var);
  FunctionPtr named = Renamer(names).mutate_function(fn);
  return drop_dead ? eliminate_dead_code(*named) : named;
}

} // namespace

FunctionPtr build_adjoint(const Function &primal, const std::vector<std::string> &wrt, DiagEngine &diag) {
  auto fn = std::make_shared<Function>(*clone_function(primal)); // a fresh copy, built up below
  fn->name = primal.name + "_adjoint";
  fn->ret_type = Type::unknown();
  fn->attrs = {};
  fn->attrs.role = FunctionRole::Adjoint;
  fn->attrs.primal = primal.name;

  // Which parameters, in declared order.
  std::vector<ExprPtr> targets;
  if (wrt.empty()) {
    for (const ExprPtr &p : fn->params)
      if (p->type.is_tensor() && is_float(p->type.dtype))
        targets.push_back(p);
  } else {
    for (const std::string &name : wrt) {
      bool found = false;
      for (const ExprPtr &p : fn->params)
        if (p->name == name) {
          found = true;
          if (!p->type.is_tensor() || !is_float(p->type.dtype))
            diag.error(p->span, "cannot differentiate with respect to %" + name + " of type " + p->type.str() +
                                    ": only floating-point tensors have gradients");
        }
      if (!found)
        diag.error(fn->span, "--wrt names %" + name + ", which is not a parameter of @" + primal.name);
    }
    for (const ExprPtr &p : fn->params)
      for (const std::string &name : wrt)
        if (p->name == name && p->type.is_tensor() && is_float(p->type.dtype)) {
          targets.push_back(p);
          break;
        }
  }

  std::vector<Binding> &body = fn->body.bindings;
  Builder b(body, fn->span);
  ExprPtr result = fn->body.result;
  ExprPtr target = result;
  if (result->type.is_tuple()) {
    if (result->type.fields.empty())
      diag.error(fn->span, "@" + primal.name + " returns an empty tuple: nothing to differentiate");
    else
      target = b.get(result, 0);
  }
  if (!target->type.is_tensor() || !is_float(target->type.dtype))
    diag.error(fn->span, "@" + primal.name + ": the differentiated result must be a floating-point tensor, found " +
                             target->type.str());
  diag.check();

  ReverseWalk walk(b, diag);
  walk.seed(target, b.ones_like(target));
  size_t num_forward = walk.run(body, body.size(), /*forward=*/true);
  walk.report(diag);

  b.set_span(fn->span);
  std::vector<ExprPtr> grads;
  for (const ExprPtr &p : targets) {
    ExprPtr g = walk.value(p);
    grads.push_back(g ? g : b.zeros(p->type));
  }
  ExprPtr grad_tuple = b.tuple(grads);
  fn->body.result = b.tuple({result, grad_tuple});
  // What the primal writes into its parameters (a batch norm's running
  // statistics), the adjoint writes there too; the gradients are its own.
  if (!primal.attrs.inplace.empty()) {
    fn->attrs.inplace = primal.attrs.inplace;
    fn->attrs.inplace.resize(fn->attrs.inplace.size() + grads.size(), -1);
  }
  return name_adjoints(*fn, walk, num_forward);
}

/// Whether a value of `type` has a floating-point part, so an adjoint.
static bool differentiable(const Type &type) {
  if (type.is_tuple())
    return std::any_of(type.fields.begin(), type.fields.end(), differentiable);
  return type.is_tensor() && is_float(type.dtype);
}

FunctionPtr build_vjp(const Function &primal, DiagEngine &diag, bool keep_primal) {
  auto fn = std::make_shared<Function>(*clone_function(primal));
  fn->name = primal.name + "_vjp";
  fn->ret_type = Type::unknown();
  fn->attrs = {};
  // %d_out, or a name no parameter, binding or adjoint (d_ + a name) takes.
  std::unordered_set<std::string> taken;
  for (const ExprPtr &p : fn->params)
    taken.insert({p->name, "d_" + p->name});
  for (const Binding &bind : fn->body.bindings)
    taken.insert({bind.var->name, "d_" + bind.var->name});
  std::string name = "d_out";
  while (taken.count(name))
    name += "_";
  ExprPtr seed = make_var(name, fn->body.result->type, fn->span);
  fn->params.push_back(seed);

  std::vector<Binding> &body = fn->body.bindings;
  Builder b(body, fn->span);
  size_t num_forward = body.size();
  ReverseWalk walk(b, diag);
  // A tuple result written out as a tuple seeds each field's value.
  std::function<void(const ExprPtr &, const ExprPtr &)> seed_value = [&](const ExprPtr &x, const ExprPtr &g) {
    if (x->kind != ExprKind::Tuple)
      return walk.seed(x, g);
    for (size_t k = 0; k < x->args.size(); ++k)
      seed_value(x->args[k], b.get(g, int(k)));
  };
  seed_value(fn->body.result, seed);
  // Kept whole, the primal's copy must stay in step with it: no insertions.
  num_forward = walk.run(body, num_forward, /*forward=*/!keep_primal);
  walk.report(diag);

  b.set_span(fn->span);
  std::vector<ExprPtr> grads;
  for (size_t i = 0; i + 1 < fn->params.size(); ++i) {
    const ExprPtr &p = fn->params[i];
    if (!differentiable(p->type))
      continue;
    ExprPtr g = walk.value(p);
    grads.push_back(g ? g : b.zeros(p->type));
  }
  fn->body.result = b.tuple(grads);
  return name_adjoints(*fn, walk, num_forward, !keep_primal);
}

} // namespace gradc
