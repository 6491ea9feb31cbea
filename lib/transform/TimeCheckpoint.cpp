//===- TimeCheckpoint.cpp - keep every k-th state of a scan (SPEC §6) -----===//
//
// Part of --remat=manual. A scan written with checkpoint_every=k > 1 gives a
// grad.scan_backward that would read every state of the scan; here it is
// given only every k-th of them (a strided slice of the history), with the
// scan's length in its `steps` attribute, and its lowering recomputes each
// segment's states from its checkpoint before running the segment's reverse
// steps (op/recurrence.cpp). The full history then dies once the forward
// pass's own users have read it, and the backward pass holds T/k states and
// a segment of k instead of T. The recomputation runs the body's own kernels,
// so results are bitwise those of --remat=none.
//
//===----------------------------------------------------------------------===//
#include "gradc/ir/Functor.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Registry.h"
#include "gradc/support/Log.h"
#include "gradc/transform/Remat.h"

namespace gradc {
namespace {

/// Every `every`-th step of history `h` below step T - 1, leaf by leaf.
ExprPtr kept_states(Builder &b, const ExprPtr &h, int64_t steps, int64_t every) {
  if (h->type.is_tuple()) {
    std::vector<ExprPtr> fields;
    for (size_t i = 0; i < h->type.fields.size(); ++i)
      fields.push_back(kept_states(b, b.get(h, int(i)), steps, every));
    return b.tuple(fields);
  }
  Attrs attrs;
  attrs.set("begin", AttrValue::ints({0}));
  attrs.set("end", AttrValue::ints({steps - 1}));
  attrs.set("strides", AttrValue::ints({every}));
  attrs.set("axes", AttrValue::ints({0}));
  return b.call(ops::strided_slice, {h}, attrs);
}

FunctionPtr checkpoint_bindings(const Function &fn, RematStats &stats) {
  auto out = std::make_shared<Function>(fn);
  out->body.bindings.clear();
  Builder b(out->body.bindings);
  for (const Binding &bind : fn.body.bindings) {
    const Expr &v = *bind.value;
    const AttrValue *every = v.kind == ExprKind::Call && v.op == ops::scan_backward ? v.attrs.find("checkpoint_every")
                                                                                     : nullptr;
    const AttrValue *steps_attr = every ? v.attrs.find("steps") : nullptr;
    const AttrValue *saved = every ? v.attrs.find("saved") : nullptr;
    int64_t k = every ? every->i : 1;
    if (!every || k <= 1 || !steps_attr || steps_attr->i != 0 || (saved && saved->i > 0)) {
      out->body.bindings.push_back(bind);
      continue;
    }
    int64_t T = leaf_types(v.args[3]->type).at(0).shape.at(0);
    if (T - 1 <= k) { // one segment: nothing to save
      out->body.bindings.push_back(bind);
      continue;
    }
    b.set_span(v.span);
    std::vector<ExprPtr> args = v.args;
    args[2] = kept_states(b, v.args[2], T, k);
    Attrs attrs = v.attrs;
    attrs.set("steps", AttrValue::of(T));
    ExprPtr call = check_call(v.op, args, attrs, v.span, [](Span, const std::string &message) {
      internal_error("time checkpointing", message);
    });
    out->body.bindings.push_back({bind.var, call, bind.is_let});
    ++stats.time_checkpointed;
    log(LogLevel::Info, "remat",
        "a scan of " + std::to_string(T) + " steps keeps every " + std::to_string(k) + "th state for its backward pass");
  }
  return out;
}

} // namespace

FunctionPtr checkpoint_scans(const Function &fn, RematStats &stats) {
  auto each = [&stats](const Function &f) { return checkpoint_bindings(f, stats); };
  return checkpoint_bindings(*map_nested_functions(fn, each), stats);
}

} // namespace gradc
