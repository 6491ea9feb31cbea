//===- cpu/pool.cpp - the CPU's max pools -----------------------------------===//
//
// The CPU strategies of nn.max_pool2d, grad.max_pool2d_argmax and
// grad.max_pool2d_backward (their definitions: pool.cpp). The generic
// kernels scan one window at a time,
// each tap a branch on whether it is the maximum so far: on data without
// order that branch is a coin toss, and googlenet's 3 × 3 pools of stride 1
// spent a quarter of its training step mispredicting it. Here an output
// row's windows run side by side: the taps outside, the row's windows
// inside, each window's maximum and argmax kept in a row of locals and
// replaced by a select, not a branch, so the inner loop vectorizes. Windows
// that read no padding (PoolAxis::whole_windows) load without a guard; the
// few at the row's ends keep the generic kernel's guard and clamp. Each
// window still visits its taps in row-major order, so the maximum, its
// first argmax and the NaN rule are the generic kernel's, bit for bit.
//
//===----------------------------------------------------------------------===//
#include "Cpu.h"
#include "../pool.h"
#include "gradc/op/Registry.h"

namespace gradc {
namespace {

/// The longest output row kept in locals (a maximum and an argmax per
/// window, on the thread's stack: 12 KiB at most, with float64 data);
/// longer rows take the generic kernels (a row of 1.5 million windows
/// overflowed the stack).
constexpr int64_t kMaxRowWindows = 1024;

/// The windows of output row `oh` of plane (n, c) of argument `data`:
/// body(ow, tap) per window ow of columns [first, last) and tap (kh, kw)
/// that can reach the data, with `tap` the tap's data position (ih, iw) and
/// whether it lies inside (null where it always does: the row's whole
/// windows). The taps are the outer loops (row-major), ow the inner one.
StmtPtr over_row_taps(const PoolAxis &h, const PoolAxis &w, const LExprPtr &oh,
                      const std::function<StmtPtr(const LExprPtr &ow, const LExprPtr &ih, const LExprPtr &iw,
                                                  const LExprPtr &inside)> &body) {
  auto [whole_first, whole_last] = w.whole_windows();
  return loop_nest(
      {h.data_taps()},
      [&](const Index &th) {
        LExprPtr ih = h.at(oh, h.data_tap(oh, th[0]));
        StmtPtr columns = loop_nest(
            {w.data_taps()},
            [&](const Index &tw) {
              return over_inside_run(whole_first, whole_last, w.out, "ow", [&](const LExprPtr &ow, bool whole) {
                LExprPtr iw = w.at(ow, w.data_tap(ow, tw[0]));
                return body(ow, ih, iw, whole ? nullptr : in_range(iw, 0, w.n));
              });
            },
            ForKind::Reduce, "kw");
        return if_then(in_range(ih, 0, h.n), columns); // the same for the whole row
      },
      ForKind::Reduce, "kh");
}

/// mx[ow] = the maximum of window (oh, ow) of plane (n, c) of argument
/// `data`, for the whole output row; with `arg`, arg[ow] = the flat ih·W + iw
/// of its first maximum (-1 when the window holds no data): window_max's
/// results, a row at a time.
StmtPtr row_max(const KernelCtx &k, size_t data, const PoolAxis &h, const PoolAxis &w, const LExprPtr &n,
                const LExprPtr &c, const LExprPtr &oh, const BufferPtr &mx, const BufferPtr &arg) {
  DType dt = mx->dtype;
  StmtPtr init = loop_nest(
      {w.out},
      [&](const Index &ow) {
        StmtPtr lowest = store(mx, ow[0], lowest_of(dt));
        return arg ? seq({lowest, store(arg, ow[0], int_imm(-1, arg->dtype))}) : lowest;
      },
      ForKind::Spatial, "ow");
  StmtPtr scan = over_row_taps(h, w, oh, [&](const LExprPtr &ow, const LExprPtr &ih, const LExprPtr &iw,
                                             const LExprPtr &inside) {
    LExprPtr x = k.in(data, {n, c, clamp_index(ih, h.n), inside ? clamp_index(iw, w.n) : iw});
    LExprPtr take = replaces_max(x, load(mx, ow), arg ? load(arg, ow) : nullptr);
    if (inside)
      take = both(inside, take);
    StmtPtr keep = store(mx, ow, select(take, x, load(mx, ow)));
    if (!arg)
      return keep;
    // the argmax first: it reads the maximum before this tap
    return seq({store(arg, ow, select(take, cast(arg->dtype, add(mul(ih, imm(w.n)), iw)), load(arg, ow))), keep});
  });
  return seq({init, scan});
}

/// Every output row (n, c, oh) of the output grad's or the output's shape
/// `os`, in parallel: body(n, c, oh).
StmtPtr over_rows(const Shape &os, const std::function<StmtPtr(const LExprPtr &, const LExprPtr &, const LExprPtr &)> &body) {
  int64_t C = os[1], OH = os[2];
  return loop_nest({os[0] * C * OH}, [&](const Index &r) {
    LExprPtr plane = binary(BinaryOp::FloorDiv, r[0], imm(OH));
    return body(binary(BinaryOp::FloorDiv, plane, imm(C)), binary(BinaryOp::FloorMod, plane, imm(C)),
                binary(BinaryOp::FloorMod, r[0], imm(OH)));
  }, ForKind::Spatial, "r");
}

StmtPtr cpu_max_pool2d(KernelCtx &k) {
  auto a = k.attrs_as<MaxPool2DAttrs>();
  const Shape &xs = k.arg_type(0).shape, &os = k.call.type.shape;
  PoolAxis h(a, 0, xs[2]), w(a, 1, xs[3]);
  if (w.out > kMaxRowWindows)
    return max_pool2d_kernel(k);
  return over_rows(os, [&](const LExprPtr &n, const LExprPtr &c, const LExprPtr &oh) {
    BufferPtr mx = k.local("max", k.call.type.dtype, w.out);
    StmtPtr out = loop_nest(
        {w.out},
        [&](const Index &ow) {
          Index o{n, c, oh, ow[0]};
          return k.put(o, flat_index(os, o), load(mx, ow[0]));
        },
        ForKind::Spatial, "ow");
    return alloc(mx, seq({row_max(k, 0, h, w, n, c, oh, mx, nullptr), out}));
  });
}

/// Windows that never overlap (MaxPoolDisjoint): the data zeroed, then per
/// output row its argmax, and each tap of the row's windows written, g at
/// the window's first maximum and 0 elsewhere (pool.cpp's disjoint kernel,
/// a row at a time).
StmtPtr max_pool2d_backward_disjoint(KernelCtx &k, const PoolAxis &h, const PoolAxis &w) {
  const Shape &xs = k.arg_type(1).shape, &gs = k.arg_type(0).shape;
  DType dt = k.call.type.dtype;
  StmtPtr zero = loop_nest(xs, [&](const Index &i) { return store(k.out(), flat_index(xs, i), constant_of(0, dt)); });
  StmtPtr rows = over_rows(gs, [&](const LExprPtr &n, const LExprPtr &c, const LExprPtr &oh) {
    BufferPtr mx = k.local("max", dt, w.out), arg = k.local("arg", argmax_dtype(h, w), w.out);
    StmtPtr write = over_row_taps(h, w, oh, [&](const LExprPtr &ow, const LExprPtr &ih, const LExprPtr &iw,
                                                const LExprPtr &inside) {
      LExprPtr hit = compare(CompareOp::EQ, load(arg, ow), cast(arg->dtype, add(mul(ih, imm(w.n)), iw)));
      StmtPtr put = store(k.out(), flat_index(xs, {n, c, clamp_index(ih, h.n), inside ? clamp_index(iw, w.n) : iw}),
                          select(hit, k.in(0, {n, c, oh, ow}), constant_of(0, dt)));
      return inside ? if_then(inside, put) : put;
    });
    return alloc(mx, alloc(arg, seq({row_max(k, 1, h, w, n, c, oh, mx, arg), write})));
  });
  return seq({zero, rows});
}

/// Each window's first maximum of argument `data`, a row at a time, into
/// `argmax` (of the windows' shape `os`).
StmtPtr row_argmax(KernelCtx &k, size_t data, const Shape &os, const PoolAxis &h, const PoolAxis &w,
                   const BufferPtr &argmax) {
  return over_rows(os, [&](const LExprPtr &n, const LExprPtr &c, const LExprPtr &oh) {
    BufferPtr mx = k.local("max", k.arg_type(data).dtype, w.out), arg = k.local("arg", argmax->dtype, w.out);
    StmtPtr keep = loop_nest(
        {w.out},
        [&](const Index &ow) { return store(argmax, flat_index(os, {n, c, oh, ow[0]}), load(arg, ow[0])); },
        ForKind::Spatial, "ow");
    return alloc(mx, alloc(arg, seq({row_max(k, data, h, w, n, c, oh, mx, arg), keep})));
  });
}

StmtPtr cpu_max_pool2d_backward(KernelCtx &k) {
  if (k.arg_type(0).shape[3] > kMaxRowWindows)
    return max_pool2d_backward_kernel(k);
  return max_pool2d_backward_from(
      k, max_pool2d_backward_disjoint, [](KernelCtx &k, const PoolAxis &h, const PoolAxis &w, const BufferPtr &argmax) {
        return row_argmax(k, 1, k.arg_type(0).shape, h, w, argmax);
      });
}

StmtPtr cpu_max_pool2d_argmax(KernelCtx &k) {
  auto a = k.attrs_as<MaxPool2DAttrs>();
  const Shape &xs = k.arg_type(0).shape, &os = k.call.type.shape;
  PoolAxis h(a, 0, xs[2]), w(a, 1, xs[3]);
  if (w.out > kMaxRowWindows)
    return max_pool2d_argmax_kernel(k);
  return row_argmax(k, 0, os, h, w, k.out());
}

} // namespace

void register_cpu_pool(OpRegistry &reg) {
  reg.strategy("nn.max_pool2d", TargetKind::CPU, cpu_max_pool2d);
  reg.strategy("grad.max_pool2d_backward", TargetKind::CPU, cpu_max_pool2d_backward);
  reg.strategy("grad.max_pool2d_argmax", TargetKind::CPU, cpu_max_pool2d_argmax);
}

} // namespace gradc
