//===- ProjectFields.cpp - a tuple-result call read field by field --------===//
//
// Part of the `fused` stage, just before fusion. A call of an operator that
// can compute each field of its tuple result on its own (OpDef::project) and
// whose value is read only through projections bound in the same body,
//   %p = split(%x, indices_or_sections=4, axis=-1); %a = %p.1; %b = %p.3
// becomes one call per projection, bound to the projection's own Var:
//   %a = strided_slice(%x, begin=[256], end=[512], axes=[1]); %b = ...
// Fusion then takes each part into its consumers (a gate's sigmoid reads
// its quarter of the gates where it is), and the add that produced %x,
// now read by several cheap slices, is recomputed in each instead of
// stored: an LSTM step's split kernel, which copied every part to memory,
// and the add before it are gone. A part nobody reads is not computed.
// A field may also be a value that was there (nn.batch_norm's statistics
// are its inputs); its projection then reads it.
//
//===----------------------------------------------------------------------===//
#include "gradc/ir/Functor.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Registry.h"
#include "gradc/transform/Passes.h"

#include <unordered_map>
#include <unordered_set>

namespace gradc {
namespace {

/// The Vars of projectable calls that `fn` reads only through projections
/// `%a = %p.i` bound in its own body.
std::unordered_set<const Expr *> projected_calls(const Function &fn) {
  std::unordered_map<const Expr *, int> uses = count_uses(fn), projections;
  std::unordered_set<const Expr *> candidates, out;
  for (const Binding &b : fn.body.bindings) {
    const Expr &v = *b.value;
    if (v.kind == ExprKind::Call && v.op->project && v.type.is_tuple())
      candidates.insert(b.var.get());
    if (v.kind == ExprKind::TupleGet && v.args[0]->kind == ExprKind::Var && b.var->type.is_tensor())
      ++projections[v.args[0].get()];
  }
  for (auto [var, n] : projections)
    if (candidates.count(var) && uses[var] == n)
      out.insert(var);
  return out;
}

class Projector : public ExprMutator {
public:
  explicit Projector(const Function &fn) : projected_(projected_calls(fn)) {}

protected:
  void mutate_binding(const Binding &b, std::vector<Binding> &out) override {
    const Expr &v = *b.value;
    if (v.kind == ExprKind::Call && projected_.count(b.var.get())) {
      calls_[b.var.get()] = mutate(b.value); // its arguments as renamed so far
      return; // each projection computes its own field
    }
    if (v.kind == ExprKind::TupleGet) {
      auto it = calls_.find(v.args[0].get());
      if (it != calls_.end()) {
        const Expr &call = *it->second;
        std::vector<Binding> parts;
        Builder builder(parts, v.span);
        ExprPtr field = call.op->project(builder, call.args, call.attrs, size_t(v.index));
        GRADC_CHECK(field->type == b.var->type, "project fields",
                    call.op->name + "'s field " + std::to_string(v.index) + " is not of its type");
        out.insert(out.end(), parts.begin(), parts.end());
        if (!parts.empty() && out.back().var == field)
          out.back().var = b.var; // the projection keeps its name
        else
          remap(b.var, field); // a value there before (batch_norm's statistics are its inputs)
        return;
      }
    }
    ExprMutator::mutate_binding(b, out);
  }

private:
  std::unordered_set<const Expr *> projected_;
  std::unordered_map<const Expr *, ExprPtr> calls_; // the projected calls, by Var
};

FunctionPtr project_body(const Function &fn) { return Projector(fn).mutate_function(fn); }

} // namespace

FunctionPtr project_fields(const Function &fn) { return project_body(*map_nested_functions(fn, project_body)); }

} // namespace gradc
