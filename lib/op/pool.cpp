//===- pool.cpp - max and average pooling, global and adaptive ------------===//
//
// NCHW pooling with Relay's attributes (pool_size, strides, dilation, 1/2/4
// padding values, ceil_mode, count_include_pad) and PyTorch's semantics:
//
//  * The output extent is (n + pads - d·(k - 1) - 1) / s + 1, rounded up with
//    ceil_mode, where a last window that would start past the data and its
//    leading padding is dropped.
//  * Max pooling ignores the padding; the first maximum of a window (taps in
//    row-major order) is its argmax, and NaN is a maximum. A window with no
//    data (possible only with padding past half the window) is -inf.
//  * Average pooling divides by the taps inside the padded data
//    (count_include_pad) or inside the data; never by less than 1.
//
// The gradients are Relax's operators grad.max_pool2d_backward and
// grad.avg_pool2d_backward (output_grad, data, the pool's attributes). Both
// gather: each data element sums, in a fixed order, the adjoints of the
// windows that contain it (max: of the windows whose argmax it is, found by
// rescanning the window), so the kernels are data-parallel and
// deterministic, with no scatter. Global pools are compositions (mean; a
// max pool over the whole plane); adaptive average pooling has windows
// [⌊i·n/m⌋, ⌈(i+1)·n/m⌉) and a gathering backward operator of its own.
//
//===----------------------------------------------------------------------===//
#include "pool.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"
#include "gradc/op/attrs/reduce.h"

#include <limits>
#include <numeric>

namespace gradc {
namespace {

LExprPtr fdiv(LExprPtr a, int64_t b) { return binary(BinaryOp::FloorDiv, std::move(a), imm(b)); }
LExprPtr fmod(LExprPtr a, int64_t b) { return binary(BinaryOp::FloorMod, std::move(a), imm(b)); }

} // namespace

//===--- windows ----------------------------------------------------------===//

PoolAxis::PoolAxis(const Pool2DAttrs &a, int axis, int64_t extent)
    : n(extent), k(a.pool_size[axis]), s(a.strides[axis]), d(a.dilation[axis]), lo(a.padding[axis]),
      hi(a.padding[axis + 2]) {
  // negative where the window is longer than the padded data, which
  // ceil_mode allows (one window, as PyTorch); the relation checks out >= 1
  int64_t span = n + lo + hi - d * (k - 1) - 1;
  int64_t num = span + (a.ceil_mode ? s - 1 : 0);
  out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (a.ceil_mode && (out - 1) * s >= n + lo) // the last window starts past the data
    --out;
}

LExprPtr PoolAxis::at(const LExprPtr &o, const LExprPtr &t) const {
  return sub(add(mul(o, imm(s)), mul(t, imm(d))), imm(lo));
}

LExprPtr PoolAxis::taps_within(const LExprPtr &o, int64_t first, int64_t last) const {
  // tap t is inside when first <= o·s - lo + t·d < last:
  // t in [ceil((first - start) / d), ceil((last - start) / d)), clamped to [0, k]
  LExprPtr start = sub(mul(o, imm(s)), imm(lo));
  auto clampk = [&](const LExprPtr &v) { return binary(BinaryOp::Min, binary(BinaryOp::Max, v, imm(0)), imm(k)); };
  LExprPtr t0 = clampk(ceil_div(sub(imm(first), start))), t1 = clampk(ceil_div(sub(imm(last), start)));
  return binary(BinaryOp::Max, sub(t1, t0), imm(0));
}

LExprPtr PoolAxis::data_tap(const LExprPtr &o, const LExprPtr &j) const {
  if (data_taps() == k)
    return j;
  return from(ceil_div(sub(imm(lo), mul(o, imm(s)))), data_taps(), j);
}

LExprPtr PoolAxis::window_tap(const LExprPtr &i, const LExprPtr &j) const {
  if (window_taps() == k)
    return j;
  return from(ceil_div(sub(add(i, imm(lo)), imm((out - 1) * s))), window_taps(), j);
}

LExprPtr PoolAxis::window_holding(const LExprPtr &i, const LExprPtr &tap, LExprPtr &valid) const {
  LExprPtr num = sub(add(i, imm(lo)), mul(tap, imm(d)));
  LExprPtr o = fdiv(num, s);
  LExprPtr ok = both(compare(CompareOp::EQ, fmod(num, s), imm(0)), in_range(o, 0, out));
  valid = valid ? both(valid, ok) : ok;
  return clamp_index(o, out);
}

std::pair<int64_t, int64_t> PoolAxis::whole_windows() const {
  // window o reads o·s - lo through o·s - lo + (k - 1)·d
  return outputs_reading_inside(s, -lo, int64_t(std::min<__int128>(__int128(k - 1) * d - lo, INT64_MAX)), n, out);
}

LExprPtr PoolAxis::ceil_div(const LExprPtr &num) const { return sub(imm(0), fdiv(sub(imm(0), num), d)); }

LExprPtr PoolAxis::from(const LExprPtr &lowest, int64_t count, const LExprPtr &j) const {
  return add(binary(BinaryOp::Min, binary(BinaryOp::Max, lowest, imm(0)), imm(k - count)), j);
}

namespace {

//===--- relations --------------------------------------------------------===//

/// The window checks of a pool of `data`; fills the output extents.
bool pool_window(RelationCtx &ctx, const Pool2DAttrs &a, const Type &x, int64_t &oh, int64_t &ow) {
  if (x.rank() != 4) {
    ctx.fail("expects NCHW data of rank 4, found " + x.str());
    return false;
  }
  for (int i = 0; i < 2; ++i) {
    // in 128 bits: a dilation and a window within the limits multiply past 2^63
    __int128 n = x.shape[2 + i], span = __int128(a.dilation[i]) * (a.pool_size[i] - 1) + 1;
    // ceil_mode: a window longer than the padded data still gives one output (PyTorch)
    __int128 slack = a.ceil_mode ? a.strides[i] - 1 : 0;
    if (n + a.padding[i] + a.padding[i + 2] + slack < span || PoolAxis(a, i, x.shape[2 + i]).out < 1) {
      auto str = [](__int128 v) { return v > INT64_MAX ? std::string("over 2^63") : std::to_string(int64_t(v)); };
      ctx.fail_attr("pool_size", "the window " + ctx.attrs.get("pool_size").str() + " (dilated extent " + str(span) +
                                     ") is larger than the padded " + (i ? "width " : "height ") +
                                     str(n + a.padding[i] + a.padding[i + 2]));
      return false;
    }
  }
  oh = PoolAxis(a, 0, x.shape[2]).out;
  ow = PoolAxis(a, 1, x.shape[3]).out;
  return true;
}

template <class A> Type pool2d_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  if (!require_numeric(ctx, *x, "cast to a numeric dtype first"))
    return Type::unknown();
  int64_t oh, ow;
  if (!pool_window(ctx, ctx.attrs_as<A>(), *x, oh, ow))
    return Type::unknown();
  if (std::is_same_v<A, AvgPool2DAttrs> && !is_float(x->dtype))
    return ctx.fail("expects a floating-point tensor, found " + x->str());
  return Type::tensor({x->shape[0], x->shape[1], oh, ow}, x->dtype);
}

/// (output_grad, data) -> data's type, output_grad being the pool's output.
template <class A> Type pool2d_backward_rel(RelationCtx &ctx) {
  const Type *g = ctx.tensor(0), *x = g ? ctx.tensor(1) : nullptr;
  if (!x)
    return Type::unknown();
  if (!require_float(ctx, *x))
    return Type::unknown();
  int64_t oh, ow;
  if (!pool_window(ctx, ctx.attrs_as<A>(), *x, oh, ow))
    return Type::unknown();
  Type expect = Type::tensor({x->shape[0], x->shape[1], oh, ow}, x->dtype);
  if (*g != expect)
    return ctx.fail("output_grad of type " + g->str() + " is not the pool's output type " + expect.str());
  return *x;
}

/// grad.max_pool2d_gather(data_grad, data): data_grad has the data's type;
/// the result the pool's output type.
Type max_pool2d_gather_rel(RelationCtx &ctx) {
  const Type *g = ctx.tensor(0), *x = g ? ctx.tensor(1) : nullptr;
  if (!x)
    return Type::unknown();
  if (!require_float(ctx, *x))
    return Type::unknown();
  if (*g != *x)
    return ctx.fail("data_grad of type " + g->str() + " is not the data's type " + x->str());
  int64_t oh, ow;
  if (!pool_window(ctx, ctx.attrs_as<AvgPool2DAttrs>(), *x, oh, ow))
    return Type::unknown();
  return Type::tensor({x->shape[0], x->shape[1], oh, ow}, x->dtype);
}

/// The (OH, OW) of an adaptive pool of x.
std::pair<int64_t, int64_t> adaptive_extent(const AdaptivePool2DAttrs &a, const Shape &x) {
  if (!a.output_size || a.output_size->empty())
    return {x[2], x[3]};
  return {(*a.output_size)[0], a.output_size->back()};
}

Type adaptive_avg_pool2d_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  if (!require_float(ctx, *x))
    return Type::unknown();
  if (x->rank() != 4)
    return ctx.fail("expects NCHW data of rank 4, found " + x->str());
  auto a = ctx.attrs_as<AdaptivePool2DAttrs>();
  if (a.output_size && a.output_size->size() > 2)
    return ctx.fail_attr("output_size", "output_size expects 1 or 2 values, found " +
                                            std::to_string(a.output_size->size()));
  auto [oh, ow] = adaptive_extent(a, x->shape);
  return Type::tensor({x->shape[0], x->shape[1], oh, ow}, x->dtype);
}

