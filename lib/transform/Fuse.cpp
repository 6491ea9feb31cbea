//===- Fuse.cpp - fuse injective chains, epilogues and producers ----------===//
//
// The last tensor-level pass before lowering. A value with one user fuses
// into it (becomes a nested call, computed inside its user's kernel):
//  * an injective producer into an injective consumer: one loop nest, each
//    fused value computed once per output element;
//  * an injective producer into an operator that fuses_producers (matrix
//    products, reductions), which reads each element a bounded number of
//    times: transpose(dy) into dyᵀ·x, a / b into sum(a / b); a max pool's
//    windows read an element at each tap that covers it, so only a cheap
//    producer fuses there, recomputed at each read: relu(batch norm) into
//    the pool after it and into the pool's gradient, never in memory;
//  * an operator that fuses_epilogue (the anchor) into injective consumers
//    that read it at their own output index, probed through their element
//    functions: bias_add and relu after dense, the relu gradient after the
//    product that feeds it. The anchor's kernel then stores the consumers'
//    value; one anchor per kernel. A pointwise consumer with several
//    results takes an anchor the same way (the last of a chain): Adam's
//    update after the weight gradient's product, which then stores the
//    parameter and its moments where it stored the gradient.
//
// Checkpoint markers are boundaries: nothing fuses into or out of one, so
// the segments they mark are whole kernels when the remat stage reads them.
//
// A tuple that only a call taking plain producers reads (concatenate's
// parts) is written in the call, its fields' plain producers fused: each
// part is computed where concatenate stores it.
//
// A value with several users (at most kMaxUsers) is recomputed in each of
// them instead of kept in memory when that is cheap: an injective tree of a
// few additions, products, selects and index changes (no transcendental
// function, division or power at full size), reading at most two tensors of
// its own size, whose every user takes it as a plain producer. Writing it
// once and reading it k times costs k + 1 passes over memory; recomputing
// it costs reads its users mostly make anyway: a batch norm's gradient
// builds g·dy and dy·(x - mean) once and reads each in two sums and the
// data gradient, and a relu mask feeds three of them. Not one that reads an
// operand replicated (OpDef::replicates: a max pool's gradient unpooled over
// disjoint windows, each window's adjoint at each of its taps), which a
// vector loop gathers, unless fusion is lean (FuseOptions): the remat stage
// fuses again that way when no plan fits its budget, and vgg11_bn's relu
// gradient before its first pool, at the data's full size, is never in
// memory (its half-peak plan fits, the step 4% slower).
//
// A producer that divides, takes a root or a transcendental function and
// that its consumer reads broadcast, 16 or more times per element (a batch
// norm's per-channel factor), stays a kernel: fused, it ran per element.
//
// Fusion moves a producer's computation to its consumer, so the values it
// reads live until then instead of its own. Where kernels run between the
// two, a producer that reads more than kMaxPinned times its own bytes of
// the function's values stays a kernel of its own: a running sum of
// gradient contributions (a weight shared by every step of an unrolled
// recurrence) is added up every few steps rather than in one kernel at the
// end that keeps every contribution alive. (Not in a scan's body, whose
// values live one step.)
//
//===----------------------------------------------------------------------===//
#include "gradc/support/Log.h"
#include "gradc/transform/Fuse.h"
#include "gradc/ir/Functor.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Registry.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

