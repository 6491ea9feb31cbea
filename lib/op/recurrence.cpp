//===- recurrence.cpp - scan (SPEC §7) and its reverse, grad.scan_backward -===//
//
// scan(fn (%s, %x1_t, ...) { ... }, %init, %x1, ...) is TE's scan as an
// expression: out[0] = init, out[t] = body(out[t-1], x1[t], ...) for t in
// [1, T). The body is any function of the language; the Vars of the
// enclosing function it reads (captured weights) are inputs of the call too
// (OpDef::takes_fn).
//
// The gradient differentiates the body with the gradient pass itself
// (GradCtx::differentiate): the body closed over its captured values gives
// vjp(s, x.., c.., d) = (d_s, d_x.., d_c..), and grad.scan_backward runs it
// backwards over the stored states, carrying d_s, stacking d_x and summing
// d_c over time. What a backward step would otherwise recompute at the cost
// of a product (the body's matrix products and reductions) the forward scan
// stores too (op/VjpSplit.h): its state carries them, and grad.scan_backward
// reads their histories as extra sequences. Time checkpointing
// (checkpoint_every > 1) stores neither: each backward step recomputes its
// values from its state.
//
// Both lower to one time loop (LoopLowerCtx): per step, copy-in kernels
// give the body its parameters (the state read at t-1, the sequences' step
// t), the body's own kernels run, copy-out kernels write step t, and the
// last kernel advances the step word every kernel of the loop reads t from.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/attrs/recurrence.h"
#include "gradc/ir/Functor.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Relations.h"
#include "gradc/op/Revolve.h"
#include "gradc/op/TimeSums.h"
#include "gradc/op/VjpSplit.h"

#include <algorithm>
#include <unordered_set>