Type adaptive_avg_pool2d_backward_rel(RelationCtx &ctx) {
  const Type *g = ctx.tensor(0), *x = g ? ctx.tensor(1) : nullptr;
  if (!x)
    return Type::unknown();
  std::vector<Type> fwd{*x};
  RelationCtx inner{ctx.op, fwd, ctx.attrs, "", 1};
  Type out = adaptive_avg_pool2d_rel(inner);
  if (!inner.error.empty()) {
    ctx.error = inner.error;
    return Type::unknown();
  }
  if (*g != out)
    return ctx.fail("output_grad of type " + g->str() + " is not the pool's output type " + out.str());
  return *x;
}

Type global_pool2d_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  if (!require_numeric(ctx, *x, "cast to a numeric dtype first"))
    return Type::unknown();
  if (x->rank() != 4)
    return ctx.fail("expects NCHW data of rank 4, found " + x->str());
  return Type::tensor({x->shape[0], x->shape[1], 1, 1}, x->dtype);
}

//===--- kernels ----------------------------------------------------------===//

/// The tap loops of window (oh, ow): body(kh, kw), Reduce loops in row-major
/// order, over the taps that can reach the data (PoolAxis::data_taps).
StmtPtr over_taps(const PoolAxis &h, const PoolAxis &w, const LExprPtr &oh, const LExprPtr &ow,
                  const std::function<StmtPtr(const Index &)> &body) {
  return loop_nest(
      {h.data_taps(), w.data_taps()},
      [&](const Index &j) {
        return body({h.data_tap(oh, j[0]), w.data_tap(ow, j[1])});
      },
      ForKind::Reduce, "k");
}

} // namespace

StmtPtr window_max(const KernelCtx &k, size_t data, const PoolAxis &h, const PoolAxis &w, const LExprPtr &n, const LExprPtr &c,
                   const LExprPtr &oh, const LExprPtr &ow, const BufferPtr &acc, const BufferPtr &arg) {
  LExprPtr zero = imm(0);
  DType dt = acc->dtype;
  std::vector<StmtPtr> init{store(acc, zero, lowest_of(dt))};
  if (arg)
    init.push_back(store(arg, zero, int_imm(-1, arg->dtype)));
  StmtPtr scan = over_taps(h, w, oh, ow, [&](const Index &t) {
    LExprPtr ih = h.at(oh, t[0]), iw = w.at(ow, t[1]);
    LExprPtr x = k.in(data, {n, c, clamp_index(ih, h.n), clamp_index(iw, w.n)});
    LExprPtr better = replaces_max(x, load(acc, zero), arg ? load(arg, zero) : nullptr);
    LExprPtr take = both(both(in_range(ih, 0, h.n), in_range(iw, 0, w.n)), better);
    std::vector<StmtPtr> then{store(acc, zero, x)};
    if (arg)
      then.push_back(store(arg, zero, cast(arg->dtype, add(mul(ih, imm(w.n)), iw))));
    return if_then(take, seq(then));
  });
  init.push_back(scan);
  return seq(init);
}

StmtPtr max_pool2d_kernel(KernelCtx &k) {
  auto a = k.attrs_as<MaxPool2DAttrs>();
  const Shape &xs = k.arg_type(0).shape, &os = k.call.type.shape;
  PoolAxis h(a, 0, xs[2]), w(a, 1, xs[3]);
  return loop_nest(os, [&](const Index &o) {
    BufferPtr acc = k.local("max", k.call.type.dtype);
    return alloc(acc, seq({window_max(k, 0, h, w, o[0], o[1], o[2], o[3], acc, nullptr),
                           k.put(o, flat_index(os, o), load(acc, imm(0)))}));
  });
}

LExprPtr avg_divisor(const AvgPool2DAttrs &a, const PoolAxis &h, const PoolAxis &w, const LExprPtr &oh,
                     const LExprPtr &ow, DType acc) {
  LExprPtr ch = a.count_include_pad ? h.taps_within(oh, -h.lo, h.n + h.hi) : h.taps_within(oh, 0, h.n);
  LExprPtr cw = a.count_include_pad ? w.taps_within(ow, -w.lo, w.n + w.hi) : w.taps_within(ow, 0, w.n);
  return cast(acc, binary(BinaryOp::Max, mul(ch, cw), imm(1)));
}

