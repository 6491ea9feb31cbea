//===- cpu/pool.cpp - the CPU's max and average pools ----------------------===//
//
// The CPU strategies of nn.max_pool2d, grad.max_pool2d_argmax,
// grad.max_pool2d_backward, nn.avg_pool2d and grad.avg_pool2d_backward
// (their definitions: pool.cpp). The generic kernels work a window (or, in
// a backward, a data element) at a time, each tap its own bounds checks and
// divisions: scalar code. Here a row runs at a time, the taps outside and
// the row's windows inside, so the inner loops vectorize.
//
// Max pools: the generic kernels scan one window at a time, each tap a
// branch on whether it is the maximum so far: on data without order that
// branch is a coin toss, and googlenet's 3 × 3 pools of stride 1 spent a
// quarter of its training step mispredicting it. Here each window's maximum
// and argmax are kept in a row of locals and replaced by a select, not a
// branch. Windows that read no padding (PoolAxis::whole_windows) load
// without a guard; the few at the row's ends keep the generic kernel's
// guard and clamp. Each window still visits its taps in row-major order, so
// the maximum, its first argmax and the NaN rule are the generic kernel's,
// bit for bit.
//
// Average pools: the forward sums an output row's windows tap by tap into a
// row of locals. The backward fills a data row: per window row that holds
// it (kh ascending), that row's adjoints divided by their windows' divisors
// once, then added tap by tap (kw ascending), each tap one unguarded loop
// over the windows whose tap lies in the data. Every element sums the same
// terms in the generic kernel's order: the results are its, bit for bit
// (inception_v3's 3 × 3 stride-1 average pools' backward took 2.7 times
// their forward, a data element at a time).
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

/// A forward pool of attributes `a` an output row at a time, the generic kernel `generic`
/// where rows are too long: per row (n, c, oh) a row of w.out locals named
/// `name`, in `dt`, filled by fill(...), then output (n, c, oh, ow) =
/// finish(oh, ow, local ow).
using RowFill = std::function<StmtPtr(const PoolAxis &h, const PoolAxis &w, const LExprPtr &n, const LExprPtr &c,
                                      const LExprPtr &oh, const BufferPtr &row)>;
using RowFinish = std::function<LExprPtr(const PoolAxis &h, const PoolAxis &w, const LExprPtr &oh,
                                         const LExprPtr &ow, const LExprPtr &value)>;
StmtPtr forward_rows(KernelCtx &k, const Pool2DAttrs &a, StmtPtr (*generic)(KernelCtx &), const char *name, DType dt,
                     const RowFill &fill, const RowFinish &finish) {
  const Shape &xs = k.arg_type(0).shape, &os = k.call.type.shape;
  PoolAxis h(a, 0, xs[2]), w(a, 1, xs[3]);
  if (w.out > kMaxRowWindows)
    return generic(k);
  return over_rows(os, [&](const LExprPtr &n, const LExprPtr &c, const LExprPtr &oh) {
    BufferPtr row = k.local(name, dt, w.out);
    StmtPtr out = loop_nest(
        {w.out},
        [&](const Index &ow) {
          Index o{n, c, oh, ow[0]};
          return k.put(o, flat_index(os, o), finish(h, w, oh, ow[0], load(row, ow[0])));
        },
        ForKind::Spatial, "ow");
    return alloc(row, seq({fill(h, w, n, c, oh, row), out}));
  });
}

