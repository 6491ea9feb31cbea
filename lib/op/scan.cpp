//===- scan.cpp - recurrences: cumsum, cumprod ----------------------------===//
//
// cumsum and cumprod lower through the shared scan machinery (lower_scan,
// op/Scan.h): the scanned axis is the time loop, the other axes are the
// state. cumprod's gradient is right where inputs are zero: the usual
// reverse_cumsum(g·y) / x only for the elements before the first zero of
// each row, the first zero's own from the products after it, zero past it.
//
//===----------------------------------------------------------------------===//
#include "cumulative.h"
#include "gradc/op/attrs/scan.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Scan.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"

namespace gradc {
namespace {

Type cumulative_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x || !require_numeric(ctx, *x, "numpy counts the True values: cast to int32 or int64 first"))
    return Type::unknown();
  if (!ctx.attrs_as<CumsumAttrs>().axis)
    return Type::tensor({num_elements(x->shape)}, x->dtype);
  return *x; // a scalar has no axis: the attribute check reports it
}

} // namespace

/// out[t] = out[t-1] + x[t] along the axis (x[t-1] and out[0] = 0 if
/// exclusive). The running sum of each state element is carried in the
/// dtype's accumulator (float16 in float32) with Neumaier's compensation,
/// as reductions are: each out[t] is the exact prefix sum rounded once
/// (a plain float32 running sum over 6 700 elements was off by 7e-5).
/// With `product`: out[t] = out[t-1] · x[t] (out[0] = 1 if exclusive), a
/// plain running product in the accumulator.
StmtPtr cumulative_kernel(KernelCtx &k, bool product) {
  const Shape &xs = k.arg_type(0).shape, &os = k.out()->shape;
  auto attrs = k.attrs_as<CumsumAttrs>();
  bool flat = !attrs.axis;
  int64_t axis = attrs.axis.value_or(0);
  bool exclusive = attrs.exclusive;
  DType dt = k.out()->dtype, acc = dtype_info(dt).accumulator;
  auto full = [axis](const LExprPtr &t, const Index &s) {
    Index idx = s;
    idx.insert(idx.begin() + axis, t);
    return idx;
  };
  auto x_at = [&](const LExprPtr &t, const Index &s) {
    Index idx = full(t, s);
    return cast(acc, flat ? k.in(0, unravel_index(idx[0], xs)) : k.in(0, idx));
  };
  ScanLoop scan;
  scan.steps = os[axis];
  scan.state = os;
  scan.state.erase(scan.state.begin() + axis);
  if (scan.steps <= 0)
    return lower_scan(scan);
  BufferPtr sum = k.scratch("sum", acc, num_elements(scan.state)), carry = k.scratch("carry", acc, num_elements(scan.state));
  auto write = [&](const LExprPtr &t, const Index &s) {
    LExprPtr slot = flat_index(scan.state, s);
    LExprPtr total = product ? load(sum, slot) : neumaier_total(sum, carry, slot);
    return store(k.out(), flat_index(os, full(t, s)), cast(dt, total));
  };
  scan.first = [&](const Index &s) {
    LExprPtr slot = flat_index(scan.state, s), zero = int_imm(0);
    LExprPtr identity = constant_of(product ? 1 : 0, acc);
    return seq({store(sum, slot, exclusive ? identity : x_at(zero, s)), store(carry, slot, constant_of(0, acc)),
                write(zero, s)});
  };
  scan.step = [&](const LExprPtr &t, const Index &s) {
    LExprPtr xt = exclusive ? x_at(binary(BinaryOp::Sub, t, int_imm(1)), s) : x_at(t, s);
    LExprPtr slot = flat_index(scan.state, s);
    StmtPtr accumulate = product ? store(sum, slot, mul(load(sum, slot), xt)) : neumaier(sum, carry, slot, xt);
    return seq({accumulate, write(t, s)});
  };
  return lower_scan(scan);
}