StmtPtr avg_pool2d_kernel(KernelCtx &k) {
  auto a = k.attrs_as<AvgPool2DAttrs>();
  const Shape &xs = k.arg_type(0).shape, &os = k.call.type.shape;
  PoolAxis h(a, 0, xs[2]), w(a, 1, xs[3]);
  DType dt = k.call.type.dtype, acc = dtype_info(dt).accumulator;
  return loop_nest(os, [&](const Index &o) {
    BufferPtr sum = k.local("sum", acc);
    LExprPtr zero = imm(0);
    StmtPtr scan = over_taps(h, w, o[2], o[3], [&](const Index &t) {
      LExprPtr ih = h.at(o[2], t[0]), iw = w.at(o[3], t[1]);
      LExprPtr x = cast(acc, k.in(0, {o[0], o[1], clamp_index(ih, h.n), clamp_index(iw, w.n)}));
      LExprPtr inside = both(in_range(ih, 0, h.n), in_range(iw, 0, w.n));
      return store(sum, zero, add(load(sum, zero), select(inside, x, constant_of(0, acc))));
    });
    LExprPtr mean = binary(BinaryOp::Div, load(sum, zero), avg_divisor(a, h, w, o[2], o[3], acc));
    return alloc(sum, seq({store(sum, zero, constant_of(0, acc)), scan,
                           k.put(o, flat_index(os, o), cast(dt, mean))}));
  });
}

namespace {

/// For data element (n, c, ih, iw): each window (oh, ow) that holds it at tap
/// (kh, kw), in tap order: body(oh, ow, valid). oh = (ih + lo - kh·d) / s
/// where that is whole and an output row (the taps visited: PoolAxis::window_taps).
StmtPtr over_windows_of(const PoolAxis &h, const PoolAxis &w, const LExprPtr &ih, const LExprPtr &iw,
                        const std::function<StmtPtr(const LExprPtr &, const LExprPtr &, const LExprPtr &)> &body) {
  return loop_nest(
      {h.window_taps(), w.window_taps()},
      [&](const Index &j) {
        LExprPtr valid;
        LExprPtr oh = h.window_holding(ih, h.window_tap(ih, j[0]), valid);
        LExprPtr ow = w.window_holding(iw, w.window_tap(iw, j[1]), valid);
        return body(oh, ow, valid);
      },
      ForKind::Reduce, "k");
}

/// Windows that never overlap (stride >= the dilated window, as the usual
/// 2 × 2 pool of stride 2): each data element is in at most one, so each
/// window writes its own taps, g at its first maximum and 0 elsewhere,
/// after the elements of no window are zeroed: one scan per window, where
/// gathering rescans every window of every element.
StmtPtr max_pool2d_backward_disjoint(KernelCtx &k, const PoolAxis &h, const PoolAxis &w) {
  const Shape &xs = k.arg_type(1).shape, &gs = k.arg_type(0).shape;
  DType dt = k.call.type.dtype;
  StmtPtr zero = loop_nest(xs, [&](const Index &i) { return store(k.out(), flat_index(xs, i), constant_of(0, dt)); });
  StmtPtr windows = loop_nest(gs, [&](const Index &o) {
    BufferPtr mx = k.local("max", dt), arg = k.local("arg", argmax_dtype(h, w));
    StmtPtr write = over_taps(h, w, o[2], o[3], [&](const Index &t) {
      LExprPtr ih = h.at(o[2], t[0]), iw = w.at(o[3], t[1]);
      LExprPtr inside = both(in_range(ih, 0, h.n), in_range(iw, 0, w.n));
      LExprPtr hit = compare(CompareOp::EQ, load(arg, imm(0)), cast(arg->dtype, add(mul(ih, imm(w.n)), iw)));
      // (clamped, as every index here: a store the verifier can bound)
      return if_then(inside, store(k.out(), flat_index(xs, {o[0], o[1], clamp_index(ih, h.n), clamp_index(iw, w.n)}),
                                   select(hit, k.in(0, o), constant_of(0, dt))));
    });
    return alloc(mx, alloc(arg, seq({window_max(k, 1, h, w, o[0], o[1], o[2], o[3], mx, arg), write})));
  });
  return seq({zero, windows});
}

} // namespace

/// Taps of a window up to which grad.max_pool2d_backward over disjoint
/// windows is computed element by element (2 x 2, 3 x 3 pools).
constexpr int64_t kMaxGatherTaps = 9;

/// Whether grad.max_pool2d_backward `call` is a gather, one output element
/// from its own window: windows that never overlap, of a few taps.
bool max_pool2d_backward_gathers(const Expr &call) {
  auto a = call_attrs<AvgPool2DAttrs>(call);
  const Shape &xs = call.args[1]->type.shape;
  PoolAxis h(a, 0, xs[2]), w(a, 1, xs[3]);
  return h.disjoint() && w.disjoint() && h.k * w.k <= kMaxGatherTaps;
}

/// dx[n, c, ih, iw] over disjoint windows: g of the one window holding
/// (ih, iw) where it is that window's argmax (window_max's: the first
/// maximum, or the last NaN), else 0. An element, not a kernel, so that it
/// fuses into its consumers (the relu's gradient before the pool: one
/// kernel, no zeroing pass, the pool's own adjoint never in memory).
LExprPtr max_pool2d_backward_element(ElementCtx &c) {
  auto a = c.attrs_as<AvgPool2DAttrs>();
  const Shape &xs = c.arg_type(1).shape;
  PoolAxis h(a, 0, xs[2]), w(a, 1, xs[3]);
  const Index &i = c.index;
  DType dt = c.type().dtype;
  LExprPtr yes = int_imm(1, DType::Bool), no = int_imm(0, DType::Bool);
  // the window holding the element along an axis, and the element's tap in it
  LExprPtr valid = yes;
  auto window = [&](const PoolAxis &ax, const LExprPtr &at, LExprPtr &tap) {
    LExprPtr num = add(at, imm(ax.lo)), r = fmod(num, ax.s), o = fdiv(num, ax.s);
    tap = fdiv(r, ax.d);
    valid = both(valid, both(both(compare(CompareOp::EQ, fmod(r, ax.d), imm(0)), compare(CompareOp::LT, tap, imm(ax.k))),
                             in_range(o, 0, ax.out)));
    return clamp_index(o, ax.out);
  };
  LExprPtr th, tw;
  LExprPtr oh = window(h, i[2], th), ow = window(w, i[3], tw);
  LExprPtr me = add(mul(th, imm(w.k)), tw);
  // the data at each tap (read once each: the element's own value is its tap's, so that a fused
  // producer of the data is computed once per tap, not once more)
  std::vector<LExprPtr> xs_at, inside_at;
  LExprPtr x;
  for (int64_t kh = 0; kh < h.k; ++kh)
    for (int64_t kw = 0; kw < w.k; ++kw) {
      LExprPtr ih = h.at(oh, imm(kh)), iw = w.at(ow, imm(kw));
      inside_at.push_back(both(in_range(ih, 0, h.n), in_range(iw, 0, w.n)));
      xs_at.push_back(c.in(1, {i[0], i[1], clamp_index(ih, h.n), clamp_index(iw, w.n)}));
      x = x ? select(compare(CompareOp::EQ, me, imm(kh * w.k + kw)), xs_at.back(), x) : xs_at.back();
    }
  auto nan = [](const LExprPtr &v) { return compare(CompareOp::NE, v, v); };
  // the first maximum: above every earlier tap, at least every later one; any NaN: the last NaN
  LExprPtr first_max = yes, any_nan = no, later_nan = no;
  for (int64_t tap = 0; tap < h.k * w.k; ++tap) {
    LExprPtr t = imm(tap), inside = inside_at[tap], xt = xs_at[tap];
    LExprPtr before = compare(CompareOp::LT, t, me), after = compare(CompareOp::GT, t, me);
    LExprPtr beats = select(before, compare(CompareOp::GT, x, xt), select(after, compare(CompareOp::GE, x, xt), yes));
    first_max = both(first_max, select(inside, beats, yes));
    any_nan = binary(BinaryOp::Or, any_nan, both(inside, nan(xt)));
    later_nan = binary(BinaryOp::Or, later_nan, both(both(inside, after), nan(xt)));
  }
  LExprPtr is_arg = select(any_nan, both(nan(x), select(later_nan, no, yes)), first_max);
  return select(both(valid, is_arg), c.in(0, {i[0], i[1], oh, ow}), constant_of(0, dt));
}