StmtPtr cpu_max_pool2d(KernelCtx &k) {
  return forward_rows(
      k, k.attrs_as<MaxPool2DAttrs>(), max_pool2d_kernel, "max", k.call.type.dtype,
      [&](const PoolAxis &h, const PoolAxis &w, const LExprPtr &n, const LExprPtr &c, const LExprPtr &oh,
          const BufferPtr &row) { return row_max(k, 0, h, w, n, c, oh, row, nullptr); },
      [](const PoolAxis &, const PoolAxis &, const LExprPtr &, const LExprPtr &, const LExprPtr &max) { return max; });
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

StmtPtr cpu_avg_pool2d(KernelCtx &k) {
  auto a = k.attrs_as<AvgPool2DAttrs>();
  DType dt = k.call.type.dtype, acc = dtype_info(dt).accumulator;
  return forward_rows(
      k, a, avg_pool2d_kernel, "sum", acc,
      [&](const PoolAxis &h, const PoolAxis &w, const LExprPtr &n, const LExprPtr &c, const LExprPtr &oh,
          const BufferPtr &sum) {
        StmtPtr init = loop_nest(
            {w.out}, [&](const Index &ow) { return store(sum, ow[0], constant_of(0, acc)); }, ForKind::Spatial,
            "ow");
        StmtPtr scan = over_row_taps(h, w, oh, [&](const LExprPtr &ow, const LExprPtr &ih, const LExprPtr &iw,
                                                   const LExprPtr &inside) {
          LExprPtr x = cast(acc, k.in(0, {n, c, clamp_index(ih, h.n), inside ? clamp_index(iw, w.n) : iw}));
          if (inside)
            x = select(inside, x, constant_of(0, acc));
          return store(sum, ow, add(load(sum, ow), x));
        });
        return seq({init, scan});
      },
      [&](const PoolAxis &h, const PoolAxis &w, const LExprPtr &oh, const LExprPtr &ow, const LExprPtr &sum) {
        return cast(dt, binary(BinaryOp::Div, sum, avg_divisor(a, h, w, oh, ow, acc)));
      });
}

/// Windows longer than this along a row take the generic backward (the
/// CPU backward unrolls a row's taps, a loop each).
constexpr int64_t kMaxUnrolledTaps = 16;

/// dx[n, c, ih, :] a data row at a time (see the file's comment).
StmtPtr cpu_avg_pool2d_backward(KernelCtx &k) {
  auto a = k.attrs_as<AvgPool2DAttrs>();
  const Shape &xs = k.arg_type(1).shape;
  PoolAxis h(a, 0, xs[2]), w(a, 1, xs[3]);
  if (w.n > kMaxRowWindows || w.out > kMaxRowWindows || w.k > kMaxUnrolledTaps)
    return avg_pool2d_backward_kernel(k);
  DType dt = k.call.type.dtype, acc = dtype_info(dt).accumulator;
  return over_rows(xs, [&](const LExprPtr &n, const LExprPtr &c, const LExprPtr &ih) {
    BufferPtr sum = k.local("sum", acc, w.n), scaled = k.local("scaled", acc, w.out);
    StmtPtr init = loop_nest(
        {w.n}, [&](const Index &iw) { return store(sum, iw[0], constant_of(0, acc)); }, ForKind::Spatial, "iw");
    StmtPtr windows = loop_nest(
        {h.window_taps()},
        [&](const Index &jh) {
          // the window row oh that holds data row ih at tap kh, if any
          LExprPtr valid;
          LExprPtr oh = h.window_holding(ih, h.window_tap(ih, jh[0]), valid);
          std::vector<StmtPtr> spread{loop_nest(
              {w.out},
              [&](const Index &ow) {
                LExprPtr g = cast(acc, k.in(0, {n, c, oh, ow[0]}));
                return store(scaled, ow[0], binary(BinaryOp::Div, g, avg_divisor(a, h, w, oh, ow[0], acc)));
              },
              ForKind::Spatial, "ow")};
          for (int64_t t = 0; t < w.k; ++t) {
            // the windows whose tap t lies in the data, each adding to its own column
            auto [first, last] = outputs_reading_inside(w.s, t * w.d - w.lo, t * w.d - w.lo, w.n, w.out);
            if (first < last)
              spread.push_back(loop_nest(
                  {last - first},
                  [&](const Index &j) {
                    LExprPtr ow = add(j[0], imm(first)), iw = w.at(ow, imm(t));
                    return store(sum, iw, add(load(sum, iw), load(scaled, ow)));
                  },
                  ForKind::Spatial, "ow"));
          }
          return if_then(valid, seq(spread));
        },
        ForKind::Reduce, "kh");
    StmtPtr write = loop_nest(
        {w.n},
        [&](const Index &iw) {
          return store(k.out(), flat_index(xs, {n, c, ih, iw[0]}), cast(dt, load(sum, iw[0])));
        },
        ForKind::Spatial, "iw");
    return alloc(sum, alloc(scaled, seq({init, windows, write})));
  });
}

} // namespace

void register_cpu_pool(OpRegistry &reg) {
  reg.strategy("nn.max_pool2d", TargetKind::CPU, cpu_max_pool2d);
  reg.strategy("grad.max_pool2d_backward", TargetKind::CPU, cpu_max_pool2d_backward);
  reg.strategy("grad.max_pool2d_argmax", TargetKind::CPU, cpu_max_pool2d_argmax);
  reg.strategy("nn.avg_pool2d", TargetKind::CPU, cpu_avg_pool2d);
  reg.strategy("grad.avg_pool2d_backward", TargetKind::CPU, cpu_avg_pool2d_backward);
}

} // namespace gradc