/// A scan along a long axis with fewer rows than the target has threads to
/// run (a GPU's tens of thousands, a CPU's cores): one thread per row would
/// walk all T steps in order, so each row is cut into chunks of kChunk
/// steps scanned in parallel, in three phases (on a GPU, three launches:
/// lower/BindGpu.cpp): each chunk's total; for each row, the chunk totals
/// scanned in order into each chunk's carry (the total before it); each
/// chunk again, from its carry, writing its outputs. Sums are compensated
/// (Neumaier) within a chunk and across them, as in the serial kernel:
/// rounded differently, but as accurately. Null where the serial kernel is
/// the better one: a short axis, or rows enough to keep every thread busy.
StmtPtr chunked_scan(KernelCtx &k, bool product, int64_t threads) {
  constexpr int64_t kChunk = 256;
  const Shape &xs = k.arg_type(0).shape, &os = k.out()->shape;
  auto attrs = k.attrs_as<CumsumAttrs>();
  bool flat = !attrs.axis;
  int64_t axis = attrs.axis.value_or(0), steps = os.empty() ? 0 : os[axis];
  Shape state = os;
  if (!os.empty())
    state.erase(state.begin() + axis);
  int64_t rows = num_elements(state);
  if (steps < 4 * kChunk || rows < 1 || rows > threads)
    return nullptr;
  int64_t chunks = (steps + kChunk - 1) / kChunk;
  DType dt = k.out()->dtype, acc = dtype_info(dt).accumulator;
  LExprPtr identity = constant_of(product ? 1 : 0, acc);
  auto full = [&](const LExprPtr &r, const LExprPtr &t) {
    Index idx = unravel_index(r, state);
    idx.insert(idx.begin() + axis, t);
    return idx;
  };
  // The term added at step t (< T) of row r: x[t], or x[t-1] (identity at 0) when exclusive.
  // (Steps past T are skipped by an `if`; the indices are clamped too, for
  // the verifier's bounds.)
  auto term = [&](const LExprPtr &r, const LExprPtr &t) {
    LExprPtr at = clamp_index(attrs.exclusive ? sub(t, imm(1)) : t, steps);
    Index idx = full(r, at);
    LExprPtr x = cast(acc, flat ? k.in(0, unravel_index(idx[0], xs)) : k.in(0, idx));
    return attrs.exclusive ? select(compare(CompareOp::GT, t, imm(0)), x, identity) : x;
  };
  // Each chunk's running value is a pair (sum and its compensation, kept
  // apart so that no rounding happens between chunks): carries[slot] and
  // carries[slot + n] (a product has no compensation; its second half is
  // unused).
  const int64_t n = rows * chunks;
  BufferPtr carries = k.scratch("chunk_carries", acc, 2 * n);
  auto running = [&](const LExprPtr &init_s, const LExprPtr &init_c,
                     const std::function<StmtPtr(const BufferPtr &s, const BufferPtr &c)> &body) {
    BufferPtr s = k.local("run", acc), c = k.local("comp", acc);
    return alloc(s, alloc(c, seq({store(s, imm(0), init_s), store(c, imm(0), init_c), body(s, c)})));
  };
  auto fold = [&](const BufferPtr &s, const BufferPtr &c, const LExprPtr &x) {
    return product ? store(s, imm(0), mul(load(s, imm(0)), x)) : neumaier(s, c, imm(0), x);
  };
  auto value = [&](const BufferPtr &s, const BufferPtr &c) {
    return product ? load(s, imm(0)) : neumaier_total(s, c, imm(0));
  };
  auto save = [&](const LExprPtr &slot, const BufferPtr &s, const BufferPtr &c) {
    return seq({store(carries, slot, load(s, imm(0))), store(carries, add(slot, imm(n)), load(c, imm(0)))});
  };
  LExprPtr zero = constant_of(0, acc);
  // for i in the chunk's steps (serial): body(t), t < T.
  auto each_step = [&](const LExprPtr &chunk, const std::function<StmtPtr(const LExprPtr &t)> &body) {
    LVarPtr i = k.var("i");
    LExprPtr t = add(mul(chunk, imm(kChunk)), var_ref(i));
    return for_loop(i, kChunk, ForKind::Reduce, if_then(compare(CompareOp::LT, t, imm(steps)), body(t)));
  };
  StmtPtr totals = loop_nest({rows, chunks}, [&](const Index &rc) {
    return running(identity, zero, [&](const BufferPtr &s, const BufferPtr &c) {
      return seq({each_step(rc[1], [&](const LExprPtr &t) { return fold(s, c, term(rc[0], t)); }),
                  save(add(mul(rc[0], imm(chunks)), rc[1]), s, c)});
    });
  });
  // The chunk totals in order: each chunk's carry is the pair before it.
  StmtPtr carry = loop_nest({rows}, [&](const Index &r) {
    return running(identity, zero, [&](const BufferPtr &s, const BufferPtr &c) {
      LVarPtr ch = k.var("chunk");
      LExprPtr slot = add(mul(r[0], imm(chunks)), var_ref(ch));
      BufferPtr ts = k.local("total", acc), tc = k.local("total_comp", acc);
      StmtPtr add_total = product ? fold(s, c, load(ts, imm(0)))
                                  : seq({fold(s, c, load(ts, imm(0))), fold(s, c, load(tc, imm(0)))});
      return for_loop(ch, chunks, ForKind::Reduce,
                      alloc(ts, alloc(tc, seq({store(ts, imm(0), load(carries, slot)),
                                               store(tc, imm(0), load(carries, add(slot, imm(n)))), save(slot, s, c),
                                               add_total}))));
    });
  });
  StmtPtr outputs = loop_nest({rows, chunks}, [&](const Index &rc) {
    LExprPtr slot = add(mul(rc[0], imm(chunks)), rc[1]);
    return running(load(carries, slot), load(carries, add(slot, imm(n))), [&](const BufferPtr &s, const BufferPtr &c) {
      return each_step(rc[1], [&](const LExprPtr &t) {
        return seq({fold(s, c, term(rc[0], t)),
                    store(k.out(), flat_index(os, full(rc[0], clamp_index(t, steps))), cast(dt, value(s, c)))});
      });
    });
  });
  return seq({totals, carry, outputs});
}