namespace gradc {
namespace {

/// `type` with `steps` prepended to every tensor leaf: a state's history.
Type stacked(const Type &type, int64_t steps) {
  if (type.is_tuple()) {
    std::vector<Type> fields;
    for (const Type &f : type.fields)
      fields.push_back(stacked(f, steps));
    return Type::tuple(fields);
  }
  Shape shape = type.shape;
  shape.insert(shape.begin(), steps);
  return Type::tensor(shape, type.dtype);
}

/// A sequence's type, one step of it: its leading axis dropped.
Type step_of(const Type &seq) {
  Shape shape(seq.shape.begin() + 1, seq.shape.end());
  return Type::tensor(shape, seq.dtype);
}

/// Whether `t` has a floating-point tensor at any depth (what has an adjoint).
bool has_float_part(const Type &t) {
  for (const Type &leaf : leaf_types(t))
    if (is_float(leaf.dtype))
      return true;
  return false;
}

/// The sequences' common length T, or why there is none.
std::optional<int64_t> sequence_length(const std::vector<Type> &xs, std::string &error) {
  std::optional<int64_t> steps;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Type &x = xs[i];
    std::string which = "sequence " + std::to_string(i + 1);
    if (!x.is_tensor() || x.rank() < 1) {
      error = which + " has type " + x.str() + ": a sequence is a tensor with a leading time axis";
      return std::nullopt;
    }
    if (steps && x.shape[0] != *steps) {
      error = which + " has " + std::to_string(x.shape[0]) + " steps but sequence 1 has " + std::to_string(*steps) +
              ": every sequence has the same length";
      return std::nullopt;
    }
    steps = x.shape[0];
  }
  if (steps && *steps < 1) {
    error = "the sequences have no step (T = 0): the result's first step is the initial state, so T >= 1";
    return std::nullopt;
  }
  return steps;
}

//===--- scan ------------------------------------------------------------===//

std::optional<std::vector<Type>> scan_params(const std::vector<Type> &rest, const Attrs &, std::string &error) {
  if (rest.size() < 2) {
    error = "expected an initial state and at least one sequence";
    return std::nullopt;
  }
  std::vector<Type> xs(rest.begin() + 1, rest.end());
  if (!sequence_length(xs, error))
    return std::nullopt;
  std::vector<Type> params{rest[0]};
  for (const Type &x : xs)
    params.push_back(step_of(x));
  return params;
}

Type scan_rel(RelationCtx &ctx) {
  const Type &body = ctx.args[0];
  std::vector<Type> rest(ctx.args.begin() + 1, ctx.args.end());
  std::string error;
  std::optional<std::vector<Type>> params = scan_params(rest, ctx.attrs, error);
  if (!params)
    return ctx.fail(error);
  auto attrs = ctx.attrs_as<ScanAttrs>();
  if (attrs.checkpoint_slots > 0 && attrs.checkpoint_every > 1)
    return ctx.fail_attr("checkpoint_slots", "checkpoint_every=" + std::to_string(attrs.checkpoint_every) +
                                                 " and checkpoint_slots=" + std::to_string(attrs.checkpoint_slots) +
                                                 " are two ways of time checkpointing: give one");
  if (attrs.checkpoint_slots > 0 && rest[1].shape[0] > kMaxRevolveSteps)
    return ctx.fail_attr("checkpoint_slots", "binomial checkpointing plans scans of at most " +
                                                 std::to_string(kMaxRevolveSteps) + " steps, this one has " +
                                                 std::to_string(rest[1].shape[0]));
  size_t k = rest.size() - 1;
  if (body.fields.size() != params->size())
    return ctx.fail("the body takes " + std::to_string(body.fields.size()) +
                    (body.fields.size() == 1 ? " parameter" : " parameters") + ", but scan passes it " +
                    std::to_string(params->size()) + ": the state and a step of each of the " + std::to_string(k) +
                    " sequence" + (k == 1 ? "" : "s"));
  for (size_t i = 0; i < params->size(); ++i)
    if (body.fields[i] != (*params)[i])
      return ctx.fail("the body's parameter " + std::to_string(i + 1) + " has type " + body.fields[i].str() +
                      " but scan passes it " +
                      (i == 0 ? "the state, of type " : "a step of sequence " + std::to_string(i) + ", of type ") +
                      (*params)[i].str());
  if (body.result[0] != rest[0])
    return ctx.fail("the body returns " + body.result[0].str() + " but the state has type " + rest[0].str() +
                    ": the body returns the next state");
  if (leaf_types(rest[0]).empty())
    return ctx.fail("the state " + rest[0].str() + " holds no tensor");
  return stacked(rest[0], rest[1].shape[0]);
}

/// `fwd` (closed over the captured values) as a scan body that captures
/// them: fn (%s, %x_1_t, ...) { fwd(%s, %x_1_t, ..., caps...) }. With a
/// `state` other than fwd's own (a tuple whose field 0 is fwd's state: the
/// forward scan that also carries saved values), the body reads %s.0.
ExprPtr body_capturing(const Function &fwd, size_t k, const std::vector<ExprPtr> &caps, const Type &state) {
  auto body = std::make_shared<Function>();
  body->params.push_back(make_var(fwd.params[0]->name, state, {}, state));
  for (size_t i = 1; i < 1 + k; ++i) {
    const Type &t = fwd.params[i]->type;
    body->params.push_back(make_var(fwd.params[i]->name, t, {}, t));
  }
  std::vector<ExprPtr> args = body->params;
  if (state != fwd.params[0]->type)
    args[0] = Builder(body->body.bindings).get(args[0], 0);
  args.insert(args.end(), caps.begin(), caps.end());
  body->body.result = inline_function(fwd, args, body->body.bindings);
  if (!body->body.result->is_atom()) // (a body that returns a parameter or a capture as it is)
    body->body.result = Builder(body->body.bindings).bind(body->body.result);
  return make_func(body);
}

/// `fn`, which returns a tuple, returning its field 0 only.
FunctionPtr state_part(const Function &fn) {
  auto out = std::make_shared<Function>(fn);
  out->body.result = Builder(out->body.bindings).get(fn.body.result, 0);
  out->ret_type = out->body.result->type;
  return clone_function(*out);
}

/// `fn` returning (its result, the values of its bindings `saved`...).
FunctionPtr returning_saved(const Function &fn, const std::vector<size_t> &saved) {
  auto out = std::make_shared<Function>(fn);
  std::vector<ExprPtr> fields{fn.body.result};
  for (size_t i : saved)
    fields.push_back(fn.body.bindings[i].var);
  out->body.result = Builder(out->body.bindings).tuple(fields);
  out->ret_type = out->body.result->type;
  return clone_function(*out);
}

/// The body closed over what it captures, differentiated; grad.scan_backward
/// runs it over the states (see the file comment), with the closed body
/// itself for time checkpointing to recompute states with. Unless the scan
/// is time-checkpointed, the forward scan becomes one whose state also
/// carries the values the vjp would recompute at a product's cost:
///   %f = scan(fn (%s2, %x_t..) { (body(%s2.0, %x_t..), r_1, ..., r_m) },
///             (%init, zeros(r_1), ...), %x..)
/// with the scan's own value %f.0, and the backward reads %f.1, ... %f.m.
Grads scan_grad(GradCtx &g) {
  const Expr &call = g.call;
  std::vector<ExprPtr> captured = captured_inputs(call);
  FunctionPtr closed = close_over(*call.args[0]->func, captured);
  size_t k = call.args.size() - 2;
  auto scan_attrs = g.attrs_as<ScanAttrs>();
  int64_t every = scan_attrs.checkpoint_every, slots = scan_attrs.checkpoint_slots;
  VjpSplit split = split_vjp(*g.differentiate(*closed, true), closed->body.bindings.size(), 1 + k);
  // The forward scan stores the saved values, or the backward recomputes
  // them from the states it has: each step's (time checkpointing: each
  // segment's, with its states) with the body that returns them too.
  bool stored = !split.saved.empty() && g.augment_forward && every == 1 && slots == 0;
  bool recomputed = !split.saved.empty() && !stored;
  FunctionPtr aug = split.saved.empty() ? nullptr : returning_saved(*closed, split.saved);
  std::vector<ExprPtr> saved;
  if (stored) {
    ExprPtr fwd = g.augment_forward([&](Builder &fb) {
      std::vector<ExprPtr> init{call.args[1]};
      for (size_t i : split.saved)
        init.push_back(fb.zeros(closed->body.bindings[i].var->type));
      ExprPtr state = fb.tuple(init);
      std::vector<ExprPtr> args{body_capturing(*aug, k, captured, state->type), state};
      args.insert(args.end(), call.args.begin() + 2, call.args.end());
      auto bug = [](Span, const std::string &message) { internal_error("gradient", message); };
      return fb.bind(check_call(ops::scan, args, call.attrs, call.span, bug), g.out->name); // named as the scan was
    });
    for (size_t j = 0; j < split.saved.size(); ++j)
      saved.push_back(g.b.get(fwd, int(1 + j)));
  }
  // Captured adjoints that contract a step's rows are summed after the loop
  // (op/TimeSums.h); a state operand is read from the states' history only
  // when the scan stores every state whatever --remat says.
  std::vector<bool> float_x, float_c, history;
  for (size_t i = 2; i < call.args.size(); ++i)
    float_x.push_back(has_float_part(call.args[i]->type));
  history.assign(k, true);
  history.resize(k + split.saved.size(), stored);
  for (const ExprPtr &c : captured)
    float_c.push_back(has_float_part(c->type));
  int64_t steps = leaf_types(g.out->type).at(0).shape.at(0);
  TimeSumPlan sums{split.backward, {}, {}};
  if (steps > 1)
    sums = plan_time_sums(*split.backward, has_float_part(call.args[1]->type), float_x, float_c, history,
                          every == 1 && slots == 0);
  auto vjp = std::make_shared<Function>(*sums.vjp);
  vjp->name.clear(); // a `fn` value
  std::vector<ExprPtr> args{make_func(vjp), make_func(recomputed ? aug : closed), g.out, g.grad};
  for (size_t i = 2; i < call.args.size(); ++i)
    args.push_back(call.args[i]);
  args.insert(args.end(), saved.begin(), saved.end());
  args.insert(args.end(), captured.begin(), captured.end());
  Attrs attrs;
  attrs.set("sequences", AttrValue::of(int64_t(k + saved.size())));
  attrs.set("saved", AttrValue::of(int64_t(split.saved.size())));
  attrs.set("recompute_saved", AttrValue::of(recomputed));
  attrs.set("checkpoint_every", AttrValue::of(every));
  attrs.set("checkpoint_slots", AttrValue::of(slots));
  attrs.set("steps", AttrValue::of(int64_t(0)));
  std::vector<int64_t> unsummed;
  for (const TimeSum &sum : sums.sums)
    unsummed.push_back(int64_t(sum.captured));
  attrs.set("unsummed", AttrValue::ints(unsummed));
  attrs.set("emitted", AttrValue::of(int64_t(sums.emitted.size())));
  ExprPtr back = g.b.call(ops::scan_backward, args, attrs);
  // Its fields: an adjoint for each input with a floating-point part, in the
  // order of the call's inputs (init, the sequences, the captured values
  // not summed after the loop); the saved values are none of these.
  int field = 0;
  auto adjoint = [&](const ExprPtr &input) { return has_float_part(input->type) ? g.b.get(back, field++) : nullptr; };
  Grads grads{nullptr};
  for (size_t i = 1; i < call.args.size(); ++i)
    grads.push_back(adjoint(call.args[i]));
  StepHistories histories{g.out, std::vector<ExprPtr>(call.args.begin() + 2, call.args.end()), back, steps};
  for (size_t j = 0; j < split.saved.size(); ++j)
    histories.sequences.push_back(stored ? saved[j] : nullptr);
  for (size_t j = 0; j < captured.size(); ++j) {
    auto sum = std::find_if(sums.sums.begin(), sums.sums.end(), [&](const TimeSum &s) { return s.captured == j; });
    grads.push_back(sum != sums.sums.end() ? build_time_sum(g.b, *sum, histories) : adjoint(captured[j]));
  }
  return grads;
}

//===--- the time loop ---------------------------------------------------===//

/// Kernels of a time loop: copies between a step's buffers and the
/// stacked ones, through the step word.
struct StepKernels {
  LoopLowerCtx &c;
  int64_t steps; // T
  BufferPtr step = nullptr;

  /// t, and t - 1, clamped into [0, T) so that every index is bounded.
  LExprPtr t() const { return clamp_index(load(step, imm(0)), steps); }
  LExprPtr t_minus_1() const { return clamp_index(sub(load(step, imm(0)), imm(1)), steps); }

