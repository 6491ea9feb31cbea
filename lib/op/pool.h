//===- pool.h - the pooling windows, for the targets' strategies ----------===//
//
// Internal to lib/op: the window arithmetic and the pieces of pool.cpp's
// kernels that a target's strategy (cpu/pool.cpp) arranges differently.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Kernel.h"
#include "gradc/op/attrs/pool.h"

#include <functional>
#include <utility>

namespace gradc {

/// One spatial axis of a pooling window.
struct PoolAxis {
  int64_t n = 0, k = 1, s = 1, d = 1, lo = 0, hi = 0, out = 0; // data extent, window, padding, output extent

  PoolAxis(const Pool2DAttrs &a, int axis, int64_t extent);
  /// The data position of tap `t` of window `o`.
  LExprPtr at(const LExprPtr &o, const LExprPtr &t) const;
  /// The taps of window `o` inside [first, last): the divisor's factor.
  LExprPtr taps_within(const LExprPtr &o, int64_t first, int64_t last) const;

  // Where the window is longer than the data (a window of 2^31 over 5
  // columns, which SAME padding allows, ran 2^31 masked taps per output),
  // the tap loops visit only a run of consecutive taps that holds every tap
  // that can matter, starting at the lowest that can; the taps in the run
  // that cannot are masked as before. Otherwise they visit the whole window.
  /// Taps a window of the forward pass visits: at most ⌈n / d⌉ reach the data.
  int64_t data_taps() const { return std::min(k, (n + d - 1) / d); }
  /// Tap j of those visited by window `o`: from the first at or after the data's start.
  LExprPtr data_tap(const LExprPtr &o, const LExprPtr &j) const;
  /// Taps a data element's gather visits: those putting it in a window
  /// o ∈ [0, out), whose positions o·s span (out - 1)·s.
  int64_t window_taps() const { return int64_t(std::min<__int128>(k, __int128(out - 1) * s / d + 1)); }
  /// Tap j of those visited for data element `i`: from the one that puts it in window out - 1.
  LExprPtr window_tap(const LExprPtr &i, const LExprPtr &j) const;
  /// The window o = (i + lo - tap·d) / s that holds data element `i` at
  /// `tap`, clamped into [0, out); `valid` and-ed with whether the division
  /// is whole and o an output (a window's gather).
  LExprPtr window_holding(const LExprPtr &i, const LExprPtr &tap, LExprPtr &valid) const;
  /// The windows [first, last) whose every tap lies in the data (none
  /// reads the padding): first == last where there are none.
  std::pair<int64_t, int64_t> whole_windows() const;
  /// Whether no two windows overlap (stride >= the dilated window).
  bool disjoint() const { return s >= d * (k - 1) + 1; }

private:
  LExprPtr ceil_div(const LExprPtr &num) const;
  /// lowest + j, lowest clamped so that all `count` taps lie in [0, k).
  LExprPtr from(const LExprPtr &lowest, int64_t count, const LExprPtr &j) const;
};

/// The generic kernels of nn.max_pool2d and grad.max_pool2d_backward, a
/// window at a time (what a strategy falls back on).
StmtPtr max_pool2d_kernel(KernelCtx &k);
StmtPtr max_pool2d_backward_kernel(KernelCtx &k);

/// The generic kernels of nn.avg_pool2d and grad.avg_pool2d_backward: the
/// forward a window at a time, the backward a data element at a time, each
/// gathering the adjoints of the windows that hold it in tap order.
StmtPtr avg_pool2d_kernel(KernelCtx &k);
StmtPtr avg_pool2d_backward_kernel(KernelCtx &k);

/// The divisor of average pool window (oh, ow), in `acc`: its taps inside
/// the padded data (count_include_pad) or the data, at least 1.
LExprPtr avg_divisor(const AvgPool2DAttrs &a, const PoolAxis &h, const PoolAxis &w, const LExprPtr &oh,
                     const LExprPtr &ow, DType acc);

/// acc = the maximum of window (oh, ow) of plane (n, c) of argument `data`;
/// with `arg`, arg = the flat ih·W + iw of its first maximum (-1 when the
/// window holds no data).
StmtPtr window_max(const KernelCtx &k, size_t data, const PoolAxis &h, const PoolAxis &w, const LExprPtr &n,
                   const LExprPtr &c, const LExprPtr &oh, const LExprPtr &ow, const BufferPtr &acc, const BufferPtr &arg);

/// The dtype of a window's argmax, its flat ih·W + iw in the plane: int32
/// where every plane index fits (half the bytes, and as many vector lanes as
/// float32 data), else int64.
DType argmax_dtype(const PoolAxis &h, const PoolAxis &w);

/// Whether a later tap `x` of a window replaces its maximum `cur` so far:
/// greater, or NaN (PyTorch's rule); with the argmax `arg` so far, also
/// when there is none yet (-1), so that a window of -inf has one.
LExprPtr replaces_max(const LExprPtr &x, const LExprPtr &cur, const LExprPtr &arg);

/// grad.max_pool2d_backward's two kernels: for windows that never overlap
/// (stride >= the dilated window: each data element in one window at most),
/// each window writing its own taps, g at its first maximum and 0 elsewhere.
using MaxPoolDisjoint = std::function<StmtPtr(KernelCtx &, const PoolAxis &h, const PoolAxis &w)>;
/// For overlapping windows, each window's first maximum, flat ih·W + iw
/// (-1 for a window without data), into `argmax` (the output grad's shape).
using MaxPoolArgmax =
    std::function<StmtPtr(KernelCtx &, const PoolAxis &h, const PoolAxis &w, const BufferPtr &argmax)>;

/// grad.max_pool2d_backward: `disjoint` where the windows do not overlap;
/// else `argmax_of` into kernel scratch, then per (n, c) plane the plane
/// zeroed and each window's adjoint added at its maximum, in row-major order.
StmtPtr max_pool2d_backward_from(KernelCtx &k, const MaxPoolDisjoint &disjoint, const MaxPoolArgmax &argmax_of);

/// The generic kernel of grad.max_pool2d_argmax: a window at a time.
StmtPtr max_pool2d_argmax_kernel(KernelCtx &k);

} // namespace gradc