StmtPtr max_pool2d_backward_kernel(KernelCtx &k) {
  return max_pool2d_backward_from(
      k, max_pool2d_backward_disjoint, [](KernelCtx &k, const PoolAxis &h, const PoolAxis &w, const BufferPtr &argmax) {
        const Shape &gs = k.arg_type(0).shape;
        return loop_nest(gs, [&](const Index &o) {
          BufferPtr mx = k.local("max", k.call.type.dtype), arg = k.local("arg", argmax->dtype);
          return alloc(mx, alloc(arg, seq({window_max(k, 1, h, w, o[0], o[1], o[2], o[3], mx, arg),
                                           store(argmax, flat_index(gs, o), load(arg, imm(0)))})));
        });
      });
}

namespace {

/// out[n, c, oh, ow] = data_grad at the first maximum of window (oh, ow) of
/// data (0 for a window with no data): the adjoint of max_pool2d_backward's
/// scatter, which is linear in its output_grad.
StmtPtr max_pool2d_gather_kernel(KernelCtx &k) {
  auto a = k.attrs_as<AvgPool2DAttrs>();
  const Shape &xs = k.arg_type(1).shape, &os = k.call.type.shape;
  PoolAxis h(a, 0, xs[2]), w(a, 1, xs[3]);
  DType dt = k.call.type.dtype;
  return loop_nest(os, [&](const Index &o) {
    BufferPtr mx = k.local("max", dt), arg = k.local("arg", argmax_dtype(h, w));
    LExprPtr at = cast(DType::Int64, load(arg, imm(0))), found = compare(CompareOp::GE, at, imm(0));
    LExprPtr ih = clamp_index(fdiv(at, w.n), h.n), iw = clamp_index(fmod(at, w.n), w.n);
    LExprPtr picked = select(found, k.in(0, {o[0], o[1], ih, iw}), constant_of(0, dt));
    return alloc(mx, alloc(arg, seq({window_max(k, 1, h, w, o[0], o[1], o[2], o[3], mx, arg),
                                     store(k.out(), flat_index(os, o), picked)})));
  });
}

} // namespace

/// dx[n, c, ih, iw] = Σ over windows holding (ih, iw) of g / divisor.
StmtPtr avg_pool2d_backward_kernel(KernelCtx &k) {
  auto a = k.attrs_as<AvgPool2DAttrs>();
  const Shape &xs = k.arg_type(1).shape;
  PoolAxis h(a, 0, xs[2]), w(a, 1, xs[3]);
  DType dt = k.call.type.dtype, acc = dtype_info(dt).accumulator;
  return loop_nest(xs, [&](const Index &i) {
    BufferPtr sum = k.local("sum", acc);
    LExprPtr zero = imm(0);
    StmtPtr gather = over_windows_of(h, w, i[2], i[3], [&](const LExprPtr &oh, const LExprPtr &ow, const LExprPtr &valid) {
      LExprPtr g = binary(BinaryOp::Div, cast(acc, k.in(0, {i[0], i[1], oh, ow})), avg_divisor(a, h, w, oh, ow, acc));
      return store(sum, zero, add(load(sum, zero), select(valid, g, constant_of(0, acc))));
    });
    return alloc(sum, seq({store(sum, zero, constant_of(0, acc)), gather,
                           store(k.out(), flat_index(xs, i), cast(dt, load(sum, zero)))}));
  });
}

namespace {

/// Adaptive windows along one axis: [⌊o·n/m⌋, ⌈(o+1)·n/m⌉).
struct AdaptiveAxis {
  int64_t n, m;
  int64_t longest() const { return (n + m - 1) / m + 1; } // a bound on a window's length
  LExprPtr start(const LExprPtr &o) const { return fdiv(mul(o, imm(n)), m); }
  LExprPtr end(const LExprPtr &o) const { return sub(imm(0), fdiv(sub(imm(0), mul(add(o, imm(1)), imm(n))), m)); }
};

StmtPtr adaptive_avg_pool2d_kernel(KernelCtx &k) {
  const Shape &xs = k.arg_type(0).shape, &os = k.call.type.shape;
  AdaptiveAxis h{xs[2], os[2]}, w{xs[3], os[3]};
  DType dt = k.call.type.dtype, acc = dtype_info(dt).accumulator;
  return loop_nest(os, [&](const Index &o) {
    BufferPtr sum = k.local("sum", acc);
    LExprPtr zero = imm(0), h0 = h.start(o[2]), h1 = h.end(o[2]), w0 = w.start(o[3]), w1 = w.end(o[3]);
    StmtPtr scan = loop_nest(
        {h.longest(), w.longest()},
        [&](const Index &t) {
          LExprPtr ih = add(h0, t[0]), iw = add(w0, t[1]);
          LExprPtr inside = both(compare(CompareOp::LT, ih, h1), compare(CompareOp::LT, iw, w1));
          LExprPtr x = cast(acc, k.in(0, {o[0], o[1], clamp_index(ih, h.n), clamp_index(iw, w.n)}));
          return store(sum, zero, add(load(sum, zero), select(inside, x, constant_of(0, acc))));
        },
        ForKind::Reduce, "k");
    LExprPtr count = cast(acc, mul(sub(h1, h0), sub(w1, w0)));
    return alloc(sum, seq({store(sum, zero, constant_of(0, acc)), scan,
                           k.put(o, flat_index(os, o), cast(dt, binary(BinaryOp::Div, load(sum, zero), count)))}));
  });
}

/// dx[ih, iw] = Σ over the adaptive windows holding it of g / window size;
/// the window ⌊i·m/n⌋ holds i, and at most ⌈m/n⌉ + 1 others around it.
StmtPtr adaptive_avg_pool2d_backward_kernel(KernelCtx &k) {
  const Shape &gs = k.arg_type(0).shape, &xs = k.arg_type(1).shape;
  AdaptiveAxis h{xs[2], gs[2]}, w{xs[3], gs[3]};
  DType dt = k.call.type.dtype, acc = dtype_info(dt).accumulator;
  int64_t ch = (h.m + h.n - 1) / h.n + 2, cw = (w.m + w.n - 1) / w.n + 2; // candidates per axis, from one before
  return loop_nest(xs, [&](const Index &i) {
    BufferPtr sum = k.local("sum", acc);
    LExprPtr zero = imm(0);
    LExprPtr oh0 = sub(fdiv(mul(i[2], imm(h.m)), h.n), imm(1)), ow0 = sub(fdiv(mul(i[3], imm(w.m)), w.n), imm(1));
    StmtPtr gather = loop_nest(
        {ch, cw},
        [&](const Index &t) {
          LExprPtr oh = add(oh0, t[0]), ow = add(ow0, t[1]);
          LExprPtr ohc = clamp_index(oh, h.m), owc = clamp_index(ow, w.m);
          LExprPtr holds = both(both(in_range(oh, 0, h.m), in_range(ow, 0, w.m)),
                                both(both(compare(CompareOp::GE, i[2], h.start(ohc)), compare(CompareOp::LT, i[2], h.end(ohc))),
                                     both(compare(CompareOp::GE, i[3], w.start(owc)), compare(CompareOp::LT, i[3], w.end(owc)))));
          LExprPtr size = cast(acc, mul(sub(h.end(ohc), h.start(ohc)), sub(w.end(owc), w.start(owc))));
          LExprPtr g = binary(BinaryOp::Div, cast(acc, k.in(0, {i[0], i[1], ohc, owc})), size);
          return store(sum, zero, add(load(sum, zero), select(holds, g, constant_of(0, acc))));
        },
        ForKind::Reduce, "k");
    return alloc(sum, seq({store(sum, zero, constant_of(0, acc)), gather,
                           store(k.out(), flat_index(xs, i), cast(dt, load(sum, zero)))}));
  });
}

//===--- gradients and compositions ---------------------------------------===//

/// One per tap of every window.
template <class A> int64_t window_flops(const Expr &call) {
  auto a = call_attrs<A>(call);
  return num_elements(call.type.shape) * a.pool_size[0] * a.pool_size[1];
}

/// How many windows read each element of argument `Data` (the pooled data)
/// at most, per axis: the taps t with t·d ≡ r (mod s) for one residue r,
/// ⌈k / (s / gcd(s, d))⌉ of the k. The other arguments take no fused
/// producer: the gradients are read at a window's maximum or by flat offset.
template <class A, size_t Data> int64_t window_reads(const Expr &call, size_t arg) {
  if (arg != Data)
    return 0;
  auto a = call_attrs<A>(call);
  const Shape &xs = call.args[Data]->type.shape;
  int64_t reads = 1;
  for (int axis = 0; axis < 2; ++axis) {
    PoolAxis p(a, axis, xs[size_t(axis) + 2]);
    int64_t period = p.s / std::gcd(p.s, p.d);
    reads *= std::min(p.k, (p.k + period - 1) / period);
  }
  return reads;
}

constexpr const char *kPoolTypes = "%x: Tensor[(2, 3, 7, 6), float64]";
constexpr const char *kPoolBackwardTypes =
    "%g: Tensor[(2, 3, 4, 3), float64], %x: Tensor[(2, 3, 7, 6), float64]";

} // namespace