  /// for i < n: body(i), one flat parallel loop.
  void each(const std::string &name, int64_t n, const std::function<StmtPtr(const LExprPtr &i)> &body) {
    auto i = std::make_shared<LVar>(LVar{"i"});
    c.kernel(name, for_loop(i, n, ForKind::Spatial, body(var_ref(i))));
  }
  /// dst[dst_at·n + i] = value(i) for i < n (a step `at` of a stacked buffer, or a whole one when at is null).
  void write(const std::string &name, const BufferPtr &dst, const LExprPtr &at,
             const std::function<LExprPtr(const LExprPtr &i)> &value) {
    int64_t n = step_size(dst, at);
    each(name, n, [&](const LExprPtr &i) { return store(dst, offset(at, n, i), value(i)); });
  }
  /// Where step `at` of stacked buffer `b` starts: a view's offset (op/Kernel.h: LoopLowerCtx::body).
  LExprPtr offset_of(const BufferPtr &b, const LExprPtr &at) const { return mul(at, imm(step_size(b, at))); }
  /// src at step `at` (or whole), element i.
  LExprPtr read(const BufferPtr &src, const LExprPtr &at, const LExprPtr &i) const {
    return load(src, offset(at, step_size(src, at), i));
  }
  void copy(const std::string &name, const BufferPtr &dst, const LExprPtr &dst_at, const BufferPtr &src,
            const LExprPtr &src_at) {
    write(name, dst, dst_at, [&](const LExprPtr &i) { return read(src, src_at, i); });
  }
  /// dst at step `at` (or whole) = result `src` of the body whose kernels
  /// start at `first`: those kernels write it there in the first place
  /// (LoopLowerCtx::write_into) where `src` is theirs and no other result of
  /// `results` shares it; else a copy.
  void store_result(const std::string &name, const BufferPtr &dst, const LExprPtr &at, const BufferPtr &src,
                    size_t first, const std::vector<BufferPtr> &results) {
    bool unique = std::count(results.begin(), results.end(), src) == 1;
    if (!unique || !c.write_into(first, src, dst, at ? offset_of(dst, at) : nullptr))
      copy(name, dst, at, src, nullptr);
  }
  void fill_zero(const std::string &name, const BufferPtr &dst, const LExprPtr &at) {
    write(name, dst, at, [&](const LExprPtr &) { return constant_of(0, dst->dtype); });
  }

  void begin(int64_t first_t) {
    step = c.buffer("step", Type::tensor({1}, DType::Int64));
    c.kernel("step_init", store(step, imm(0), imm(first_t)));
  }
  void advance(int64_t delta) { c.kernel("step_next", store(step, imm(0), add(load(step, imm(0)), imm(delta)))); }