namespace gradc {
namespace {

constexpr int kMaxFusedDepth = 64;
constexpr int64_t kMaxPinned = 4; // bytes a producer fused across kernels may keep alive, per byte of its own
constexpr int kMaxUsers = 4;            // users a recomputed value may have
constexpr int kMaxRecomputedCalls = 8;  // operators at full size in a recomputed value's tree
constexpr int kMaxRecomputedTree = 32;  // operators in all (per-channel scalars included)
constexpr int kMaxRecomputedReads = 2;  // tensors of its own size it reads
constexpr int64_t kBroadcastReuse = 16; // reads per element that keep a costly broadcast producer a kernel

/// The operator calls in a fused expression tree (a call used twice counts twice).
class CallCounter : public ExprVisitor {
public:
  CallCounter() : ExprVisitor(/*share=*/false) {}
  int calls = 0;

private:
  void on_call(const ExprPtr &e) override {
    ++calls;
    visit_children(e);
  }
};

int count_calls(const ExprPtr &e) {
  CallCounter counter;
  counter.visit(e);
  return counter.calls;
}

bool injective(const Expr &e) { return e.kind == ExprKind::Call && e.op->injective(e); }

/// Builds injective `call`'s element expression once over symbolic output
/// indices (each operand read through a probe load), calling `read` for each
/// operand element it reads; returns the expression and the indices.
LExprPtr probe_element(const ExprPtr &call, Index &out,
                       const std::function<void(size_t arg, const Index &idx)> &read) {
  for (size_t d = 0; d < call->type.shape.size(); ++d)
    out.push_back(var_ref(std::make_shared<LVar>(LVar{"i" + std::to_string(d)})));
  std::vector<Type> inputs = input_leaves(*call);
  ElementCtx ctx{*call, out, [&](size_t a, const Index &idx) {
                   read(a, idx);
                   auto probe = std::make_shared<Buffer>(Buffer{"probe", inputs.at(a).dtype, {1}, BufferScope::Input});
                   return load(probe, int_imm(0));
                 }};
  return call->op->element(ctx);
}

/// Builds pointwise `call`'s stores (OpDef::pointwise) once, as
/// probe_element does an injective call's element.
void probe_pointwise(const ExprPtr &call, Index &out, const std::function<void(size_t arg, const Index &idx)> &read) {
  const Shape &shape = call->args[0]->type.shape;
  for (size_t d = 0; d < shape.size(); ++d)
    out.push_back(var_ref(std::make_shared<LVar>(LVar{"i" + std::to_string(d)})));
  std::vector<Type> inputs = input_leaves(*call);
  std::vector<BufferPtr> results;
  for (const Type &t : leaf_types(call->type))
    results.push_back(std::make_shared<Buffer>(Buffer{"result", t.dtype, t.shape, BufferScope::Output}));
  static const Target kProbeTarget;
  KernelCtx ctx{*call, results,
                [&](size_t a, const Index &idx) {
                  read(a, idx);
                  auto probe = std::make_shared<Buffer>(Buffer{"probe", inputs.at(a).dtype, {1}, BufferScope::Input});
                  return load(probe, int_imm(0));
                },
                kProbeTarget, nullptr, nullptr, {}};
  call->op->pointwise(ctx, out, flat_index(shape, out));
}

/// Whether injective or pointwise `call` reads operand `arg` at its own
/// output index and nowhere else (bias_add, relu, where, an optimizer's
/// gradient: yes; transpose, a broadcast operand: no), found by building its
/// element once over symbolic indices.
bool reads_elementwise(const ExprPtr &call, size_t arg) {
  bool pointwise = call->op->pointwise != nullptr;
  const Type &t = pointwise ? call->args[0]->type : call->type, &at = call->args[arg]->type;
  if (!t.is_tensor() || !at.is_tensor() || !(at.shape == t.shape) ||
      std::any_of(call->args.begin(), call->args.end(), [](const ExprPtr &a) { return a->type.is_tuple(); }))
    return false; // (a tuple argument numbers the inputs otherwise: op/Kernel.h)
  Index out;
  int reads = 0;
  bool same = true;
  auto read = [&](size_t a, const Index &idx) {
    if (a == arg) {
      ++reads;
      same = same && idx == out;
    }
  };
  if (pointwise)
    probe_pointwise(call, out, read);
  else
    probe_element(call, out, read);
  return reads == 1 && same;
}

/// Whether an element of expression `e` costs a few cycles: no
/// transcendental function, division or power of floating values.
bool cheap(const LExprPtr &e) {
  if (!e)
    return true;
  bool is_float = dtype_info(e->dtype).is_float;
  if (e->kind == LExprKind::Unary && e->uop != UnaryOp::Neg && e->uop != UnaryOp::Abs)
    return false;
  if (e->kind == LExprKind::Binary && is_float && (e->bop == BinaryOp::Div || e->bop == BinaryOp::Pow))
    return false;
  for (const LExprPtr &o : e->operands)
    if (!cheap(o))
      return false;
  return true;
}

/// Whether the fused injective tree `value` may be recomputed in each of its
/// users (see the header): few operators, cheap at full size, reading each
/// operand once per element and at most kMaxRecomputedReads tensors of its
/// own size; none that replicates an operand unless fusion is `lean`.
bool recomputable(const ExprPtr &value, bool lean) {
  int64_t size = num_elements(value->type.shape);
  int calls = 0, full_calls = 0;
  bool ok = true;
  std::unordered_set<const Expr *> big;
  std::function<void(const ExprPtr &)> walk = [&](const ExprPtr &e) {
    if (!ok)
      return;
    if (e->kind == ExprKind::Var) {
      if (e->type.is_tensor() && num_elements(e->type.shape) >= size)
        big.insert(e.get());
      return;
    }
    if (e->kind != ExprKind::Call)
      return;
    bool full_size = num_elements(e->type.shape) >= size;
    full_calls += full_size;
    if (++calls > kMaxRecomputedTree || full_calls > kMaxRecomputedCalls || !injective(*e) ||
        (e->op->replicates && !lean)) {
      ok = false;
      return;
    }
    std::vector<int> reads(input_leaves(*e).size(), 0);
    Index out;
    LExprPtr element = probe_element(e, out, [&](size_t a, const Index &) { ++reads[a]; });
    ok = (!full_size || cheap(element)) && std::all_of(reads.begin(), reads.end(), [](int r) { return r <= 1; });
    for (const ExprPtr &a : e->args)
      walk(a);
  };
  walk(value);
  return ok && int(big.size()) <= kMaxRecomputedReads;
}

/// Whether fused injective tree `value` computes a transcendental function,
/// division or power of floating values anywhere in it.
bool costly(const ExprPtr &value) {
  bool found = false;
  std::function<void(const ExprPtr &)> walk = [&](const ExprPtr &e) {
    if (found || e->kind != ExprKind::Call)
      return;
    Index out;
    found = !cheap(probe_element(e, out, [](size_t, const Index &) {}));
    for (const ExprPtr &a : e->args)
      walk(a);
  };
  walk(value);
  return found;
}

/// Whether injective `producer`, fused into `consumer`, would be computed
/// kBroadcastReuse times per element of its own or more (read broadcast:
/// a batch norm's per-channel gamma / sqrt(var + eps) at every element of
/// its normalised output) and costs more than a few cycles: it stays a
/// kernel, each of its elements computed once.
bool broadcast_costly(const ExprPtr &producer, const Expr &consumer) {
  if (!producer->type.is_tensor())
    return false;
  int64_t own = num_elements(producer->type.shape), widest = 0;
  if (consumer.type.is_tensor())
    widest = num_elements(consumer.type.shape);
  for (const ExprPtr &a : consumer.args)
    if (a->type.is_tensor())
      widest = std::max(widest, num_elements(a->type.shape));
  return widest >= kBroadcastReuse * std::max<int64_t>(own, 1) && costly(producer);
}

/// Whether argument `arg` of `call` may be a fused injective producer: an
/// injective call's, or one its operator reads that way (OpDef::producer_reads).
bool takes_producer(const Expr &call, size_t arg) {
  return injective(call) || call.op->producer_reads(call, arg) > 0;
}

/// Whether `call` computes a producer fused at argument `arg` once per
/// element of it: a pooling window's taps recompute one at each read, so
/// only a cheap producer fuses where windows overlap.
bool reads_once(const Expr &call, size_t arg) {
  return injective(call) || call.op->producer_reads(call, arg) <= 1;
}

/// A value that may fuse into its users (one, or several when recomputed).
struct Fusable {
  ExprPtr value;
  int depth = 1;
  bool anchored = false; // it is, or contains, an operator that fuses_epilogue
};

int64_t tensor_bytes(const Type &t) {
  return t.is_tensor() ? num_elements(t.shape) * int64_t(dtype_bytes(t.dtype)) : 0;
}

/// Where each binding of `fn` is, and how many calls come before each.
struct Positions {
  std::unordered_map<const Expr *, size_t> index;
  std::vector<size_t> calls_before;
  explicit Positions(const Function &fn) {
    const std::vector<Binding> &body = fn.body.bindings;
    calls_before.assign(body.size() + 1, 0);
    for (size_t i = 0; i < body.size(); ++i) {
      index[body[i].var.get()] = i;
      calls_before[i + 1] = calls_before[i] + (body[i].value->kind == ExprKind::Call);
    }
  }
  /// The bytes of the values of this function that `value` (bound as
  /// `var`) reads, when kernels run between it and the binding at `c`:
  /// what fusing it there keeps alive until then.
  int64_t pinned_bytes(const ExprPtr &var, const ExprPtr &value, size_t c) const {
    size_t p = index.at(var.get());
    if (calls_before[c] - calls_before[p + 1] == 0)
      return 0; // nothing runs between
    int64_t pinned = 0;
    for (const ExprPtr &v : free_vars(value))
      if (index.count(v.get()))
        pinned += tensor_bytes(v->type);
    return pinned;
  }
};

FunctionPtr fuse_bindings(const Function &fn, bool nested, FuseOptions options) {
  std::unordered_map<const Expr *, int> use_count = count_uses(fn);
  Positions positions(fn);
  // Reads of each var as the operand of a call that takes plain injective
  // producers (an injective call, or one that fuses_producers): a value
  // whose every use is one may be recomputed in each.
  std::unordered_map<const Expr *, int> producer_uses;
  for (const Binding &b : fn.body.bindings)
    if (b.value->kind == ExprKind::Call)
      for (size_t i = 0; i < b.value->args.size(); ++i)
        if (b.value->args[i]->kind == ExprKind::Var && takes_producer(*b.value, i))
          ++producer_uses[b.value->args[i].get()];
  std::unordered_map<const Expr *, Fusable> fusable; // by var
  std::unordered_map<const Expr *, int> replaced;     // uses of each var that fused
  std::unordered_map<const Expr *, ExprPtr> tuples;   // Tuple values, by var
  // A tuple built for one call that takes plain producers (concatenate's
  // parts) is written in its place, its fields' plain injective producers
  // fused: each part is computed where the call stores it. Null when no
  // field fuses.
  auto fuse_into_tuple = [&](const ExprPtr &arg, int &depth) -> ExprPtr {
    auto t = tuples.find(arg.get());
    if (t == tuples.end() || use_count[arg.get()] != 1)
      return nullptr;
    std::vector<ExprPtr> fields = t->second->args;
    bool any = false;
    for (ExprPtr &f : fields) {
      auto it = fusable.find(f.get());
      if (it == fusable.end() || !injective(*it->second.value) || it->second.anchored)
        continue;
      ++replaced[f.get()];
      depth = std::max(depth, it->second.depth + 1);
      f = it->second.value;
      any = true;
    }
    if (!any)
      return nullptr;
    ++replaced[arg.get()];
    return with_args(*t->second, std::move(fields));
  };
  std::vector<Binding> out;
  for (size_t at = 0; at < fn.body.bindings.size(); ++at) {
    const Binding &b = fn.body.bindings[at];
    ExprPtr value = b.value;
    if (value->kind == ExprKind::Tuple)
      tuples[b.var.get()] = value;
    // A checkpoint marker stays a binding of its own, taking nothing and
    // taken by nothing: the remat stage after fusion reads the segments.
    bool marker = value->kind == ExprKind::Call && value->op->checkpoint != CheckpointMarker::None;
    if (value->kind == ExprKind::Call && !marker) {
      bool inj = injective(*value);
      Fusable self{nullptr, 1, false};
      std::vector<ExprPtr> args = value->args;
      for (size_t i = 0; i < args.size(); ++i) {
        if (takes_producer(*value, i))
          if (ExprPtr parts = fuse_into_tuple(args[i], self.depth)) {
            args[i] = parts;
            continue;
          }
        auto it = fusable.find(args[i].get());
        if (it == fusable.end())
          continue;
        const Fusable &f = it->second;
        bool plain_producer = injective(*f.value) && !f.anchored && !broadcast_costly(f.value, *value);
        bool takes_anchor = inj || value->op->pointwise; // a product's value, as its epilogue
        bool ok = (plain_producer && takes_producer(*value, i) && (reads_once(*value, i) || !costly(f.value))) ||
                  (takes_anchor && !self.anchored && reads_elementwise(value, i));
        if (!ok)
          continue;
        if (int64_t pinned = nested ? 0 : positions.pinned_bytes(args[i], f.value, at);
            pinned > kMaxPinned * tensor_bytes(args[i]->type)) {
          log(LogLevel::Debug, "fuse", "@" + fn.name + ": %" + args[i]->name + " stays a kernel: fused into %" +
                                           b.var->name + " it would keep " + std::to_string(pinned) +
                                           " bytes alive across kernels");
          continue;
        }
        ++replaced[args[i].get()];
        self.depth = std::max(self.depth, f.depth + 1);
        self.anchored = self.anchored || f.anchored;
        args[i] = f.value;
      }
      value = with_args(*value, std::move(args));
      // A chain deeper than kMaxFusedDepth starts a new kernel, so that every
      // walk over a fused expression (lowering, the verifier, codegen) stays
      // shallow however long the chain (100 000 chained adds compile).
      int uses = use_count[b.var.get()];
      bool single = uses == 1 && (inj || (value->op->fuses_epilogue && !self.anchored));
      bool shared = uses > 1 && uses <= kMaxUsers && producer_uses[b.var.get()] == uses && inj && !self.anchored &&
                    recomputable(value, options.lean);
      if ((single || shared) && b.var->type.is_tensor() && self.depth < kMaxFusedDepth) {
        self.value = value;
        self.anchored = self.anchored || !inj;
        fusable[b.var.get()] = self;
      }
    }
    out.push_back({b.var, value, b.is_let});
  }
  // A value leaves memory only if every use took it; one that some user did
  // not take stays a kernel of its own (the users that took it recompute it).
  std::erase_if(out, [&](const Binding &b) {
    auto it = replaced.find(b.var.get());
    return it != replaced.end() && it->second == use_count[b.var.get()];
  });
  if (log_enabled(LogLevel::Info))
    for (const Binding &b : out) {
      int ops = count_calls(b.value);
      if (ops > 1)
        log(LogLevel::Info, "fuse", "@" + fn.name + ": %" + b.var->name + " fuses " + std::to_string(ops) +
                                        " operators into one kernel (root " + b.value->op->name + ")");
    }
  auto result = std::make_shared<Function>(fn);
  result->body.bindings = std::move(out);
  return result;
}

} // namespace

// A scan's body is fused on its own: its kernels run in the scan's time
// loop; nothing fuses across the body's boundary.
FunctionPtr fuse_operators(const Function &fn, FuseOptions options) {
  FunctionPtr bodies =
      map_nested_functions(fn, [&](const Function &body) { return fuse_bindings(body, true, options); });
  return fuse_bindings(*bodies, false, options);
}

} // namespace gradc