DType argmax_dtype(const PoolAxis &h, const PoolAxis &w) {
  return h.n * w.n <= std::numeric_limits<int32_t>::max() ? DType::Int32 : DType::Int64;
}

LExprPtr replaces_max(const LExprPtr &x, const LExprPtr &cur, const LExprPtr &arg) {
  // a later tap wins only if greater, or NaN; the first data tap always
  // wins (so a window of -inf still has an argmax)
  LExprPtr better = binary(BinaryOp::Or, compare(CompareOp::GT, x, cur), compare(CompareOp::NE, x, x));
  return arg ? binary(BinaryOp::Or, better, compare(CompareOp::LT, arg, int_imm(0, arg->dtype))) : better;
}

namespace {

/// Per (n, c) plane of the result (the data's shape), in parallel: the plane
/// zeroed, then each window's adjoint (argument 0, flat) added at its argmax
/// `argmax_at(flat window)` (none at -1), a plane's windows in row-major
/// order (deterministic sums).
StmtPtr scatter_at_argmax(KernelCtx &k, const PoolAxis &h, const PoolAxis &w,
                          const std::function<LExprPtr(const LExprPtr &)> &argmax_at) {
  const Shape &gs = k.arg_type(0).shape;
  DType dt = k.call.type.dtype;
  const BufferPtr &out = k.out();
  int64_t plane = h.n * w.n;
  return loop_nest({gs[0] * gs[1]}, [&](const Index &p) {
    LExprPtr base = mul(p[0], imm(plane));
    StmtPtr clear = loop_nest(
        {plane}, [&](const Index &i) { return store(out, add(base, i[0]), constant_of(0, dt)); }, ForKind::Spatial,
        "z");
    StmtPtr adds = loop_nest(
        {gs[2] * gs[3]},
        [&](const Index &o) {
          LExprPtr at = add(mul(p[0], imm(gs[2] * gs[3])), o[0]);
          LExprPtr m = cast(DType::Int64, argmax_at(at)), dst = add(base, clamp_index(m, plane));
          return if_then(compare(CompareOp::GE, m, imm(0)), store(out, dst, add(load(out, dst), k.in_flat(0, at))));
        },
        ForKind::Reduce, "w");
    return seq({clear, adds});
  }, ForKind::Spatial, "p");
}

} // namespace

/// dx[n, c, ih, iw] = Σ over windows whose first maximum is (ih, iw) of g.
/// Overlapping windows (3 × 3 of stride 2): first each window's first
/// maximum, the forward's scan, into kernel scratch (flat ih·W + iw, -1 for
/// a window without data); then per (n, c) plane, the plane zeroed and each
/// window's g added at its maximum, windows in row-major order (a plane's
/// windows one after another, the planes in parallel). Where rescanning
/// every window of every element cost ⌈k/s⌉² window scans per element
/// (resnet18's pool: 8× the forward), this is the forward's scan and one
/// add per window.
StmtPtr max_pool2d_backward_from(KernelCtx &k, const MaxPoolDisjoint &disjoint, const MaxPoolArgmax &argmax_of) {
  auto a = k.attrs_as<AvgPool2DAttrs>();
  const Shape &xs = k.arg_type(1).shape, &gs = k.arg_type(0).shape;
  PoolAxis h(a, 0, xs[2]), w(a, 1, xs[3]);
  if (h.disjoint() && w.disjoint())
    return disjoint(k, h, w);
  BufferPtr argmax = k.scratch("argmax", argmax_dtype(h, w), num_elements(gs));
  return seq({argmax_of(k, h, w, argmax),
              scatter_at_argmax(k, h, w, [&](const LExprPtr &at) { return load(argmax, at); })});
}

StmtPtr max_pool2d_argmax_kernel(KernelCtx &k) {
  auto a = k.attrs_as<MaxPool2DAttrs>();
  const Shape &xs = k.arg_type(0).shape, &os = k.call.type.shape;
  PoolAxis h(a, 0, xs[2]), w(a, 1, xs[3]);
  return loop_nest(os, [&](const Index &o) {
    BufferPtr mx = k.local("max", k.arg_type(0).dtype), arg = k.local("arg", k.call.type.dtype);
    return alloc(mx, alloc(arg, seq({window_max(k, 0, h, w, o[0], o[1], o[2], o[3], mx, arg),
                                     store(k.out(), flat_index(os, o), load(arg, imm(0)))})));
  });
}