  /// Per-step buffers of a value of type `type`, one per leaf.
  std::vector<BufferPtr> buffers(const std::string &name, const Type &type) {
    std::vector<BufferPtr> out;
    for (const Type &leaf : leaf_types(type))
      out.push_back(c.buffer(name, leaf));
    return out;
  }

private:
  static int64_t step_size(const BufferPtr &b, const LExprPtr &at) {
    return at ? num_elements(b->shape) / std::max<int64_t>(b->shape.at(0), 1) : num_elements(b->shape);
  }
  static LExprPtr offset(const LExprPtr &at, int64_t n, const LExprPtr &i) { return at ? add(mul(at, imm(n)), i) : i; }
};

/// out[0] = init; for t in [1, T): s = out[t-1], x_i = x_i[t];
/// out[t] = body(s, x_1, ...).
void scan_lower(LoopLowerCtx &c) {
  const Function &body = *c.call.args[0]->func;
  int64_t steps = c.outputs[0]->shape[0];
  StepKernels k{c, steps};
  std::vector<BufferPtr> init = c.input(1), &out = c.outputs;
  for (size_t l = 0; l < out.size(); ++l)
    k.copy("first", out[l], imm(0), init[l], nullptr);
  if (steps == 1)
    return;
  k.begin(1);
  size_t first = c.next_kernel();
  // The body reads the state at t-1 and the sequences at t in place (views).
  std::vector<std::vector<BufferPtr>> params{out};
  std::vector<std::vector<LExprPtr>> offsets(1);
  for (const BufferPtr &b : out)
    offsets[0].push_back(k.offset_of(b, k.t_minus_1()));
  for (size_t i = 2; i < c.call.args.size(); ++i) {
    params.push_back(c.input(i));
    offsets.push_back({k.offset_of(params.back()[0], k.t())});
  }
  size_t body_first = c.next_kernel();
  std::vector<BufferPtr> next = c.body(body, params, offsets);
  for (size_t l = 0; l < out.size(); ++l) // step t, apart from step t - 1 that the body reads
    k.store_result("store_state", out[l], k.t(), next[l], body_first, next);
  k.advance(1);
  c.time_loop(first, steps - 1);
}

//===--- grad.scan_backward ----------------------------------------------===//

/// The number of checkpoints of a T-step scan kept every k-th: the states
/// 0, k, 2k, ... below T - 1 (the last state starts no reverse step).
int64_t checkpoint_count(int64_t steps, int64_t every) { return (steps - 1 + every - 1) / every; }

// (vjp, fwd, states, d_states, x_1..x_k, c_1..c_m). The vjp takes (s,
// x_1_t.., r_1..r_n, c.., d), r the saved values, and returns an adjoint for
// each of s, c_j and the x_i with a float part; fwd is the body closed over
// c: (s, x_1_t.., c..) -> s, or -> (s, r_1, ..., r_n) with recompute_saved.
// Without it, the r are the last n of the x_i (stored histories).
Type scan_backward_rel(RelationCtx &ctx) {
  auto attrs = ctx.attrs_as<ScanBackwardAttrs>();
  int64_t k = attrs.sequences;
  const std::vector<Type> &a = ctx.args;
  if (a.size() < size_t(4 + k))
    return ctx.fail("expected a vjp, a body, the states, their adjoint and " + std::to_string(k) + " sequences");
  int64_t given = attrs.recompute_saved ? 0 : attrs.saved; // saved histories among the sequences
  if (given > k)
    return ctx.fail_attr("saved", "saved=" + std::to_string(attrs.saved) + " but there are " + std::to_string(k) +
                                      " sequences");
  if (given && attrs.steps)
    return ctx.fail_attr("saved", "time checkpointing (steps > 0) recomputes what it saves: recompute_saved=True");
  size_t first_saved = size_t(4 + k - given), first_cap = size_t(4 + k);
  const Type &vjp = a[0], &fwd = a[1], &states = a[2], &d_states = a[3];
  std::string error;
  std::vector<Type> xs(a.begin() + 4, a.begin() + 4 + k);
  std::optional<int64_t> steps = sequence_length(xs, error);
  if (!steps)
    return ctx.fail(error);
  std::function<Type(const Type &)> unstacked = [&](const Type &t) {
    if (!t.is_tuple())
      return t.rank() < 1 ? Type::unknown() : step_of(t);
    std::vector<Type> fields;
    for (const Type &f : t.fields)
      fields.push_back(unstacked(f));
    return Type::tuple(fields);
  };
  Type state = unstacked(d_states);
  if (state.has_unknown() || d_states != stacked(state, *steps))
    return ctx.fail("the adjoint " + d_states.str() + " is not a history of the sequences' " +
                    std::to_string(*steps) + " steps");
  if (attrs.steps && attrs.checkpoint_slots && attrs.steps > kMaxRevolveSteps)
    return ctx.fail_attr("checkpoint_slots", "binomial checkpointing plans scans of at most " +
                                                 std::to_string(kMaxRevolveSteps) + " steps");
  int64_t kept = !attrs.steps               ? *steps
                 : attrs.checkpoint_slots ? int64_t(revolve_kept(attrs.steps, attrs.checkpoint_slots).size())
                                          : checkpoint_count(attrs.steps, attrs.checkpoint_every);
  if (attrs.steps && attrs.steps != *steps)
    return ctx.fail("steps=" + std::to_string(attrs.steps) + " but the sequences have " + std::to_string(*steps));
  if (states != stacked(state, kept))
    return ctx.fail("the states " + states.str() + " are not the " + std::to_string(kept) + " kept states of " +
                    state.str());
  // The vjp's parameters, the body's, the result and the vjp's result.
  std::vector<Type> params{state}, body_params{state}, result, step_result;
  if (has_float_part(state))
    result.push_back(state), step_result.push_back(state);
  size_t captured = a.size() - first_cap;
  std::vector<bool> unsummed(captured, false);
  for (int64_t j : attrs.unsummed) {
    if (j < 0 || size_t(j) >= captured || unsummed[size_t(j)] || !has_float_part(a[first_cap + size_t(j)]))
      return ctx.fail_attr("unsummed", "unsummed=[..., " + std::to_string(j) + ", ...] is not one of the " +
                                           std::to_string(captured) + " captured values with an adjoint, once each");
    unsummed[size_t(j)] = true;
  }
  for (size_t i = 4; i < a.size(); ++i) {
    params.push_back(i < first_cap ? step_of(a[i]) : a[i]);
    if (i >= first_saved && i < first_cap)
      continue;
    body_params.push_back(params.back());
    if (has_float_part(a[i]) && !(i >= first_cap && unsummed[i - first_cap]))
      result.push_back(a[i]), step_result.push_back(params.back());
  }
  Type body_result = state;
  if (attrs.recompute_saved && attrs.saved) {
    // The saved values' types are the body's to say; the vjp takes them too.
    const Type &r = fwd.is_function() ? fwd.result.at(0) : Type::unknown();
    if (!r.is_tuple() || r.fields.size() != size_t(1 + attrs.saved))
      return ctx.fail("the body has type " + fwd.str() + " but recompute_saved=True calls for one returning the "
                      "state and " + std::to_string(attrs.saved) + " saved values");
    body_result = r;
    params.insert(params.begin() + 1 + k, r.fields.begin() + 1, r.fields.end());
    body_result.fields[0] = state;
  }
  if (fwd != Type::function(body_params, body_result))
    return ctx.fail("the body has type " + fwd.str() + " but the states and inputs call for " +
                    Type::function(body_params, body_result).str());
  params.push_back(state);
  // The emitted step values are the vjp's to say: tensors, stacked.
  const Type *vjp_result = vjp.is_function() && vjp.result.size() == 1 ? &vjp.result[0] : nullptr;
  for (int64_t e = 0; e < attrs.emitted; ++e) {
    size_t f = step_result.size();
    if (!vjp_result || !vjp_result->is_tuple() || vjp_result->fields.size() <= f || !vjp_result->fields[f].is_tensor())
      return ctx.fail("the vjp has type " + vjp.str() + " but emitted=" + std::to_string(attrs.emitted) +
                      " calls for " + std::to_string(attrs.emitted) + " tensors after its adjoints");
    step_result.push_back(vjp_result->fields[f]);
    result.push_back(stacked(step_result.back(), *steps));
  }
  if (vjp != Type::function(params, Type::tuple(step_result)))
    return ctx.fail("the vjp has type " + vjp.str() + " but the states and inputs call for " +
                    Type::function(params, Type::tuple(step_result)).str());
  return Type::tuple(result);
}

/// The leaves of `v` (of a tensor or tuple type) as expressions.
std::vector<ExprPtr> leaves_of(Builder &b, const ExprPtr &v) {
  if (!v->type.is_tuple())
    return {v};
  std::vector<ExprPtr> out;
  for (size_t i = 0; i < v->type.fields.size(); ++i)
    for (const ExprPtr &l : leaves_of(b, b.get(v, int(i))))
      out.push_back(l);
  return out;
}

/// A value of `type` from its leaves, leaves[next] on.
ExprPtr from_leaves(Builder &b, const Type &type, const std::vector<ExprPtr> &leaves, size_t &next) {
  if (!type.is_tuple())
    return leaves.at(next++);
  std::vector<ExprPtr> fields;
  for (const Type &f : type.fields)
    fields.push_back(from_leaves(b, f, leaves, next));
  return b.tuple(fields);
}

/// grad.scan_backward's value, written with a forward scan over reversed
/// time (what its gradient differentiates): the scan's step j in [1, T)
/// is the reverse step t = T - j, its state the carry, each sequence
/// adjoint's step and the running sums of the captured adjoints (stacked
/// over time: T times their size, for the second order only).
/// `in` = (states, d_states, x_1..x_k, c_1..c_m), all atoms; the last
/// `saved` of the x_i have no adjoint. With `fwd` (recompute_saved), each
/// step's saved values are fwd's fields after the state.
ExprPtr reverse_as_scan(Builder &b, const Function &vjp, const std::vector<ExprPtr> &in, int64_t k, int64_t saved,
                        const Function *fwd, const std::vector<int64_t> &unsummed, int64_t emitted) {
  const Type &state = vjp.params[0]->type;
  std::vector<ExprPtr> st = leaves_of(b, in[0]), ds = leaves_of(b, in[1]);
  std::vector<ExprPtr> xs(in.begin() + 2, in.begin() + 2 + k), caps(in.begin() + 2 + k, in.end());
  int64_t steps = st[0]->type.shape[0];
  auto widths = [](const ExprPtr &v, int64_t before, int64_t after) {
    IntPairs w(size_t(v->type.rank()), {0, 0});
    w[0] = {before, after};
    return w;
  };
  auto step_shape = [](const ExprPtr &v) { return step_of(v->type).shape; };
  // seq'[j] = seq[T - j] (0 at j = 0); step 0 and step T-1 of a sequence.
  auto shifted = [&](const ExprPtr &v) { return b.pad(b.reverse(v, 0), widths(v, 1, -1)); };
  auto first = [&](const ExprPtr &v) { return b.reshape(b.pad(v, widths(v, 0, -(steps - 1))), step_shape(v)); };
  auto last = [&](const ExprPtr &v) { return b.reshape(b.pad(v, widths(v, -(steps - 1), 0)), step_shape(v)); };
  std::vector<bool> float_x, float_c;
  for (size_t i = 0; i < xs.size(); ++i)
    float_x.push_back(has_float_part(xs[i]->type) && i + size_t(saved) < xs.size());
  for (size_t j = 0; j < caps.size(); ++j)
    float_c.push_back(has_float_part(caps[j]->type) &&
                      std::find(unsummed.begin(), unsummed.end(), int64_t(j)) == unsummed.end());
  // The emitted step values' types: the vjp's result after the adjoints.
  const std::vector<Type> &vjp_fields = vjp.body.result->type.fields;
  std::vector<Type> emitted_types(vjp_fields.end() - emitted, vjp_fields.end());
  std::vector<ExprPtr> d_init, d_x, d_c, d_e; // the outputs' leaves
  if (steps == 1) {
    for (const ExprPtr &d : ds)
      d_init.push_back(first(d));
    for (size_t i = 0; i < xs.size(); ++i)
      if (float_x[i])
        d_x.push_back(b.zeros(xs[i]->type));
    for (size_t j = 0; j < caps.size(); ++j)
      if (float_c[j])
        for (const Type &leaf : leaf_types(caps[j]->type))
          d_c.push_back(b.zeros(leaf));
    for (const Type &t : emitted_types)
      d_e.push_back(b.zeros(stacked(t, 1)));
  } else {
    // The scan's state: (carry leaves, d_x steps, sums of the captured adjoints' leaves).
    std::vector<Type> fields = leaf_types(state);
    size_t n_carry = fields.size();
    for (size_t i = 0; i < xs.size(); ++i)
      if (float_x[i])
        fields.push_back(step_of(xs[i]->type));
    size_t n_dx = fields.size() - n_carry;
    for (size_t j = 0; j < caps.size(); ++j)
      if (float_c[j])
        for (const Type &leaf : leaf_types(caps[j]->type))
          fields.push_back(leaf);
    size_t n_dc = fields.size() - n_carry - n_dx;
    fields.insert(fields.end(), emitted_types.begin(), emitted_types.end());
    std::vector<ExprPtr> init_fields, seqs;
    for (const Type &f : fields)
      init_fields.push_back(b.zeros(f));
    for (const ExprPtr &s : st)
      seqs.push_back(b.reverse(s, 0)); // states[T - j - 1]: the state step T - j starts from
    for (const ExprPtr &x : xs)
      seqs.push_back(shifted(x));
    for (const ExprPtr &d : ds)
      seqs.push_back(shifted(d));
    auto body = std::make_shared<Function>();
    Type st_type = Type::tuple(fields);
    body->params.push_back(make_var("st", st_type, {}, st_type));
    for (const ExprPtr &s : seqs) {
      Type t = step_of(s->type);
      body->params.push_back(make_var("seq", t, {}, t));
    }
    Builder bb(body->body.bindings);
    const ExprPtr &carry_state = body->params[0];
    std::vector<ExprPtr> prev(body->params.begin() + 1, body->params.begin() + 1 + st.size());
    std::vector<ExprPtr> x_t(body->params.begin() + 1 + st.size(), body->params.begin() + 1 + st.size() + xs.size());
    std::vector<ExprPtr> d_t(body->params.end() - ds.size(), body->params.end()), g;
    for (size_t l = 0; l < n_carry; ++l)
      g.push_back(bb.add(d_t[l], bb.get(carry_state, int(l))));
    size_t at = 0, at_g = 0;
    std::vector<ExprPtr> args{from_leaves(bb, state, prev, at)};
    args.insert(args.end(), x_t.begin(), x_t.end());
    if (fwd) {
      args.insert(args.end(), caps.begin(), caps.end());
      ExprPtr f = inline_function(*fwd, args, bb.bindings());
      args.resize(1 + x_t.size());
      for (size_t j = 1; j < fwd->body.result->type.fields.size(); ++j)
        args.push_back(bb.get(f, int(j)));
    }
    args.insert(args.end(), caps.begin(), caps.end());
    args.push_back(from_leaves(bb, state, g, at_g));
    ExprPtr r = inline_function(vjp, args, bb.bindings());
    std::vector<ExprPtr> r_leaves = leaves_of(bb, r), next;
    // r: d_s (a float state has one), the float x's, the float captured
    // values (summed), the emitted step values
    for (size_t l = 0; l < fields.size(); ++l) {
      bool summed = l >= n_carry + n_dx && l < n_carry + n_dx + n_dc;
      next.push_back(summed ? bb.add(bb.get(carry_state, int(l)), r_leaves[l]) : r_leaves[l]);
    }
    body->body.result = bb.tuple(next);
    std::vector<ExprPtr> scan_args{make_func(body), b.tuple(init_fields)};
    scan_args.insert(scan_args.end(), seqs.begin(), seqs.end());
    ExprPtr R = b.call(ops::scan, scan_args);
    for (size_t l = 0; l < fields.size(); ++l) {
      ExprPtr h = b.get(R, int(l));
      if (l < n_carry)
        d_init.push_back(b.add(first(ds[l]), last(h)));
      else if (l < n_carry + n_dx)
        d_x.push_back(shifted(h));
      else if (l < n_carry + n_dx + n_dc)
        d_c.push_back(last(h));
      else
        d_e.push_back(shifted(h));
    }
  }
  std::vector<ExprPtr> out;
  size_t at = 0;
  if (has_float_part(state))
    out.push_back(from_leaves(b, state, d_init, at));
  out.insert(out.end(), d_x.begin(), d_x.end());
  at = 0;
  for (size_t j = 0; j < caps.size(); ++j)
    if (float_c[j])
      out.push_back(from_leaves(b, caps[j]->type, d_c, at));
  out.insert(out.end(), d_e.begin(), d_e.end());
  return b.tuple(out);
}

/// Its gradient (the second order of scan): reverse_as_scan's, by the
/// gradient pass, inlined. Kept states (time checkpointing) are first
/// recomputed into the whole history from the first of them.
Grads scan_backward_grad(GradCtx &g) {
  const Expr &call = g.call;
  auto attrs = g.attrs_as<ScanBackwardAttrs>();
  int64_t k = attrs.sequences;
  auto value = std::make_shared<Function>();
  for (size_t i = 2; i < call.args.size(); ++i) {
    const Type &t = call.args[i]->type;
    value->params.push_back(make_var("in" + std::to_string(i), t, {}, t));
  }
  Builder b(value->body.bindings);
  std::vector<ExprPtr> in = value->params;
  bool recompute = attrs.recompute_saved && attrs.saved > 0;
  const Function &fwd = *call.args[1]->func;
  if (attrs.steps) {
    std::vector<ExprPtr> xs(in.begin() + 2, in.begin() + 2 + k), caps(in.begin() + 2 + k, in.end());
    std::vector<ExprPtr> first;
    for (const ExprPtr &leaf : leaves_of(b, in[0])) {
      IntPairs w(size_t(leaf->type.rank()), {0, 0});
      w[0] = {0, 1 - leaf->type.shape[0]};
      first.push_back(b.reshape(b.pad(leaf, w), step_of(leaf->type).shape));
    }
    size_t at = 0;
    std::vector<ExprPtr> scan_args{body_capturing(recompute ? *state_part(fwd) : fwd, size_t(k), caps,
                                                  fwd.params[0]->type),
                                   from_leaves(b, call.args[1]->func->params[0]->type, first, at)};
    scan_args.insert(scan_args.end(), xs.begin(), xs.end());
    in[0] = b.call(ops::scan, scan_args);
  }
  value->body.result = reverse_as_scan(b, *call.args[0]->func, in, k, recompute ? 0 : attrs.saved,
                                       recompute ? &fwd : nullptr, attrs.unsummed, attrs.emitted);
  FunctionPtr vjp = g.differentiate(*value);
  std::vector<ExprPtr> args(call.args.begin() + 2, call.args.end());
  args.push_back(g.grad);
  ExprPtr adjoints = inline_function(*vjp, args, g.b.bindings());
  Grads grads{nullptr, nullptr};
  int field = 0;
  for (size_t i = 2; i < call.args.size(); ++i)
    grads.push_back(has_float_part(call.args[i]->type) ? g.b.get(adjoints, field++) : nullptr);
  return grads;
}

/// T - 1 runs of the vjp, and the body's runs in the backward pass: once per
/// step for saved values it recomputes, and the states time checkpointing
/// recomputes (per segment: all its steps with saved values, else all but
/// its checkpoint; binomial: as the plan advances).
int64_t scan_backward_flops(const Expr &call) {
  auto a = call_attrs<ScanBackwardAttrs>(call);
  int64_t steps = std::max<int64_t>(leaf_types(call.args[3]->type).at(0).shape.at(0) - 1, 0);
  bool recompute = a.recompute_saved && a.saved > 0;
  int64_t runs = 0;
  if (!a.steps || a.checkpoint_slots)
    runs = recompute ? steps : 0;
  if (a.steps && steps > 0 && a.checkpoint_slots) {
    RevolveSchedule plan = revolve_schedule(a.steps, a.checkpoint_slots);
    runs += plan.recomputed;
  } else if (a.steps && steps > 0) {
    runs = recompute ? steps : steps - checkpoint_count(a.steps, a.checkpoint_every);
  }
  return steps * function_flops(*call.args[0]->func) + runs * function_flops(*call.args[1]->func);
}

std::optional<std::vector<Type>> scan_backward_params(const std::vector<Type> &, const Attrs &, std::string &error) {
  error = "its bodies are built by the gradient pass, with annotated parameters";
  return std::nullopt;
}

/// carry = 0; for t = T-1 down to 1: (d_s, d_x.., d_c..) = vjp(states[t-1],
/// x[t].., c.., d_states[t] + carry); carry = d_s; d_x[t] = d_x; acc_c +=
/// d_c. Then d_init = d_states[0] + carry, d_x[0] = 0.
///
/// With kept states (steps > 0, every k-th), the reverse steps go a segment
/// at a time, last segment first: the segment's states are recomputed from
/// its checkpoint by the body (the same kernels as the forward scan's, so
/// the same bits), into a buffer of k steps, then its reverse steps read
/// them there. The last segment (shorter when k does not divide T - 1) is
/// lowered on its own, the others in a loop over segments around the
/// recompute and reverse loops.
void scan_backward_lower(LoopLowerCtx &c) {
  const Expr &call = c.call;
  const Function &vjp = *call.args[0]->func, &fwd = *call.args[1]->func;
  auto attrs = call_attrs<ScanBackwardAttrs>(call);
  int64_t k = attrs.sequences, every = attrs.checkpoint_every;
  std::vector<BufferPtr> states = c.input(2), d_states = c.input(3);
  bool recompute = attrs.recompute_saved && attrs.saved > 0;
  size_t first_saved = size_t(4 + k - (recompute ? 0 : attrs.saved));
  int64_t steps = d_states[0]->shape[0];
  StepKernels sk{c, steps};
  const Type &state = vjp.params[0]->type;
  bool float_state = has_float_part(state);
  size_t first_x = 4, first_cap = size_t(4 + k);
  // The outputs, leaf by leaf: d_init, then d_x_i (stacked) and d_c_j for
  // the inputs with a float part; a sequence is one leaf, a captured value
  // any number.
  // Then the emitted step values, stacked as d_x is. The unsummed captured
  // values have no output.
  std::vector<BufferPtr> d_init, d_x, d_c, emitted; // d_x: one per sequence (null: none)
  std::unordered_set<int64_t> unsummed(attrs.unsummed.begin(), attrs.unsummed.end());
  size_t o = 0;
  if (float_state)
    for (size_t l = 0; l < d_states.size(); ++l)
      d_init.push_back(c.outputs[o++]);
  for (size_t i = first_x; i < call.args.size(); ++i) {
    bool adjoint = has_float_part(call.args[i]->type) && (i < first_saved || i >= first_cap);
    if (i < first_cap)
      d_x.push_back(adjoint ? c.outputs[o++] : nullptr);
    else if (adjoint && !unsummed.count(int64_t(i - first_cap)))
      for (size_t l = 0; l < leaf_types(call.args[i]->type).size(); ++l)
        d_c.push_back(c.outputs[o++]);
  }
  for (int64_t e = 0; e < attrs.emitted; ++e)
    emitted.push_back(c.outputs[o++]);
  std::vector<BufferPtr> carry = sk.buffers("carry", state);
  for (const BufferPtr &b : carry)
    sk.fill_zero("carry_zero", b, nullptr);
  for (const BufferPtr &b : d_c)
    sk.fill_zero("acc_zero", b, nullptr);
  for (const BufferPtr &b : d_x)
    if (b)
      sk.fill_zero("dx_first", b, imm(0));
  for (const BufferPtr &b : emitted)
    sk.fill_zero("emitted_first", b, imm(0));
  std::vector<std::vector<BufferPtr>> caps;
  for (size_t i = first_cap; i < call.args.size(); ++i)
    caps.push_back(c.input(i));
  // A body's parameters: the state, step `at` of `from`, and the sequences'
  // step `x_at`, read in place (views); the captured values whole.
  using Params = std::pair<std::vector<std::vector<BufferPtr>>, std::vector<std::vector<LExprPtr>>>;
  auto views = [&](const std::vector<BufferPtr> &from, const LExprPtr &at, const LExprPtr &x_at) {
    Params p{{from}, {{}}};
    for (const BufferPtr &b : from)
      p.second[0].push_back(at ? sk.offset_of(b, at) : nullptr);
    for (size_t i = first_x; i < first_cap; ++i) {
      p.first.push_back(c.input(i));
      p.second.push_back({sk.offset_of(p.first.back()[0], x_at)});
    }
    for (const std::vector<BufferPtr> &cap : caps) {
      p.first.push_back(cap);
      p.second.push_back(std::vector<LExprPtr>(cap.size()));
    }
    return p;
  };
  size_t state_leaves = states.size();
  // With recompute_saved, a step's saved values: the body's results after
  // the state, run on the state in `from` at `at` and the sequences at t.
  auto recomputed_saved = [&](const std::vector<BufferPtr> &from, const LExprPtr &at) {
    if (!recompute)
      return std::vector<BufferPtr>{};
    auto [params, offsets] = views(from, at, sk.t());
    std::vector<BufferPtr> r = c.body(fwd, params, offsets);
    return std::vector<BufferPtr>(r.begin() + std::ptrdiff_t(state_leaves), r.end());
  };
  // One reverse step t (the step word), its state read from `from` at `at`;
  // recomputed saved values are read from `saved` at `at` (a whole step's
  // buffer where `at` is null).
  auto reverse_step = [&](const std::vector<BufferPtr> &from, const LExprPtr &at, const std::vector<BufferPtr> &saved,
                          const LExprPtr &saved_at) {
    auto [params, offsets] = views(from, at, sk.t());
    for (size_t i = 0; i < saved.size(); ++i) {
      params.insert(params.begin() + 1 + k + std::ptrdiff_t(i), {saved[i]});
      offsets.insert(offsets.begin() + 1 + k + std::ptrdiff_t(i), {saved_at ? sk.offset_of(saved[i], saved_at) : nullptr});
    }
    params.push_back(sk.buffers("d", state));
    offsets.push_back(std::vector<LExprPtr>(params.back().size()));
    for (size_t l = 0; l < d_states.size(); ++l)
      sk.write("load_d", params.back()[l], nullptr, [&](const LExprPtr &i) {
        return add(sk.read(d_states[l], sk.t(), i), load(carry[l], i));
      });
    size_t body_first = c.next_kernel();
    std::vector<BufferPtr> r = c.body(vjp, params, offsets);
    size_t f = 0;
    // The body reads the carry only through `d`, loaded before it runs.
    if (float_state)
      for (size_t l = 0; l < carry.size(); ++l)
        sk.store_result("store_carry", carry[l], nullptr, r[f++], body_first, r);
    for (const BufferPtr &b : d_x)
      if (b)
        sk.store_result("store_dx", b, sk.t(), r[f++], body_first, r);
    for (const BufferPtr &b : d_c) {
      const BufferPtr &term = r[f++];
      sk.write("accumulate", b, nullptr, [&](const LExprPtr &i) { return add(load(b, i), load(term, i)); });
    }
    for (const BufferPtr &b : emitted)
      sk.store_result("store_emitted", b, sk.t(), r[f++], body_first, r);
    sk.advance(-1);
  };
  if (steps > 1 && !attrs.steps) {
    sk.begin(steps - 1);
    size_t first = c.next_kernel();
    reverse_step(states, sk.t_minus_1(), recomputed_saved(states, sk.t_minus_1()), nullptr);
    c.time_loop(first, steps - 1);
  } else if (steps > 1 && attrs.checkpoint_slots) {
    // Binomial checkpointing (op/Revolve.h): a stack of states, filled with
    // the kept ones; each reverse step restores the top into `cur`, runs its
    // pieces (advance, push), reverses from `cur` and pops what it is done
    // with. The trip counts of the piece and advance loops are the plan's.
    RevolveSchedule plan = revolve_schedule(steps, attrs.checkpoint_slots);
    int64_t depth = plan.depth, kept = int64_t(plan.kept.size());
    std::vector<BufferPtr> stack, cur = sk.buffers("cur", state);
    for (const Type &leaf : leaf_types(state))
      stack.push_back(c.buffer("stack", stacked(leaf, depth)));
    BufferPtr stack_step = c.buffer("stack_step", Type::tensor({depth}, DType::Int64));
    BufferPtr top = c.buffer("top", Type::tensor({1}, DType::Int64));
    BufferPtr pos = c.buffer("position", Type::tensor({1}, DType::Int64)); // the step of `cur`
    sk.step = c.buffer("step", Type::tensor({1}, DType::Int64));
    LExprPtr top_at = clamp_index(load(top, imm(0)), depth), next_at = clamp_index(add(load(top, imm(0)), imm(1)), depth);
    for (size_t l = 0; l < stack.size(); ++l) // the kept states fill the stack's first rows
      sk.each("stack_fill", num_elements(states[l]->shape),
              [&](const LExprPtr &i) { return store(stack[l], i, load(states[l], i)); });
    std::vector<StmtPtr> init{store(top, imm(0), imm(kept - 1))};
    for (int64_t i = 0; i < kept; ++i)
      init.push_back(store(stack_step, imm(i), imm(plan.kept[size_t(i)])));
    c.kernel("stack_init", seq(init));
    size_t reverse_first = c.next_kernel();
    for (size_t l = 0; l < cur.size(); ++l)
      sk.copy("restore", cur[l], nullptr, stack[l], top_at);
    c.kernel("restore_position", store(pos, imm(0), load(stack_step, top_at)));
    size_t piece_first = c.next_kernel();
    {
      size_t advance_first = c.next_kernel();
      auto [params, offsets] = views(cur, nullptr, clamp_index(add(load(pos, imm(0)), imm(1)), steps));
      std::vector<BufferPtr> next = c.body(fwd, params, offsets);
      for (size_t l = 0; l < cur.size(); ++l)
        sk.copy("advance", cur[l], nullptr, next[l], nullptr);
      c.kernel("advance_next", store(pos, imm(0), add(load(pos, imm(0)), imm(1))));
      c.time_loop(advance_first, plan.advances);
    }
    for (size_t l = 0; l < cur.size(); ++l)
      sk.copy("push", stack[l], next_at, cur[l], nullptr);
    c.kernel("push_position", seq({store(stack_step, next_at, load(pos, imm(0))),
                                   store(top, imm(0), add(load(top, imm(0)), imm(1)))}));
    c.time_loop(piece_first, plan.pieces);
    c.kernel("reverse_step", store(sk.step, imm(0), add(load(pos, imm(0)), imm(1))));
    reverse_step(cur, nullptr, recomputed_saved(cur, nullptr), nullptr);
    // Pop the states at t - 1: the last piece's, and one the plan is done with.
    LExprPtr done = compare(CompareOp::EQ, load(stack_step, top_at), load(pos, imm(0)));
    StmtPtr pop = store(top, imm(0), select(done, sub(load(top, imm(0)), imm(1)), load(top, imm(0))));
    c.kernel("pop", seq({pop, pop}));
    c.time_loop(reverse_first, steps - 1);
  } else if (steps > 1) {
    int64_t kept = checkpoint_count(steps, every), last = steps - 1 - (kept - 1) * every;
    // The segment's states, and with recompute_saved its saved values: the
    // recompute runs all `len` steps of the segment, the last one for its
    // saved values (its state, the next checkpoint, goes to a spare slot).
    int64_t slots = every + (recompute ? 1 : 0);
    std::vector<BufferPtr> segment, seg_saved;
    for (const Type &leaf : leaf_types(state))
      segment.push_back(c.buffer("segment", stacked(leaf, slots)));
    if (recompute)
      for (size_t i = 0; i < size_t(attrs.saved); ++i)
        seg_saved.push_back(c.buffer("segment_saved", stacked(vjp.params[1 + size_t(k) + i]->type, every)));
    BufferPtr seg_word = c.buffer("segment_index", Type::tensor({1}, DType::Int64));
    BufferPtr rec_word = c.buffer("recompute_step", Type::tensor({1}, DType::Int64));
    sk.step = c.buffer("step", Type::tensor({1}, DType::Int64));
    LExprPtr seg = clamp_index(load(seg_word, imm(0)), kept), base = mul(seg, imm(every));
    LExprPtr j = clamp_index(load(rec_word, imm(0)), slots);
    auto set = [&](const std::string &name, const BufferPtr &word, const LExprPtr &value) {
      c.kernel(name, store(word, imm(0), value));
    };
    // The segment in the segment word, of `len` states: recompute, then reverse.
    auto lower_segment = [&](int64_t len) {
      for (size_t l = 0; l < segment.size(); ++l)
        sk.copy("load_checkpoint", segment[l], imm(0), states[l], seg);
      int64_t recomputed = recompute ? len : len - 1;
      if (recomputed > 0) {
        set("recompute_init", rec_word, imm(1));
        size_t first = c.next_kernel();
        LExprPtr prev = clamp_index(sub(j, imm(1)), every);
        auto [params, offsets] = views(segment, prev, clamp_index(add(base, j), steps));
        std::vector<BufferPtr> next = c.body(fwd, params, offsets);
        for (size_t l = 0; l < segment.size(); ++l)
          sk.copy("recompute_store", segment[l], j, next[l], nullptr);
        for (size_t i = 0; i < seg_saved.size(); ++i)
          sk.copy("recompute_saved", seg_saved[i], prev, next[state_leaves + i], nullptr);
        c.kernel("recompute_next", store(rec_word, imm(0), add(load(rec_word, imm(0)), imm(1))));
        c.time_loop(first, recomputed);
      }
      set("reverse_init", sk.step, add(base, imm(len)));
      size_t first = c.next_kernel();
      LExprPtr at = clamp_index(sub(sub(load(sk.step, imm(0)), imm(1)), base), every);
      reverse_step(segment, at, seg_saved, at);
      c.time_loop(first, len);
    };
    set("segment_last", seg_word, imm(kept - 1));
    lower_segment(last);
    if (kept > 1) {
      set("segment_init", seg_word, imm(kept - 2));
      size_t first = c.next_kernel();
      lower_segment(every);
      c.kernel("segment_next", store(seg_word, imm(0), sub(load(seg_word, imm(0)), imm(1))));
      c.time_loop(first, kept - 1);
    }
  }
  for (size_t l = 0; l < d_init.size(); ++l)
    sk.write("d_init", d_init[l], nullptr,
             [&](const LExprPtr &i) { return add(sk.read(d_states[l], imm(0), i), load(carry[l], i)); });
}

} // namespace