namespace {

/// d cumprod: for inclusive y_t = Π_{r<=t} x_r, dx_s = Σ_{t>=s} g_t Π_{r<=t, r!=s} x_r.
/// With k the first zero of the row (z counts zeros up to and including s):
///   s < k:  rcumsum(g·y)_s / x_s          (x_s != 0; the terms past k vanish)
///   s = k:  E_k · rcumsum(g·P)_s          (E exclusive cumprod, P the
///                                          cumprod of x with 1 up to k)
///   s > k:  0
/// The exclusive cumprod is the inclusive one shifted: its gradient is the
/// inclusive one's for g shifted back.
Grads cumprod_grad(GradCtx &g) {
  auto attrs = g.attrs_as<CumsumAttrs>();
  Builder &b = g.b;
  ExprPtr x = g.arg(0), grad = g.grad;
  const Shape &shape = x->type.shape;
  bool flat = !attrs.axis;
  int64_t axis = attrs.axis.value_or(0);
  if (flat)
    x = b.reshape(x, {num_elements(shape)});
  DType dt = x->type.dtype;
  if (attrs.exclusive) { // g'_t = g_{t+1}, the last 0
    IntPairs shift(x->type.rank(), {0, 0});
    shift[axis] = {-1, 1};
    grad = b.pad(grad, shift);
  }
  CumsumAttrs inclusive = attrs, exclusive = attrs;
  inclusive.axis = exclusive.axis = axis;
  inclusive.exclusive = false;
  exclusive.exclusive = true;
  auto cumsum = [&](ExprPtr v, const CumsumAttrs &a) { return b.call(ops::cumsum, {v}, a); };
  auto cumprod = [&](ExprPtr v, const CumsumAttrs &a) { return b.call(ops::cumprod, {v}, a); };
  auto rcumsum = [&](ExprPtr v) { return b.reverse(cumsum(b.reverse(v, axis), inclusive), axis); };
  ExprPtr zero = b.constant(0, dt), one = b.constant(1, dt);
  ExprPtr is_zero = b.cast(b.call(ops::equal, {x, zero}), dt);
  ExprPtr zeros_before = cumsum(is_zero, exclusive), zeros_upto = cumsum(is_zero, inclusive);
  ExprPtr before = b.call(ops::equal, {zeros_upto, zero});                       // s < k
  ExprPtr at = b.call(ops::equal, {b.add(zeros_before, is_zero), one});          // s == k
  ExprPtr after_k = b.call(ops::greater_equal, {zeros_before, one});              // r > k
  ExprPtr y = cumprod(x, inclusive);
  ExprPtr early = b.div(rcumsum(b.mul(grad, y)), b.call(ops::where, {before, x, one}));
  ExprPtr P = cumprod(b.call(ops::where, {after_k, x, one}), inclusive);
  ExprPtr first_zero = b.mul(cumprod(x, exclusive), rcumsum(b.mul(grad, P)));
  ExprPtr dx = b.call(ops::where, {before, early, b.call(ops::where, {at, first_zero, zero})});
  return {flat ? b.reshape(dx, shape) : dx};
}

} // namespace

void register_scan_ops(OpRegistry &reg) {
  reg.add("cumsum")
      .describe("Cumulative sum along an axis (None: over the flattened input).")
      .arg("data", "Tensor", "The input.")
      .attrs<CumsumAttrs>()
      .support_level(3)
      .relation("Cumulative", cumulative_rel)
      .gradient([](GradCtx &g) -> Grads {
        // d/dx_s sum_t g_t out_t = sum_{t >= s} g_t: a reversed cumsum of g
        // (t > s when exclusive); for axis=None, reshaped back to x's shape.
        auto attrs = g.attrs_as<CumsumAttrs>();
        bool flat = !attrs.axis;
        attrs.axis = attrs.axis.value_or(0);
        ExprPtr r = g.b.reverse(g.grad, *attrs.axis);
        ExprPtr c = g.b.reverse(g.b.call(ops::cumsum, {r}, attrs), *attrs.axis);
        return {flat ? g.b.reshape(c, g.arg(0)->type.shape) : c};
      })
      .kernel([](KernelCtx &k) { return cumulative_kernel(k, false); })
      .example("%x: Tensor[(3, 4), float64]", "cumsum(%x, axis=1, exclusive=True)");

  reg.add("cumprod")
      .describe("Cumulative product along an axis (None: over the flattened input); the gradient is right where "
                "inputs are zero.")
      .arg("data", "Tensor", "The input.")
      .attrs<CumsumAttrs>()
      .support_level(3)
      .relation("Cumulative", cumulative_rel)
      .gradient(cumprod_grad)
      .kernel([](KernelCtx &k) { return cumulative_kernel(k, true); })
      .example("%x: Tensor[(3, 4), float64]", "cumprod(%x, axis=1)")
      .example("%x: Tensor[(2, 5), float64]", "cumprod(%x, axis=-1, exclusive=True)")
      .example("%x: Tensor[(2, 3), float64]", "cumprod(%x)");
}

} // namespace gradc
