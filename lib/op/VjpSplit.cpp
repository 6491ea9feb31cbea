//===- VjpSplit.cpp - a vjp split into saved values and a backward half ---===//
//
// Which values to save: walk back from what the vjp's adjoint half reads
// through the values that do not depend on the adjoint (the primal half);
// a value worth saving (op/VjpSplit.h) ends the walk there, any other value
// is recomputed and the walk goes on to its inputs.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/VjpSplit.h"
#include "gradc/ir/Functor.h"
#include "gradc/op/Registry.h"

#include <unordered_map>
#include <unordered_set>

namespace gradc {
namespace {

/// A tensor that an operator other than an injective one computes with at
/// least two FLOPs per element it writes: a product, a reduction, a nested
/// scan. Recomputing it costs more than reading it back.
bool worth_saving(const Binding &b) {
  const Expr &v = *b.value;
  if (v.kind != ExprKind::Call || !v.type.is_tensor() || v.op->injective(v))
    return false;
  return v.op->flops(v) >= 2 * num_elements(v.type.shape);
}

} // namespace

VjpSplit split_vjp(const Function &vjp, size_t num_primal, size_t insert_at) {
  const std::vector<Binding> &bindings = vjp.body.bindings;
  GRADC_CHECK(num_primal <= bindings.size() && insert_at < vjp.params.size(), "gradient",
              "split_vjp: the vjp does not have the primal's bindings or parameters");
  std::unordered_map<const Expr *, size_t> index;
  for (size_t i = 0; i < bindings.size(); ++i)
    index[bindings[i].var.get()] = i;

  // The adjoint half: what depends on the adjoint of the primal's result.
  std::unordered_set<const Expr *> adjoint{vjp.params.back().get()};
  std::vector<std::vector<ExprPtr>> reads(bindings.size());
  for (size_t i = 0; i < bindings.size(); ++i) {
    reads[i] = free_vars(bindings[i].value);
    for (const ExprPtr &r : reads[i])
      if (adjoint.count(r.get())) {
        adjoint.insert(bindings[i].var.get());
        break;
      }
  }

  // The primal values it reads, and back from them to what is saved.
  std::vector<ExprPtr> work;
  auto primal_reads = [&](const std::vector<ExprPtr> &vars) {
    for (const ExprPtr &r : vars)
      if (index.count(r.get()) && !adjoint.count(r.get()))
        work.push_back(r);
  };
  for (size_t i = 0; i < bindings.size(); ++i)
    if (adjoint.count(bindings[i].var.get()))
      primal_reads(reads[i]);
  primal_reads({vjp.body.result});
  std::unordered_set<const Expr *> seen;
  std::vector<bool> saved(bindings.size(), false);
  while (!work.empty()) {
    ExprPtr v = work.back();
    work.pop_back();
    if (!seen.insert(v.get()).second)
      continue;
    size_t i = index.at(v.get());
    if (i < num_primal && worth_saving(bindings[i]))
      saved[i] = true;
    else
      primal_reads(reads[i]);
  }

  VjpSplit split;
  for (size_t i = 0; i < num_primal; ++i)
    if (saved[i])
      split.saved.push_back(i);

  // The backward half: the saved values become parameters; what only
  // served to compute them goes.
  class Substitute : public ExprMutator {
  public:
    using ExprMutator::remap;
  } substitute;
  auto backward = std::make_shared<Function>();
  backward->name = vjp.name;
  backward->span = vjp.span;
  backward->params = vjp.params;
  std::vector<ExprPtr> params;
  for (size_t i : split.saved) {
    const ExprPtr &var = bindings[i].var;
    ExprPtr p = make_var(var->name, var->type, var->span, var->type);
    substitute.remap(var, p);
    params.push_back(p);
  }
  backward->params.insert(backward->params.begin() + std::ptrdiff_t(insert_at), params.begin(), params.end());
  std::unordered_set<const Expr *> live{vjp.body.result.get()};
  std::vector<bool> keep(bindings.size(), false);
  for (size_t i = bindings.size(); i-- > 0;) {
    if (saved[i] || !live.count(bindings[i].var.get()))
      continue;
    keep[i] = true;
    for (const ExprPtr &r : reads[i])
      live.insert(r.get());
  }
  for (size_t i = 0; i < bindings.size(); ++i)
    if (keep[i])
      backward->body.bindings.push_back(bindings[i]);
  backward->body.result = vjp.body.result;
  backward->ret_type = vjp.ret_type;
  split.backward = clone_function(*substitute.mutate_function(*backward));
  return split;
}

} // namespace gradc