// A vjp that reads one saved value %rt of each step, and the body that
// returns it after the next state (the examples of recompute_saved).
#define SAVED_VJP                                                                                                      \
  "fn (%s: Tensor[(3,), float64], %xt: Tensor[(3,), float64], %rt: Tensor[(3,), float64], %c: Tensor[(3,), "         \
  "float64], %d: Tensor[(3,), float64]) { (%d * (1f64 - tanh(%rt) * tanh(%rt)) * %c, %d, %d * %s * %rt) }"
#define SAVED_BODY                                                                                                     \
  "fn (%s: Tensor[(3,), float64], %xt: Tensor[(3,), float64], %c: Tensor[(3,), float64]) { (tanh(%s * %c) + %xt, "   \
  "%s * %c) }"

void register_recurrence_ops(OpRegistry &reg) {
  reg.add("scan")
      .describe("TE's scan as an expression (SPEC §7): result[0] = init, result[t] = body(result[t-1], x1[t], ...) "
                "for t in [1, T); the body may read values of the enclosing function. A tuple state gives a tuple "
                "of histories.")
      .arg("body", "fn", "The update: fn (%state, %x1_t, ...) returning the next state.")
      .arg("init", "Tensor or Tuple", "The initial state: the result's step 0.")
      .arg("xs", "Tensor", "Sequences of T steps each (at least one); the body sees step t of each.")
      .arity(3, 1 << 20)
      .attrs<ScanAttrs>()
      .support_level(3)
      .takes_fn(scan_params)
      .relation("Scan", scan_rel)
      .gradient(scan_grad)
      .lower_loop(scan_lower)
      .flops([](const Expr &call) {
        return function_flops(*call.args[0]->func) * std::max<int64_t>(leaf_types(call.type)[0].shape[0] - 1, 0);
      })
      .example("%h: Tensor[(2, 3), float64], %x: Tensor[(4, 2, 3), float64], %w: Tensor[(3, 3), float64]",
               "scan(fn (%s: Tensor[(2, 3), float64], %xt: Tensor[(2, 3), float64]) { tanh(nn.dense(%s, %w) + "
               "%xt) }, %h, %x)")
      // The weights' and the bias's adjoints are sums over time after the loop (op/TimeSums.h), of the
      // state's history, the sequence's and the pre-activation's adjoint, which the reverse steps emit.
      .example("%h: Tensor[(2, 3), float64], %x: Tensor[(5, 2, 4), float64], %u: Tensor[(3, 4), float64], "
               "%w: Tensor[(3, 3), float64], %c: Tensor[(3,), float64]",
               "sum(sin(scan(fn (%s: Tensor[(2, 3), float64], %xt: Tensor[(2, 4), float64]) { "
               "tanh(nn.bias_add(nn.dense(%xt, %u) + nn.dense(%s, %w), %c)) }, %h, %x)))")
      .example("%a: Tensor[(3,), float64], %b: Tensor[(3,), float64], %x: Tensor[(5, 3), float64], "
               "%y: Tensor[(5, 3), float64]",
               "%0 = scan(fn (%s, %xt, %yt) { (%s.0 * %xt + %yt, %s.1 + %s.0) }, (%a, %b), %x, %y); "
               "%0.0 + sin(%0.1)");

  reg.add("grad.scan_backward")
      .describe("The reverse scan of scan's gradient: runs the body's vector-Jacobian product from the last step "
                "to the first over the stored states; returns the adjoints of the initial state, of each sequence "
                "and of each captured value but the unsummed ones, for those with a floating-point part, then the "
                "emitted step values stacked over time.")
      .arg("vjp", "fn",
           "fn (%state, %x1_t, ..., %saved..., %captured..., %d_next) -> (d_state, d_x1_t, ..., d_captured "
           "(but the unsummed)..., emitted...)")
      .arg("body", "fn",
           "scan's body closed over what it captured: fn (%state, %x1_t, ..., %captured...) -> state, or -> "
           "(state, saved...) with recompute_saved.")
      .arg("states", "Tensor or Tuple", "scan's result (or the states time checkpointing keeps).")
      .arg("d_states", "Tensor or Tuple", "Its adjoint.")
      .arg("inputs", "Tensor", "The sequences, then the captured values.")
      .arity(5, 1 << 20)
      .attrs<ScanBackwardAttrs>()
      .support_level(3)
      .takes_fn(scan_backward_params, 2)
      .relation("ScanBackward", scan_backward_rel)
      .gradient(scan_backward_grad)
      .lower_loop(scan_backward_lower)
      .flops(scan_backward_flops)
      .example("%st: Tensor[(4, 3), float64], %ds: Tensor[(4, 3), float64], %x: Tensor[(4, 3), float64], "
               "%w: Tensor[(3,), float64]",
               "%0 = grad.scan_backward(fn (%s: Tensor[(3,), float64], %xt: Tensor[(3,), float64], "
               "%c: Tensor[(3,), float64], %d: Tensor[(3,), float64]) { (%d * tanh(%s * %c) + %xt, %d * %s, "
               "%d * %xt * %c) }, fn (%s: Tensor[(3,), float64], %xt: Tensor[(3,), float64], %c: Tensor[(3,), "
               "float64]) { tanh(%s * %c) + %xt }, %st, %ds, %x, %w, sequences=1); "
               "sum(%0.0) + sum(sin(%0.1)) + sum(%0.2 * %0.2)")
      // A saved sequence (%r): the vjp reads it; it has an adjoint only in the second order.
      .example("%st: Tensor[(4, 3), float64], %ds: Tensor[(4, 3), float64], %x: Tensor[(4, 3), float64], "
               "%r: Tensor[(4, 3), float64], %w: Tensor[(3,), float64]",
               "%0 = grad.scan_backward(fn (%s: Tensor[(3,), float64], %xt: Tensor[(3,), float64], "
               "%rt: Tensor[(3,), float64], %c: Tensor[(3,), float64], %d: Tensor[(3,), float64]) { "
               "(%d * tanh(%rt) + %xt, %d * %s * %rt, %d * %xt * %c) }, fn (%s: Tensor[(3,), float64], "
               "%xt: Tensor[(3,), float64], %c: Tensor[(3,), float64]) { tanh(%s * %c) + %xt }, %st, %ds, %x, %r, "
               "%w, sequences=2, saved=1); sum(%0.0) + sum(sin(%0.1)) + sum(%0.2 * %0.2)")
      // Saved values recomputed by the body from each step's state. (Time-checkpointed segments have no
      // example: their kept states must be the body's own, which independent inputs are not; the scan tests
      // compare them bitwise with every state kept.)
      .example("%st: Tensor[(5, 3), float64], %ds: Tensor[(5, 3), float64], %x: Tensor[(5, 3), float64], "
               "%w: Tensor[(3,), float64]",
               "%0 = grad.scan_backward(" SAVED_VJP ", " SAVED_BODY ", %st, %ds, %x, %w, saved=1, "
               "recompute_saved=True); sum(%0.0) + sum(sin(%0.1)) + sum(%0.2 * %0.2)")
      // A captured value left unsummed (its adjoint is summed after the loop) and an emitted step value.
      .example("%st: Tensor[(4, 3), float64], %ds: Tensor[(4, 3), float64], %x: Tensor[(4, 3), float64], "
               "%w: Tensor[(3,), float64]",
               "%0 = grad.scan_backward(fn (%s: Tensor[(3,), float64], %xt: Tensor[(3,), float64], "
               "%c: Tensor[(3,), float64], %d: Tensor[(3,), float64]) { (%d * tanh(%s * %c) + %xt, %d * %s, "
               "%d * %xt * %c) }, fn (%s: Tensor[(3,), float64], %xt: Tensor[(3,), float64], %c: Tensor[(3,), "
               "float64]) { tanh(%s * %c) + %xt }, %st, %ds, %x, %w, sequences=1, unsummed=[0], emitted=1); "
               "sum(%0.0) + sum(sin(%0.1)) + sum(%0.2 * %0.2)");
}

} // namespace gradc
