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
// A scan written with checkpoint_slots=c instead gives its backward pass the
// states the binomial schedule's forward sweep keeps (op/Revolve.h); the
// lowering then holds at most c states and recomputes the fewest steps.
//
//===----------------------------------------------------------------------===//
#include "gradc/ir/Functor.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Registry.h"
#include "gradc/op/Revolve.h"
#include "gradc/support/Log.h"
#include "gradc/transform/Remat.h"

namespace gradc {
namespace {

/// history[begin:end:stride] along time.
ExprPtr time_slice(Builder &b, const ExprPtr &h, int64_t begin, int64_t end, int64_t stride) {
  Attrs attrs;
  attrs.set("begin", AttrValue::ints({begin}));
  attrs.set("end", AttrValue::ints({end}));
  attrs.set("strides", AttrValue::ints({stride}));
  attrs.set("axes", AttrValue::ints({0}));
  return b.call(ops::strided_slice, {h}, attrs);
}

/// The steps `at` of history `h` (ascending), leaf by leaf: runs of equal
/// stride as one slice each, joined along time.
ExprPtr kept_states(Builder &b, const ExprPtr &h, const std::vector<int64_t> &at) {
  if (h->type.is_tuple()) {
    std::vector<ExprPtr> fields;
    for (size_t i = 0; i < h->type.fields.size(); ++i)
      fields.push_back(kept_states(b, b.get(h, int(i)), at));
    return b.tuple(fields);
  }
  std::vector<ExprPtr> parts;
  for (size_t i = 0; i < at.size();) {
    size_t j = i; // at[i..j]: one run of `stride`
    int64_t stride = i + 1 < at.size() ? at[i + 1] - at[i] : 1;
    while (j + 1 < at.size() && at[j + 1] - at[j] == stride)
      ++j;
    parts.push_back(time_slice(b, h, at[i], at[j] + 1, stride));
    i = j + 1;
  }
  if (parts.size() == 1)
    return parts[0];
  Attrs attrs;
  attrs.set("axis", AttrValue::of(int64_t(0)));
  return b.call(ops::concatenate, {b.tuple(parts)}, attrs);
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
    const AttrValue *recompute = every ? v.attrs.find("recompute_saved") : nullptr;
    const AttrValue *slots_attr = every ? v.attrs.find("checkpoint_slots") : nullptr;
    int64_t k = every ? every->i : 1, slots = slots_attr ? slots_attr->i : 0;
    bool stored = saved && saved->i > 0 && !(recompute && recompute->b);
    int64_t T = every ? leaf_types(v.args[3]->type).at(0).shape.at(0) : 0;
    // Nothing to do: no time checkpointing, done already, the saved values
    // stored by the forward scan, or every state would be kept anyway.
    if (!every || (k <= 1 && slots == 0) || !steps_attr || steps_attr->i != 0 || stored || T - 1 <= k ||
        (slots && slots >= T - 1)) {
      out->body.bindings.push_back(bind);
      continue;
    }
    std::vector<int64_t> at;
    if (slots)
      at = revolve_kept(T, slots);
    else
      for (int64_t s = 0; s < T - 1; s += k)
        at.push_back(s);
    b.set_span(v.span);
    std::vector<ExprPtr> args = v.args;
    args[2] = kept_states(b, v.args[2], at);
    Attrs attrs = v.attrs;
    attrs.set("steps", AttrValue::of(T));
    ExprPtr call = check_call(v.op, args, attrs, v.span, [](Span, const std::string &message) {
      internal_error("time checkpointing", message);
    });
    out->body.bindings.push_back({bind.var, call, bind.is_let});
    ++stats.time_checkpointed;
    log(LogLevel::Info, "remat",
        "a scan of " + std::to_string(T) + " steps keeps " +
            (slots ? std::to_string(at.size()) + " states for its backward pass, which holds at most " +
                         std::to_string(slots) + " (binomial checkpointing)"
                   : "every " + std::to_string(k) + "th state for its backward pass"));
  }
  return out;
}

} // namespace

FunctionPtr checkpoint_scans(const Function &fn, RematStats &stats) {
  auto each = [&stats](const Function &f) { return checkpoint_bindings(f, stats); };
  return checkpoint_bindings(*map_nested_functions(fn, each), stats);
}

} // namespace gradc