namespace {

//===--- the gradient through the argmax -----------------------------------===//

/// The pooled data's windows, for grad.max_pool2d_unpool.
std::pair<PoolAxis, PoolAxis> unpool_axes(const MaxUnpool2DAttrs &a) {
  return {PoolAxis(a, 0, a.data_size[0]), PoolAxis(a, 1, a.data_size[1])};
}

/// Whether grad.max_pool2d_unpool `call` is a gather, each element from the
/// one window that can hold it: windows that never overlap.
bool max_pool2d_unpool_gathers(const Expr &call) {
  auto [h, w] = unpool_axes(call_attrs<MaxUnpool2DAttrs>(call));
  return h.disjoint() && w.disjoint();
}

/// dx[n, c, ih, iw] over disjoint windows: g of window o = (i + lo) / s
/// (clamped into the output) where its argmax is (ih, iw), else 0. No
/// other window can hold the element, and where this one does not (a gap
/// between dilated taps, rows past the last window) its argmax is another
/// element. One select reading the window's argmax and adjoint once each:
/// cheap enough for the fusion pass to recompute in each of its users.
LExprPtr max_pool2d_unpool_element(ElementCtx &c) {
  auto [h, w] = unpool_axes(c.attrs_as<MaxUnpool2DAttrs>());
  const Index &i = c.index;
  Index o{i[0], i[1], clamp_index(fdiv(add(i[2], imm(h.lo)), h.s), h.out),
          clamp_index(fdiv(add(i[3], imm(w.lo)), w.s), w.out)};
  LExprPtr hit = compare(CompareOp::EQ, cast(DType::Int64, c.in(1, o)), add(mul(i[2], imm(w.n)), i[3]));
  return select(hit, c.in(0, o), constant_of(0, c.type().dtype));
}

/// Overlapping windows: per plane, zeroed, each window's g added at its argmax.
StmtPtr max_pool2d_unpool_kernel(KernelCtx &k) {
  auto [h, w] = unpool_axes(k.attrs_as<MaxUnpool2DAttrs>());
  return scatter_at_argmax(k, h, w, [&](const LExprPtr &at) { return k.in_flat(1, at); });
}

/// out[n, c, oh, ow] = data_grad at window (oh, ow)'s argmax, 0 where it
/// has none (-1).
LExprPtr max_pool2d_take_element(ElementCtx &c) {
  auto a = c.attrs_as<MaxPool2DAttrs>();
  const Shape &xs = c.arg_type(0).shape;
  PoolAxis h(a, 0, xs[2]), w(a, 1, xs[3]);
  const Index &o = c.index;
  LExprPtr m = cast(DType::Int64, c.in(1, o)), mc = clamp_index(m, h.n * w.n), ih = fdiv(mc, w.n);
  return select(compare(CompareOp::GE, m, imm(0)), c.in(0, {o[0], o[1], ih, sub(mc, mul(ih, imm(w.n)))}),
                constant_of(0, c.type().dtype));
}

/// grad.max_pool2d_argmax(data): the pool's output shape, int32 where a
/// plane's flat indices fit (argmax_dtype).
Type max_pool2d_argmax_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  if (!require_numeric(ctx, *x, "cast to a numeric dtype first"))
    return Type::unknown();
  auto a = ctx.attrs_as<MaxPool2DAttrs>();
  int64_t oh, ow;
  if (!pool_window(ctx, a, *x, oh, ow))
    return Type::unknown();
  return Type::tensor({x->shape[0], x->shape[1], oh, ow},
                      argmax_dtype(PoolAxis(a, 0, x->shape[2]), PoolAxis(a, 1, x->shape[3])));
}

bool index_dtype(DType dt) { return dt == DType::Int32 || dt == DType::Int64; }

/// grad.max_pool2d_unpool(output_grad, argmax): (N, C, data_size) of
/// output_grad's dtype; output_grad is the pool's output for such data and
/// argmax of its shape.
Type max_pool2d_unpool_rel(RelationCtx &ctx) {
  const Type *g = ctx.tensor(0), *m = g ? ctx.tensor(1) : nullptr;
  if (!m)
    return Type::unknown();
  if (!require_float(ctx, *g))
    return Type::unknown();
  if (g->rank() != 4)
    return ctx.fail("expects an NCHW output_grad of rank 4, found " + g->str());
  auto a = ctx.attrs_as<MaxUnpool2DAttrs>();
  Type data = Type::tensor({g->shape[0], g->shape[1], a.data_size[0], a.data_size[1]}, g->dtype);
  int64_t oh, ow;
  if (!pool_window(ctx, a, data, oh, ow))
    return Type::unknown();
  Type expect = Type::tensor({g->shape[0], g->shape[1], oh, ow}, g->dtype);
  if (*g != expect)
    return ctx.fail("output_grad of type " + g->str() + " is not the pool's output type " + expect.str() +
                    " for data of " + data.str());
  if (!index_dtype(m->dtype) || m->shape != g->shape)
    return ctx.fail("argmax of type " + m->str() + " is not an int32 or int64 tensor of output_grad's shape");
  return data;
}

/// grad.max_pool2d_take(data_grad, argmax): the pool's output type.
Type max_pool2d_take_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0), *m = x ? ctx.tensor(1) : nullptr;
  if (!m)
    return Type::unknown();
  if (!require_float(ctx, *x))
    return Type::unknown();
  int64_t oh, ow;
  if (!pool_window(ctx, ctx.attrs_as<MaxPool2DAttrs>(), *x, oh, ow))
    return Type::unknown();
  Type out = Type::tensor({x->shape[0], x->shape[1], oh, ow}, x->dtype);
  if (!index_dtype(m->dtype) || m->shape != out.shape)
    return ctx.fail("argmax of type " + m->str() + " is not an int32 or int64 tensor of the pool's output shape " +
                    shape_str(out.shape));
  return out;
}

/// The backward operators take every pooling attribute (Relax's signature).
AvgPool2DAttrs backward_attrs(const Pool2DAttrs &a) {
  AvgPool2DAttrs b;
  static_cast<Pool2DAttrs &>(b) = a;
  return b;
}

MaxUnpool2DAttrs unpool_attrs(const Pool2DAttrs &a, const Shape &data) {
  MaxUnpool2DAttrs u;
  static_cast<Pool2DAttrs &>(u) = a;
  u.data_size = {data[2], data[3]};
  return u;
}

MaxPool2DAttrs pool_attrs(const Pool2DAttrs &a) {
  MaxPool2DAttrs p;
  static_cast<Pool2DAttrs &>(p) = a;
  return p;
}

} // namespace

void register_pool_ops(OpRegistry &reg) {
  reg.add("nn.max_pool2d")
      .describe("2-D max pooling over NCHW data (padding ignored; ties: the first maximum).")
      .arg("data", "Tensor[(N, C, H, W)]", "The input.")
      .attrs<MaxPool2DAttrs>()
      .support_level(2)
      .relation("MaxPool2D", pool2d_rel<MaxPool2DAttrs>)
      // Each window's adjoint to its first maximum. Where no two windows overlap, the argmax is a
      // value of its own (grad.max_pool2d_argmax, a quarter of a 2 x 2 pool's data in int32) and
      // the unpooling an element, which fuses into the relu's gradient; where memory is short, it
      // is recomputed inside each of the batch norm's gradient kernels instead (lean fusion,
      // transform/Fuse.h), never in memory at the data's size, and the last may write over the
      // pool's data, which nothing reads at a neighbour's index any more (vgg11_bn's remat at
      // half its peak). Overlapping windows scatter (grad.max_pool2d_backward, its argmax in the
      // kernel's scratch): split there, the argmax and the scatter cost 1-4% more on resnet18
      // and googlenet.
      .gradient([](GradCtx &g) -> Grads {
        auto a = g.attrs_as<MaxPool2DAttrs>();
        const Shape &xs = g.arg(0)->type.shape;
        if (!PoolAxis(a, 0, xs[2]).disjoint() || !PoolAxis(a, 1, xs[3]).disjoint())
          return {g.b.call(ops::max_pool2d_backward, {g.grad, g.arg(0)}, backward_attrs(a))};
        ExprPtr argmax = g.b.call(ops::max_pool2d_argmax, {g.arg(0)}, a);
        return {g.b.call(ops::max_pool2d_unpool, {g.grad, argmax}, unpool_attrs(a, xs))};
      })
      .kernel(max_pool2d_kernel)
      .fuses_epilogue()
      .fuses_producers(window_reads<MaxPool2DAttrs, 0>) // relu(batch norm) before a pool: never in memory
      .flops(window_flops<MaxPool2DAttrs>)
      .example(kPoolTypes, "nn.max_pool2d(%x, pool_size=[3, 2], strides=[2, 2], padding=[1, 0])")
      .example(kPoolTypes, "nn.max_pool2d(%x, pool_size=2, strides=2, dilation=[2, 1], ceil_mode=True)");

  reg.add("nn.avg_pool2d")
      .describe("2-D average pooling over NCHW data.")
      .arg("data", "Tensor[(N, C, H, W)]", "The input.")
      .attrs<AvgPool2DAttrs>()
      .support_level(2)
      .relation("AvgPool2D", pool2d_rel<AvgPool2DAttrs>)
      .gradient([](GradCtx &g) -> Grads {
        return {g.b.call(ops::avg_pool2d_backward, {g.grad, g.arg(0)}, g.attrs_as<AvgPool2DAttrs>())};
      })
      .kernel(avg_pool2d_kernel)
      .fuses_epilogue()
      .flops(window_flops<AvgPool2DAttrs>)
      .example(kPoolTypes, "nn.avg_pool2d(%x, pool_size=[3, 3], strides=[2, 2], padding=[1, 2], count_include_pad=True)")
      .example(kPoolTypes, "nn.avg_pool2d(%x, pool_size=[3, 2], strides=2, padding=[1, 1, 0, 1], ceil_mode=True)");

  reg.add("grad.max_pool2d_backward")
      .describe("The gradient of nn.max_pool2d: each window's adjoint to its first maximum.")
      .arg("output_grad", "Tensor[(N, C, OH, OW)]", "The adjoint of the pool's output.")
      .arg("data", "Tensor[(N, C, H, W)]", "The pool's input.")
      .attrs<AvgPool2DAttrs>()
      .support_level(10)
      .relation("MaxPool2DBackward", pool2d_backward_rel<AvgPool2DAttrs>)
      // Linear in output_grad with the argmax fixed by data (piecewise
      // constant in it): <G, backward(og, x)> = <gather(G, x), og>.
      .gradient([](GradCtx &g) -> Grads {
        return {g.b.call(ops::max_pool2d_gather, {g.grad, g.arg(1)}, g.attrs_as<AvgPool2DAttrs>()), nullptr};
      })
      .kernel(max_pool2d_backward_kernel)
      .element(max_pool2d_backward_element, max_pool2d_backward_gathers)
      .fuses_producers(window_reads<AvgPool2DAttrs, 1>)
      .example(kPoolBackwardTypes, "grad.max_pool2d_backward(%g, %x, pool_size=[3, 2], strides=[2, 2], padding=[1, 0])")
      // disjoint windows: an element each (max_pool2d_backward_element)
      .example("%g: Tensor[(2, 3, 3, 3), float64], %x: Tensor[(2, 3, 7, 6), float64]",
               "grad.max_pool2d_backward(%g, %x, pool_size=2, strides=2)")
      .example("%g: Tensor[(2, 3, 2, 2), float64], %x: Tensor[(2, 3, 7, 6), float64]",
               "grad.max_pool2d_backward(%g, %x, pool_size=[2, 3], strides=[3, 3], padding=[1, 0, 0, 2], dilation=[2, 1])");

  reg.add("grad.max_pool2d_gather")
      .describe("The adjoint of grad.max_pool2d_backward: data_grad read at each window's first maximum of data.")
      .arg("data_grad", "Tensor[(N, C, H, W)]", "A tensor of the data's type.")
      .arg("data", "Tensor[(N, C, H, W)]", "The pool's input (its windows' argmax).")
      .attrs<AvgPool2DAttrs>()
      .support_level(10)
      .relation("MaxPool2DGather", max_pool2d_gather_rel)
      .gradient([](GradCtx &g) -> Grads { // the scatter and the gather are each other's adjoints
        return {g.b.call(ops::max_pool2d_backward, {g.grad, g.arg(1)}, g.attrs_as<AvgPool2DAttrs>()), nullptr};
      })
      .kernel(max_pool2d_gather_kernel)
      .fuses_producers(window_reads<AvgPool2DAttrs, 1>)
      .example("%g: Tensor[(2, 3, 7, 6), float64], %x: Tensor[(2, 3, 7, 6), float64]",
               "grad.max_pool2d_gather(%g, %x, pool_size=[3, 2], strides=[2, 2], padding=[1, 0])");

  reg.add("grad.max_pool2d_argmax")
      .describe("Each window's first maximum of nn.max_pool2d, as its flat ih·W + iw in the plane (-1: no data).")
      .notes("int32 where every flat index of a plane fits, else int64. The taps are scanned in row-major "
             "order: the first maximum wins, a NaN is a maximum (the last NaN), and a window of -inf has its "
             "first tap inside the data. Over windows that never overlap, nn.max_pool2d's gradient is "
             "grad.max_pool2d_unpool of its adjoint at these positions.")
      .arg("data", "Tensor[(N, C, H, W)]", "The pool's input.")
      .attrs<MaxPool2DAttrs>()
      .support_level(10)
      .relation("MaxPool2DArgmax", max_pool2d_argmax_rel)
      .no_gradient()
      .kernel(max_pool2d_argmax_kernel)
      .fuses_producers(window_reads<MaxPool2DAttrs, 0>); // relu(batch norm) before the pool, as the pool's

  // The argmax operands below are grad.max_pool2d_argmax's values: each a tap of its window inside
  // the data, or -1. Any other value is read and written inside the plane, but where its window's
  // adjoint goes is unspecified (the kernels do not spend a check per window on it).
  constexpr const char *kArgmaxContract =
      "argmax holds grad.max_pool2d_argmax's values (a tap of each window inside the data, or -1 for a "
      "window without data); for other values every access stays inside the plane, but the result is "
      "unspecified.";
  reg.add("grad.max_pool2d_unpool")
      .describe("The gradient of nn.max_pool2d: each window's adjoint added at its argmax, 0 elsewhere.")
      .notes(std::string("Where no two windows overlap, an element of the result is one select of its window's "
                         "argmax and adjoint (fused into its users, or recomputed in each); else each plane is "
                         "zeroed and its windows' adjoints added in row-major order. ") +
             kArgmaxContract)
      .arg("output_grad", "Tensor[(N, C, OH, OW)]", "The adjoint of the pool's output.")
      .arg("argmax", "Tensor[(N, C, OH, OW)] of int32 or int64", "grad.max_pool2d_argmax of the pool's input.")
      .attrs<MaxUnpool2DAttrs>()
      .support_level(10)
      .relation("MaxPool2DUnpool", max_pool2d_unpool_rel)
      // linear in output_grad, with grad.max_pool2d_take its adjoint; none for the integer argmax
      .gradient([](GradCtx &g) -> Grads {
        return {g.b.call(ops::max_pool2d_take, {g.grad, g.arg(1)}, pool_attrs(g.attrs_as<MaxUnpool2DAttrs>())),
                nullptr};
      })
      .kernel(max_pool2d_unpool_kernel)
      .element(max_pool2d_unpool_element, max_pool2d_unpool_gathers)
      .replicates() // each window's argmax and adjoint read at each of its taps
      .example("%g: Tensor[(2, 3, 4, 3), float64], %x: Tensor[(2, 3, 7, 6), float64]",
               "grad.max_pool2d_unpool(%g, grad.max_pool2d_argmax(%x, pool_size=[3, 2], strides=[2, 2], padding=[1, 0]), "
               "pool_size=[3, 2], strides=[2, 2], padding=[1, 0], data_size=[7, 6])")
      // disjoint windows: an element each
      .example("%g: Tensor[(2, 3, 2, 2), float64], %x: Tensor[(2, 3, 7, 6), float64]",
               "grad.max_pool2d_unpool(%g, grad.max_pool2d_argmax(%x, pool_size=[2, 3], strides=[3, 3], "
               "padding=[1, 0, 0, 2], dilation=[2, 1]), pool_size=[2, 3], strides=[3, 3], padding=[1, 0, 0, 2], "
               "dilation=[2, 1], data_size=[7, 6])");

  reg.add("grad.max_pool2d_take")
      .describe("The adjoint of grad.max_pool2d_unpool: data_grad read at each window's argmax (0 for -1).")
      .notes(kArgmaxContract)
      .arg("data_grad", "Tensor[(N, C, H, W)]", "A tensor of the pooled data's type.")
      .arg("argmax", "Tensor[(N, C, OH, OW)] of int32 or int64", "grad.max_pool2d_argmax of the pool's input.")
      .attrs<MaxPool2DAttrs>()
      .support_level(10)
      .relation("MaxPool2DTake", max_pool2d_take_rel)
      .gradient([](GradCtx &g) -> Grads { // the unpooling and the take are each other's adjoints
        return {g.b.call(ops::max_pool2d_unpool, {g.grad, g.arg(1)},
                         unpool_attrs(g.attrs_as<MaxPool2DAttrs>(), g.arg(0)->type.shape)),
                nullptr};
      })
      .element(max_pool2d_take_element)
      .example("%d: Tensor[(2, 3, 7, 6), float64], %x: Tensor[(2, 3, 7, 6), float64]",
               "grad.max_pool2d_take(%d, grad.max_pool2d_argmax(%x, pool_size=[3, 2], strides=[2, 2], padding=[1, 0]), "
               "pool_size=[3, 2], strides=[2, 2], padding=[1, 0])");

  reg.add("grad.avg_pool2d_backward")
      .describe("The gradient of nn.avg_pool2d: each window's adjoint spread over its taps.")
      .arg("output_grad", "Tensor[(N, C, OH, OW)]", "The adjoint of the pool's output.")
      .arg("data", "Tensor[(N, C, H, W)]", "The pool's input (its shape only).")
      .attrs<AvgPool2DAttrs>()
      .support_level(10)
      .relation("AvgPool2DBackward", pool2d_backward_rel<AvgPool2DAttrs>)
      // Linear in output_grad and its adjoint: <G, B(og)> = <avg_pool(G), og>.
      .gradient([](GradCtx &g) -> Grads {
        return {g.b.call(ops::avg_pool2d, {g.grad}, g.attrs_as<AvgPool2DAttrs>()), nullptr};
      })
      .kernel(avg_pool2d_backward_kernel)
      .example(kPoolBackwardTypes,
               "grad.avg_pool2d_backward(%g, %x, pool_size=[3, 2], strides=[2, 2], padding=[1, 0], count_include_pad=True)");

  reg.add("nn.global_avg_pool2d")
      .describe("The mean of each (N, C) plane, as (N, C, 1, 1).")
      .arg("data", "Tensor[(N, C, H, W)]", "The input.")
      .attrs<GlobalPool2DAttrs>()
      .support_level(2)
      .relation("GlobalPool2D", global_pool2d_rel)
      .decompose([](Builder &b, const std::vector<ExprPtr> &a, const Attrs &) {
        ReduceAttrs m;
        m.axis = std::vector<int64_t>{2, 3};
        m.keepdims = true;
        return b.call(ops::mean, {a[0]}, m);
      })
      .example(kPoolTypes, "nn.global_avg_pool2d(%x)");

  reg.add("nn.global_max_pool2d")
      .describe("The maximum of each (N, C) plane, as (N, C, 1, 1) (gradient: the first maximum).")
      .arg("data", "Tensor[(N, C, H, W)]", "The input.")
      .attrs<GlobalPool2DAttrs>()
      .support_level(2)
      .relation("GlobalPool2D", global_pool2d_rel)
      .decompose([](Builder &b, const std::vector<ExprPtr> &a, const Attrs &) {
        MaxPool2DAttrs p;
        p.pool_size = {a[0]->type.shape[2], a[0]->type.shape[3]};
        return b.call(ops::max_pool2d, {a[0]}, p);
      })
      .example(kPoolTypes, "nn.global_max_pool2d(%x)");

  reg.add("nn.adaptive_avg_pool2d")
      .describe("Average pooling to a fixed (OH, OW): window i spans [⌊i·H/OH⌋, ⌈(i+1)·H/OH⌉).")
      .arg("data", "Tensor[(N, C, H, W)]", "The input.")
      .attrs<AdaptivePool2DAttrs>()
      .support_level(2)
      .relation("AdaptivePool2D", adaptive_avg_pool2d_rel)
      .gradient([](GradCtx &g) -> Grads {
        return {g.b.call(ops::adaptive_avg_pool2d_backward, {g.grad, g.arg(0)}, g.attrs())};
      })
      .kernel(adaptive_avg_pool2d_kernel)
      .fuses_epilogue()
      .example(kPoolTypes, "nn.adaptive_avg_pool2d(%x, output_size=[3, 4])")
      .example(kPoolTypes, "nn.adaptive_avg_pool2d(%x, output_size=5)");

  reg.add("grad.adaptive_avg_pool2d_backward")
      .describe("The gradient of nn.adaptive_avg_pool2d.")
      .arg("output_grad", "Tensor[(N, C, OH, OW)]", "The adjoint of the pool's output.")
      .arg("data", "Tensor[(N, C, H, W)]", "The pool's input (its shape only).")
      .attrs<AdaptivePool2DAttrs>()
      .support_level(10)
      .relation("AdaptivePool2DBackward", adaptive_avg_pool2d_backward_rel)
      .gradient([](GradCtx &g) -> Grads { // linear: <G, B(og)> = <adaptive_avg_pool(G), og>
        return {g.b.call(ops::adaptive_avg_pool2d, {g.grad}, g.attrs()), nullptr};
      })
      .kernel(adaptive_avg_pool2d_backward_kernel)
      .example("%g: Tensor[(2, 3, 3, 4), float64], %x: Tensor[(2, 3, 7, 6), float64]",
               "grad.adaptive_avg_pool2d_backward(%g, %x, output_size=[3, 4])");
}

} // namespace gradc
