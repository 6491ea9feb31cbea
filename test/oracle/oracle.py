#!/usr/bin/env python3
"""Forward-value oracle: every operator of `gradc ops --json`, computed by gradc and by numpy.

    oracle.py GRADC_BINARY [--only OP] [--verbose] [-- EXTRA GRADC RUN OPTIONS, e.g. -O0]

For each operator and each of its registry examples (`.example(params, body, positive, int_range)`,
the cases of the finite-difference gradient test) plus the oracle's own EXTRA_EXAMPLES below, this
script writes `def @main(PARAMS) { BODY }`, draws the inputs with a fixed seed (floats from
±[0.5, 1.5], or [0.5, 1.5] when `positive`; integers from [0, int_range); bools at random), runs
`gradc run` and compares every output leaf (depth-first, tuples in field order) with the value of
BODY computed by a small evaluator over the call syntax (calls with keyword attributes, %vars,
literals such as `1f` / `2f64` / `3i64`, tuples, `.N` projections, infix `+ - * /` and comparisons,
`%0 = ...;` / `let` bindings) whose operators come from the REFERENCE table: independent numpy
implementations with Relay/TVM semantics (SPEC §4). Attributes missing from a call take the
registry's defaults. Floats are compared with a tolerance for their dtype, integers and bools
exactly, and dtypes and shapes must match.

Output: `PASS op#k` or `FAIL op#k: reason` per example (k numbers the registry's examples; `op#xK`
are the oracle's extra examples), `no example: op` for an operator with none, and last
`N passed, M failed`; the exit status is 1 if anything failed.

Adding an operator: give it a `.example(...)` in its registration and add one entry
`"name": lambda a, at: ...` to REFERENCE (a = the evaluated arguments as numpy arrays or tuples,
at = the attributes with defaults filled in), written from the operator's documentation (SPEC §4,
`gradc ops NAME`), never from gradc's kernel. An operator with examples and no REFERENCE entry
fails. Cases the registry example does not reach (other dtypes, attribute values, operators with
no gradient and so no example) go to EXTRA_EXAMPLES.
"""
import concurrent.futures
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import zlib

import numpy as np

# ----------------------------------------------------------------------------------------------
# helpers for the reference implementations
# ----------------------------------------------------------------------------------------------


def _axes(axis, rank, exclude=False):
    """Relay's reduction axes (TVM's GetReduceAxes): None or [] = every axis, whatever `exclude`
    says; otherwise an int or a list, negative allowed, and `exclude` takes the complement."""
    if axis is None or axis == []:
        return tuple(range(rank))
    elif isinstance(axis, (list, tuple)):
        ax = [a + rank if a < 0 else a for a in axis]
    else:
        ax = [axis + rank if axis < 0 else axis]
    if exclude:
        ax = [i for i in range(rank) if i not in ax]
    return tuple(sorted(ax))


def _reduce(fn):
    def run(a, at):
        x = a[0]
        ax = _axes(at["axis"], x.ndim, at.get("exclude", False))
        return np.asarray(fn(x, axis=ax, keepdims=at["keepdims"])).astype(x.dtype)
    return run


def _norm(axis, rank):
    return axis + rank if axis < 0 else axis


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)


def _sigmoid(x):
    one = x.dtype.type(1)
    return one / (one + np.exp(-x))


def _int_div(x, y):
    if np.issubdtype(x.dtype, np.integer):  # TVM: truncating division for integers
        q = np.abs(x) // np.abs(y)
        return (np.sign(x) * np.sign(y) * q).astype(np.result_type(x, y))
    return x / y


def _softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def _reshape(x, newshape, allowzero):
    """Relay reshape: 0 copies the input dimension at that position (unless allowzero), -1 is inferred."""
    out = [x.shape[i] if d == 0 and not allowzero else d for i, d in enumerate(newshape)]
    return x.reshape(out)


def _expand_dims(x, axis, num):
    axis = axis + x.ndim + 1 if axis < 0 else axis
    return x.reshape(x.shape[:axis] + (1,) * num + x.shape[axis:])


def _squeeze(x, axis):
    if axis is None:
        return np.squeeze(x)
    ax = [axis] if isinstance(axis, int) else axis
    return np.squeeze(x, axis=tuple(_norm(a, x.ndim) for a in ax))


def _collapse_sum(x, shape):
    """The sum over every axis that broadcasting `shape` to x.shape expanded."""
    shape = tuple(shape)
    lead = x.ndim - len(shape)
    y = np.sum(x, axis=tuple(range(lead))) if lead else x
    ax = tuple(i for i, d in enumerate(shape) if d == 1 and y.shape[i] != 1)
    return np.sum(y, axis=ax, keepdims=True).reshape(shape).astype(x.dtype)


def _strided_slice(x, at):
    return x[_slice_index(x, at)]


def _strided_slice_backward(a, at):
    out = np.zeros_like(a[1])
    out[_slice_index(a[1], at)] = a[0]
    return out


def _slice_index(x, at):
    begin, end = list(at["begin"]), list(at["end"])
    strides = at.get("strides") or [1]
    axes = at.get("axes")
    if axes is None:
        axes = list(range(len(begin)))
    if len(strides) == 1 and len(axes) > 1:
        strides = strides * len(axes)
    mode = at.get("slice_mode", "end")
    idx = [slice(None)] * x.ndim
    for i, ax in enumerate(axes):
        ax = _norm(ax, x.ndim)
        b, s = begin[i], strides[i] if i < len(strides) else 1
        e = end[i] if i < len(end) else None
        if mode == "size":
            s = 1
            e = None if e is None or e < 0 else (b + x.shape[ax] if b < 0 else b) + e
        idx[ax] = slice(b, e, s)  # python's slice canonicalisation = TVM's for in-range strides
    return tuple(idx)


def _take(x, ind, axis, mode, batch_dims=0):
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = _norm(axis, x.ndim)
    n = x.shape[axis]
    ind = np.clip(ind, 0, n - 1) if mode != "wrap" else np.mod(ind, n)
    if batch_dims == 0:
        return np.take(x, ind, axis=axis)
    # batch axes: each batch element takes from its own slice
    out = [_take(x[b], ind[b], axis - 1, mode, batch_dims - 1) for b in range(x.shape[0])]
    return np.stack(out) if out else np.zeros((0,) + np.take(x[:0].sum(0), ind[:0].sum(0), axis=axis - 1).shape)


def _take_backward(a, at):
    g, x, ind = a
    axis, mode, b = at["axis"], at.get("mode", "clip"), at.get("batch_dims", 0)
    flat = x.reshape(-1) if axis is None else x
    ax = 0 if axis is None else _norm(axis, x.ndim)
    n = flat.shape[ax]
    ind = np.clip(ind, 0, n - 1) if mode != "wrap" else np.mod(ind, n)
    out = np.zeros_like(flat)
    assert b == 0, "the oracle's take_backward reference has no batch_dims"
    # out[pre, ind[j], post] += g[pre, j, post], in order
    g = g.reshape(flat.shape[:ax] + (-1,) + flat.shape[ax + 1:])
    for j, i in enumerate(ind.reshape(-1)):
        sel_out = (slice(None),) * ax + (i,)
        sel_g = (slice(None),) * ax + (j,)
        out[sel_out] += g[sel_g]
    return out.reshape(x.shape)


def _one_hot(ind, on, off, depth, axis, dtype):
    axis = ind.ndim if axis == -1 else _norm(axis, ind.ndim + 1)
    shape = [1] * (ind.ndim + 1)
    shape[axis] = depth
    hit = np.expand_dims(ind, axis) == np.arange(depth).reshape(shape)
    return np.where(hit, on, off).astype(dtype or on.dtype)


def _cumulative(x, at, prod):
    axis = at.get("axis")
    if axis is None:
        x, axis = x.reshape(-1), 0
    dt = at.get("dtype") or x.dtype
    if not isinstance(dt, str):
        dt = x.dtype
    x = x.astype(dt)
    fn = lambda v, axis: (np.cumprod if prod else np.cumsum)(v, axis=axis, dtype=v.dtype)
    if not at.get("exclusive", False):
        return fn(x, axis=axis)
    shape = list(x.shape)
    shape[axis] = 1
    first = np.full(shape, 1 if prod else 0, dtype=x.dtype)
    head = np.take(x, np.arange(x.shape[axis] - 1), axis=axis)
    return fn(np.concatenate([first, head], axis=axis), axis=axis)


def _nll_parts(p, t, w, ignore_index):
    """Per-target (loss, weight, class) with PyTorch semantics; classes on axis 1 (axis 0 for 1-D)."""
    cax = 0 if p.ndim == 1 else 1
    C = p.shape[cax]
    counted = t != ignore_index
    cls = np.clip(t, 0, C - 1).astype(np.int64)  # read any class for ignored targets; masked below
    picked = np.squeeze(np.take_along_axis(p, np.expand_dims(cls, cax), axis=cax), axis=cax)
    wt = w[cls] if w is not None else np.ones_like(picked)
    wt = np.where(counted, wt, 0).astype(p.dtype)
    return -wt * picked, wt, cls, counted, cax, C


def _nll_loss(a, at):
    p, t = a[0], a[1]
    loss, wt, *_ = _nll_parts(p, t, a[2] if len(a) > 2 else None, at["ignore_index"])
    r = at["reduction"]
    if r == "none":
        return loss.astype(p.dtype)
    if r == "sum":
        return np.asarray(np.sum(loss), dtype=p.dtype)
    return np.asarray(np.sum(loss) / np.sum(wt), dtype=p.dtype)


def _nll_backward(a, at):
    """d loss / d pred, times the loss's adjoint g (a[0])."""
    g, p, t = a[0], a[1], a[2]
    w = a[3] if len(a) > 3 else None
    loss, wt, cls, counted, cax, C = _nll_parts(p, t, w, at["ignore_index"])
    r = at["reduction"]
    scale = g if r == "none" else np.broadcast_to(g, t.shape)
    coef = -wt * scale  # d(-w p)/dp = -w at the target class
    if r == "mean":
        coef = coef / np.sum(wt)
    onehot = _one_hot(cls, 1.0, 0.0, C, cax if p.ndim > 1 else -1, p.dtype)
    return (onehot * np.expand_dims(coef, cax)).astype(p.dtype)


def _nll_weights_backward(a, at):
    """d loss / d weights by the quotient rule, times g: L = S / W with S = Σ -w_t p_t, W = Σ w_t."""
    g, p, t, w = a
    loss, wt, cls, counted, cax, C = _nll_parts(p, t, w, at["ignore_index"])
    # dS/dw_c = Σ_{counted i, t_i = c} -p_i ; dW/dw_c = #{counted i, t_i = c}
    picked = np.squeeze(np.take_along_axis(p, np.expand_dims(cls, cax), axis=cax), axis=cax)
    neg_p = np.where(counted, -picked, 0)
    r = at["reduction"]
    dS = np.zeros(C, dtype=np.float64)
    dW = np.zeros(C, dtype=np.float64)
    gi = g if r == "none" else np.broadcast_to(g, t.shape)
    for i in np.ndindex(t.shape):
        if counted[i]:
            dS[cls[i]] += (neg_p[i] * (gi[i] if r != "mean" else 1.0))
            dW[cls[i]] += 1.0
    if r != "mean":
        return dS.astype(p.dtype)
    S, W = float(np.sum(loss)), float(np.sum(wt))
    return (g * (dS / W - S / W ** 2 * dW)).astype(p.dtype)


def _batch_matmul(a, b, ta, tb):
    if ta:
        a = np.swapaxes(a, -1, -2)
    if tb:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


def _gelu(x, approximate):
    if approximate == "tanh":
        inner = np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))
    else:
        inner = _erf(x / x.dtype.type(math.sqrt(2)))
    return (x * x.dtype.type(0.5) * (1 + inner)).astype(x.dtype)


def _softplus(x, beta, threshold):
    bx = x * beta
    return np.where(bx > threshold, x, np.log1p(np.exp(-np.abs(bx))) / beta + np.maximum(bx, 0) / beta).astype(x.dtype)


def _group_norm(a, at):
    x, gamma, beta = a
    axis = _norm(at["axis"], x.ndim)
    g = at["num_groups"]
    shape = x.shape[:axis] + (g, x.shape[axis] // g) + x.shape[axis + 1:]
    xg = x.reshape(shape)
    axes = tuple(range(axis + 1, len(shape)))
    y = ((xg - xg.mean(axis=axes, keepdims=True)) / np.sqrt(xg.var(axis=axes, keepdims=True) + at["epsilon"]))
    y = y.reshape(x.shape)
    along = [1] * x.ndim
    along[axis] = -1
    if at["scale"]:
        y = y * gamma.reshape(along)
    if at["center"]:
        y = y + beta.reshape(along)
    return y.astype(x.dtype)


def _logsumexp(x, at):
    axes = _axes(at["axis"], x.ndim, at.get("exclude", False))
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isinf(m), 0, m)
    r = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return np.asarray(r if at["keepdims"] else np.squeeze(r, axis=axes)).astype(x.dtype)


def _arg_extremum(x, at, fn):
    axes = _axes(at["axis"], x.ndim, at.get("exclude", False))
    kept = [d for d in range(x.ndim) if d not in axes]
    moved = np.transpose(x, kept + list(axes)).reshape([x.shape[d] for d in kept] + [-1])
    if at.get("select_last_index", False):
        r = moved.shape[-1] - 1 - fn(moved[..., ::-1], axis=-1)
    else:
        r = fn(moved, axis=-1)
    if at["keepdims"]:
        r = r.reshape([1 if d in axes else x.shape[d] for d in range(x.ndim)])
    return np.asarray(r).astype(np.int32)


def _layer_norm(a, at):
    x, gamma, beta = a
    axis = _norm(at["axis"], x.ndim)
    mu = np.mean(x, axis=axis, keepdims=True)
    var = np.mean((x - mu) ** 2, axis=axis, keepdims=True)
    y = (x - mu) / np.sqrt(var + x.dtype.type(at["epsilon"]))
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    if at.get("scale", True):
        y = y * gamma.reshape(shape)
    if at.get("center", True):
        y = y + beta.reshape(shape)
    return y.astype(x.dtype)


def _pad4(padding):
    p = [padding] if isinstance(padding, int) else list(padding)
    if len(p) == 1:
        p = p * 4
    elif len(p) == 2:
        p = [p[0], p[1], p[0], p[1]]
    return p  # top, left, bottom, right


def _pair(v, default=(1, 1)):
    """Relay's 1 or 2 values for (H, W): an int or [v] stands for both."""
    if v is None:
        return list(default)
    if isinstance(v, int):
        return [v, v]
    return list(v) * (2 // len(v))


def _pool_geometry(n, k, s, d, lo, hi, ceil):
    # PyTorch's rule, which gradc follows: ceil_mode drops a last window that would start
    # past the input and its leading padding.
    span = (k - 1) * d + 1
    num = n + lo + hi - span
    out = (num + s - 1) // s + 1 if ceil else num // s + 1
    if ceil and (out - 1) * s >= n + lo:  # the last window must start inside the input or left padding
        out -= 1
    return out


def _pool2d(x, at, kind):
    kh, kw = _pair(at["pool_size"])
    sh, sw = _pair(at.get("strides"))
    dh, dw = _pair(at.get("dilation"))
    top, left, bottom, right = _pad4(at.get("padding") or [0])
    ceil = at.get("ceil_mode", False)
    N, C, H, W = x.shape
    OH = _pool_geometry(H, kh, sh, dh, top, bottom, ceil)
    OW = _pool_geometry(W, kw, sw, dw, left, right, ceil)
    out = np.zeros((N, C, OH, OW), dtype=x.dtype)
    for oh in range(OH):
        for ow in range(OW):
            vals, count_pad = [], 0
            for i in range(kh):
                for j in range(kw):
                    h, w = oh * sh + i * dh - top, ow * sw + j * dw - left
                    if 0 <= h < H and 0 <= w < W:
                        vals.append(x[:, :, h, w])
                    if -top <= h < H + bottom and -left <= w < W + right:
                        count_pad += 1
            v = np.stack(vals, axis=-1)
            if kind == "max":
                out[:, :, oh, ow] = np.max(v, axis=-1)
            else:
                den = count_pad if at.get("count_include_pad", False) else len(vals)
                out[:, :, oh, ow] = np.sum(v, axis=-1) / den
    return out


def _conv_geometry(at):
    """A convolution's (strides, dilation, (top, left, bottom, right), groups)."""
    return _pair(at.get("strides")), _pair(at.get("dilation")), _pad4(at.get("padding") or [0]), at.get("groups", 1)


def _conv2d(a, at):
    x, w = a
    (sh, sw), (dh, dw), (top, left, bottom, right), groups = _conv_geometry(at)
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    # in float64, rounded once: gradc accumulates float16 in float32
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    OH = (H + top + bottom - (KH - 1) * dh - 1) // sh + 1
    OW = (W + left + right - (KW - 1) * dw - 1) // sw + 1
    out = np.zeros((N, O, OH, OW))
    og = O // groups
    for o in range(O):
        g = o // og
        xs = xp[:, g * Cg:(g + 1) * Cg]
        for i in range(KH):
            for j in range(KW):
                patch = xs[:, :, i * dh: i * dh + (OH - 1) * sh + 1: sh, j * dw: j * dw + (OW - 1) * sw + 1: sw]
                out[:, o] += np.einsum("nchw,c->nhw", patch, w[o, :, i, j].astype(np.float64))
    return out.astype(x.dtype)


def _conv2d_transpose(a, at):
    """Scatter form: every data element adds x · w[c, o] at (ih·s - pad + kh·d, iw·s - pad + kw·d);
    the output window starts at (top, left) of the unpadded result."""
    x, w = a
    (sh, sw), (dh, dw), (top, left, bottom, right), groups = _conv_geometry(at)
    oph, opw = _pair(at.get("output_padding"), (0, 0))
    N, C, H, W = x.shape
    _, Og, KH, KW = w.shape
    Cg = C // groups
    OH = (H - 1) * sh - top - bottom + dh * (KH - 1) + oph + 1
    OW = (W - 1) * sw - left - right + dw * (KW - 1) + opw + 1
    full = np.zeros((N, Og * groups, max(top + OH, (H - 1) * sh + dh * (KH - 1) + 1),
                     max(left + OW, (W - 1) * sw + dw * (KW - 1) + 1)))  # float64, rounded once
    for c in range(C):
        g = c // Cg
        for o in range(Og):
            for i in range(KH):
                for j in range(KW):
                    full[:, g * Og + o, i * dh:i * dh + (H - 1) * sh + 1:sh, j * dw:j * dw + (W - 1) * sw + 1:sw] += \
                        x[:, c].astype(np.float64) * float(w[c, o, i, j])
    return full[:, :, top:top + OH, left:left + OW].astype(x.dtype)


def _conv2d_backward_weight(a, at):
    """dw[o, c, i, j] = Σ dy[n, o, oh, ow] · xpad[n, g·Cg + c, oh·s + i·d, ow·s + j·d]."""
    dy, x = a
    (sh, sw), (dh, dw), (top, left, bottom, right), groups = _conv_geometry(at)
    KH, KW = _pair(at["kernel_size"])
    N, O, OH, OW = dy.shape
    Cg = x.shape[1] // groups
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    out = np.zeros((O, Cg, KH, KW))
    og = O // groups
    for o in range(O):
        g = o // og
        for i in range(KH):
            for j in range(KW):
                patch = xp[:, g * Cg:(g + 1) * Cg, i * dh:i * dh + (OH - 1) * sh + 1:sh, j * dw:j * dw + (OW - 1) * sw + 1:sw]
                out[o, :, i, j] = np.einsum("nchw,nhw->c", patch, dy[:, o].astype(np.float64))
    return out.astype(x.dtype)


def _pool_windows(x_shape, at):
    """(oh, ow, [(h, w) taps inside the data, row-major], taps inside the padded data) per window."""
    kh, kw = _pair(at["pool_size"])
    sh, sw = _pair(at.get("strides"))
    dh, dw = _pair(at.get("dilation"))
    top, left, bottom, right = _pad4(at.get("padding") or [0])
    ceil = at.get("ceil_mode", False)
    H, W = x_shape[2], x_shape[3]
    OH = _pool_geometry(H, kh, sh, dh, top, bottom, ceil)
    OW = _pool_geometry(W, kw, sw, dw, left, right, ceil)
    for oh in range(OH):
        for ow in range(OW):
            taps, padded = [], 0
            for i in range(kh):
                for j in range(kw):
                    h, w = oh * sh + i * dh - top, ow * sw + j * dw - left
                    if 0 <= h < H and 0 <= w < W:
                        taps.append((h, w))
                    if -top <= h < H + bottom and -left <= w < W + right:
                        padded += 1
            yield oh, ow, taps, padded


def _max_pool2d_backward(a, at):
    g, x = a
    out = np.zeros_like(x)
    for oh, ow, taps, _ in _pool_windows(x.shape, at):
        for n in range(x.shape[0]):
            for c in range(x.shape[1]):
                vals = [x[n, c, h, w] for h, w in taps]
                first = next(k for k, v in enumerate(vals) if v == max(vals))  # the first maximum
                h, w = taps[first]
                out[n, c, h, w] += g[n, c, oh, ow]
    return out


def _max_pool2d_gather(a, at):
    """data_grad at each window's first maximum of data."""
    g, x = a
    outs = {}
    for oh, ow, taps, _ in _pool_windows(x.shape, at):
        outs[(oh, ow)] = taps
    OH, OW = max(k[0] for k in outs) + 1, max(k[1] for k in outs) + 1
    out = np.zeros(x.shape[:2] + (OH, OW), dtype=x.dtype)
    for (oh, ow), taps in outs.items():
        for n in range(x.shape[0]):
            for c in range(x.shape[1]):
                vals = [x[n, c, h, w] for h, w in taps]
                if vals:
                    h, w = taps[next(k for k, v in enumerate(vals) if v == max(vals))]
                    out[n, c, oh, ow] = g[n, c, h, w]
    return out


def _window_argmax(x, taps):
    """The first tap of a window's taps (row-major) that no later tap beats: a later tap replaces the
    maximum so far if greater or NaN (so the last NaN wins); -1 for a window with no data."""
    best = -1
    for h, w in taps:
        v = x[h, w]
        if best < 0 or v > x[divmod(best, x.shape[1])] or v != v:
            best = h * x.shape[1] + w
    return best


def _max_pool2d_argmax(a, at):
    (x,) = a
    wins = list(_pool_windows(x.shape, at))
    OH, OW = max(w[0] for w in wins) + 1, max(w[1] for w in wins) + 1
    dtype = np.int32 if x.shape[2] * x.shape[3] <= 2**31 - 1 else np.int64
    out = np.zeros(x.shape[:2] + (OH, OW), dtype=dtype)
    for oh, ow, taps, _ in wins:
        for n in range(x.shape[0]):
            for c in range(x.shape[1]):
                out[n, c, oh, ow] = _window_argmax(x[n, c], taps)
    return out


def _max_pool2d_unpool(a, at):
    """Each window's adjoint added at its argmax, where that is one of the window's taps in the data."""
    g, m = a
    H, W = _pair(at["data_size"])
    out = np.zeros(g.shape[:2] + (H, W), dtype=g.dtype)
    for oh, ow, taps, _ in _pool_windows(out.shape, at):
        for n in range(g.shape[0]):
            for c in range(g.shape[1]):
                k = int(m[n, c, oh, ow])
                if k >= 0 and divmod(k, W) in taps:
                    out[n, c, k // W, k % W] += g[n, c, oh, ow]
    return out


def _max_pool2d_take(a, at):
    """data_grad at each window's argmax, 0 where that is not one of the window's taps in the data."""
    x, m = a
    out = np.zeros(m.shape, dtype=x.dtype)
    W = x.shape[3]
    for oh, ow, taps, _ in _pool_windows(x.shape, at):
        for n in range(x.shape[0]):
            for c in range(x.shape[1]):
                k = int(m[n, c, oh, ow])
                if k >= 0 and divmod(k, W) in taps:
                    out[n, c, oh, ow] = x[n, c, k // W, k % W]
    return out


def _avg_pool2d_backward(a, at):
    g, x = a
    out = np.zeros_like(x)
    for oh, ow, taps, padded in _pool_windows(x.shape, at):
        den = max(padded if at.get("count_include_pad", False) else len(taps), 1)
        for h, w in taps:
            out[:, :, h, w] += g[:, :, oh, ow] / x.dtype.type(den)
    return out


def _adaptive_windows(n, m):
    return [(i * n // m, -(-(i + 1) * n // m)) for i in range(m)]


def _adaptive_size(x, at):
    size = at.get("output_size")
    if size is None:
        return x.shape[2], x.shape[3]
    return tuple(_pair(size))


def _adaptive_avg_pool2d(a, at):
    x = a[0]
    OH, OW = _adaptive_size(x, at)
    out = np.zeros(x.shape[:2] + (OH, OW), dtype=x.dtype)
    for oh, (h0, h1) in enumerate(_adaptive_windows(x.shape[2], OH)):
        for ow, (w0, w1) in enumerate(_adaptive_windows(x.shape[3], OW)):
            out[:, :, oh, ow] = np.mean(x[:, :, h0:h1, w0:w1], axis=(2, 3))
    return out


def _adaptive_avg_pool2d_backward(a, at):
    g, x = a
    out = np.zeros_like(x)
    OH, OW = g.shape[2], g.shape[3]
    for oh, (h0, h1) in enumerate(_adaptive_windows(x.shape[2], OH)):
        for ow, (w0, w1) in enumerate(_adaptive_windows(x.shape[3], OW)):
            out[:, :, h0:h1, w0:w1] += g[:, :, oh:oh + 1, ow:ow + 1] / x.dtype.type((h1 - h0) * (w1 - w0))
    return out


def _along(v, axis, rank):
    """A (C,) vector shaped to broadcast along `axis` of a rank-`rank` tensor."""
    axis = _norm(axis, rank)
    return v.reshape([-1 if i == axis else 1 for i in range(rank)])


def _batch_norm(a, at):
    x, gamma, beta, mean, var = a
    r = x.ndim
    out = (x - _along(mean, at["axis"], r)) / np.sqrt(_along(var, at["axis"], r) + x.dtype.type(at["epsilon"]))
    if at["scale"]:
        out = out * _along(gamma, at["axis"], r)
    if at["center"]:
        out = out + _along(beta, at["axis"], r)
    return (out.astype(x.dtype), mean.copy(), var.copy())


def _pad(a, at):
    x = a[0]
    value = a[1] if len(a) > 1 else x.dtype.type(at["pad_value"])
    widths = at["pad_width"]
    out = np.full([n + lo + hi for n, (lo, hi) in zip(x.shape, widths)], value, dtype=x.dtype)
    src, dst = [], []
    for n, (lo, hi) in zip(x.shape, widths):
        src.append(slice(max(0, -lo), n - max(0, -hi)))
        dst.append(slice(max(0, lo), max(0, lo) + max(0, n - max(0, -lo) - max(0, -hi))))
    out[tuple(dst)] = x[tuple(src)]
    return out


def _stack(states):
    """Steps stacked on a new leading axis, leaf by leaf for a tuple state."""
    if isinstance(states[0], tuple):
        return tuple(_stack([s[i] for s in states]) for i in range(len(states[0])))
    return np.stack([np.asarray(s) for s in states])


def _scan(a, at):
    """SPEC §7: result[0] = init, result[t] = body(result[t-1], x1[t], ...) for t in [1, T)."""
    body, init, xs = a[0], a[1], a[2:]
    states = [init]
    for t in range(1, xs[0].shape[0]):
        states.append(body(states[-1], *[x[t] for x in xs]))
    return _stack(states)


def _scan_backward(a, at):
    """The reverse scan of scan's gradient (`gradc ops grad.scan_backward`): carry = 0; for t = T-1
    down to 1, (d_s, d_x.., d_c..) = vjp(states[t-1], x[t].., c.., d_states[t] + carry), carry = d_s,
    d_x[t] = d_x, the d_c summed; then d_init = d_states[0] + carry and d_x[0] = 0 (float inputs, but
    the saved values the forward scan stored for the vjp). The captured values listed in `unsummed`
    get no adjoint; the vjp's `emitted` step values after the adjoints are stacked as d_x is."""
    vjp, body, states, d_states = a[0], a[1], a[2], a[3]
    recompute = at.get("recompute_saved", False) and at.get("saved", 0) > 0
    k = at["sequences"]
    saved = 0 if recompute else at.get("saved", 0)  # stored: the last `saved` sequences, no adjoint
    xs, caps = a[4:4 + k], a[4 + k:]
    step = (lambda s, *x: body(s, *x, *caps)[0]) if recompute else (lambda s, *x: body(s, *x, *caps))
    if at.get("steps", 0):  # time-checkpointed: `states` holds every k-th; the body recomputes the rest
        full = [states[0]]
        for t in range(1, d_states.shape[0]):
            full.append(step(full[-1], *[x[t] for x in xs]))
        states = np.stack(full)
    carry = np.zeros_like(states[0])
    unsummed = at.get("unsummed") or []
    summed = [j for j in range(len(caps)) if j not in unsummed]
    d_x = [np.zeros_like(x) for x in xs[:k - saved]]
    d_c = [np.zeros_like(caps[j]) for j in summed]
    emitted = [None] * at.get("emitted", 0)
    for t in range(states.shape[0] - 1, 0, -1):
        x_t = [x[t] for x in xs]
        if recompute:  # the step's saved values, by the body from its state
            x_t += list(body(states[t - 1], *x_t, *caps)[1:])
        r = vjp(states[t - 1], *x_t, *caps, d_states[t] + carry)
        carry = r[0]
        for i in range(k - saved):
            d_x[i][t] = r[1 + i]
        for n in range(len(summed)):
            d_c[n] = d_c[n] + r[1 + k - saved + n]
        for e in range(len(emitted)):
            v = r[1 + k - saved + len(summed) + e]
            if emitted[e] is None:
                emitted[e] = np.zeros((states.shape[0],) + v.shape, v.dtype)
            emitted[e][t] = v
    return (d_states[0] + carry, *d_x, *d_c, *emitted)


def _scalar(v, dtype):
    return np.asarray(v).astype(dtype).reshape(())


# ----------------------------------------------------------------------------------------------
# REFERENCE: operator name -> lambda (args, attrs) -> numpy value (array or tuple)
# ----------------------------------------------------------------------------------------------

def _philox4x32_10(ctr, key):
    """Philox-4x32-10 (Salmon et al., SC'11): ten rounds of two 32-bit products, a Weyl key schedule."""
    mask = 0xFFFFFFFF
    c, k = list(ctr), list(key)
    for r in range(10):
        if r:
            k = [(k[0] + 0x9E3779B9) & mask, (k[1] + 0xBB67AE85) & mask]
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k[0]) & mask, p1 & mask, ((p0 >> 32) ^ c[3] ^ k[1]) & mask, p0 & mask]
    return c


def _dropout_mask(seed, shape, rate, stream):
    """nn.dropout_mask (SPEC): element i kept when word 0 of Philox(key = seed + stream * 0x9E3779B97F4A7C15,
    counter = i) is at least rate * 2^32 rounded."""
    key = (int(seed) + stream * 0x9E3779B97F4A7C15) & (2 ** 64 - 1)
    keep = int(math.floor(rate * 2 ** 32 + 0.5))
    n = int(np.prod(shape, dtype=np.int64))
    bits = [_philox4x32_10([i & 0xFFFFFFFF, i >> 32, 0, 0], [key & 0xFFFFFFFF, key >> 32])[0] for i in range(n)]
    return (np.array(bits, dtype=np.int64) >= keep).reshape(shape)


def _dropout(a, at):
    """nn.dropout: (x, ones) at inference; in training the mask of _dropout_mask, the kept elements scaled by
    1 / (1 - rate) (the scale rounded to x's dtype), the mask as 1 and 0."""
    x = a[0]
    if not at.get("training") or float(at.get("rate", 0.5)) == 0:
        return x.copy(), np.ones_like(x)
    rate = float(at.get("rate", 0.5))
    keep = _dropout_mask(a[1], x.shape, rate, int(at.get("stream", 0)))
    return np.where(keep, x * x.dtype.type(1 / (1 - rate)), x.dtype.type(0)), keep.astype(x.dtype)


REFERENCE = {
    # unary
    "negative": lambda a, at: -a[0],
    "abs": lambda a, at: np.abs(a[0]),
    "exp": lambda a, at: np.exp(a[0]),
    "log": lambda a, at: np.log(a[0]),
    "sqrt": lambda a, at: np.sqrt(a[0]),
    "rsqrt": lambda a, at: a[0].dtype.type(1) / np.sqrt(a[0]),
    "sigmoid": lambda a, at: _sigmoid(a[0]),
    "tanh": lambda a, at: np.tanh(a[0]),
    "sin": lambda a, at: np.sin(a[0]),
    "cos": lambda a, at: np.cos(a[0]),
    "erf": lambda a, at: _erf(a[0]),
    "nn.relu": lambda a, at: np.maximum(a[0], a[0].dtype.type(0)),
    "clip": lambda a, at: np.minimum(np.maximum(a[0], _scalar(at["a_min"], a[0].dtype)),
                                     _scalar(at["a_max"], a[0].dtype)),
    "copy": lambda a, at: a[0].copy(),
    "nn.gelu": lambda a, at: _gelu(a[0], at.get("approximate", "none")),
    "nn.softplus": lambda a, at: _softplus(a[0], at["beta"], at["threshold"]),
    "nn.silu": lambda a, at: a[0] * _sigmoid(a[0]),
    # binary (numpy broadcasting, equal dtypes)
    "add": lambda a, at: a[0] + a[1],
    "subtract": lambda a, at: a[0] - a[1],
    "multiply": lambda a, at: a[0] * a[1],
    "divide": lambda a, at: _int_div(a[0], a[1]),
    "power": lambda a, at: np.power(a[0], a[1]),
    "maximum": lambda a, at: np.maximum(a[0], a[1]),
    "minimum": lambda a, at: np.minimum(a[0], a[1]),
    # comparison and selection
    "equal": lambda a, at: np.equal(a[0], a[1]),
    "not_equal": lambda a, at: np.not_equal(a[0], a[1]),
    "less": lambda a, at: np.less(a[0], a[1]),
    "less_equal": lambda a, at: np.less_equal(a[0], a[1]),
    "greater": lambda a, at: np.greater(a[0], a[1]),
    "greater_equal": lambda a, at: np.greater_equal(a[0], a[1]),
    "where": lambda a, at: np.where(a[0], a[1], a[2]),
    # creation
    "zeros": lambda a, at: np.zeros(at["shape"], dtype=at["dtype"]),
    "ones": lambda a, at: np.ones(at["shape"], dtype=at["dtype"]),
    "full": lambda a, at: np.full(at["shape"], a[0], dtype=at["dtype"] or a[0].dtype),
    "zeros_like": lambda a, at: np.zeros_like(a[0]),
    "ones_like": lambda a, at: np.ones_like(a[0]),
    "full_like": lambda a, at: np.full(a[0].shape, a[1], dtype=a[0].dtype),
    "cast": lambda a, at: a[0].astype(at["dtype"]),
    # reductions
    "sum": _reduce(np.sum),
    "sum_pair": lambda a, at: (_reduce(np.sum)(a[:1], at), _reduce(np.sum)(a[1:], at)),
    "mean": _reduce(np.mean),
    "max": _reduce(np.max),
    "min": _reduce(np.min),
    "prod": _reduce(np.prod),
    "std": lambda a, at: np.asarray(np.std(
        a[0], axis=_axes(at["axis"], a[0].ndim, at.get("exclude", False)), keepdims=at["keepdims"],
        ddof=1 if at.get("unbiased", False) else 0)).astype(a[0].dtype),
    "logsumexp": lambda a, at: _logsumexp(a[0], at),
    "argmax": lambda a, at: _arg_extremum(a[0], at, np.argmax),
    "argmin": lambda a, at: _arg_extremum(a[0], at, np.argmin),
    "variance": lambda a, at: np.asarray(np.var(
        a[0], axis=_axes(at["axis"], a[0].ndim, at.get("exclude", False)), keepdims=at["keepdims"],
        ddof=1 if at.get("unbiased", False) else 0)).astype(a[0].dtype),
    # shape
    "reshape": lambda a, at: _reshape(a[0], at["newshape"], at["allowzero"]),
    "transpose": lambda a, at: np.transpose(a[0], None if at["axes"] is None else
                                            [_norm(i, a[0].ndim) for i in at["axes"]]),
    "expand_dims": lambda a, at: _expand_dims(a[0], at["axis"], at["num_newaxis"]),
    "squeeze": lambda a, at: _squeeze(a[0], at["axis"]),
    "nn.batch_flatten": lambda a, at: a[0].reshape(a[0].shape[0], -1),
    "broadcast_to": lambda a, at: np.broadcast_to(a[0], at["shape"]).copy(),
    "collapse_sum_to": lambda a, at: _collapse_sum(a[0], at["shape"]),
    "collapse_sum_like": lambda a, at: _collapse_sum(a[0], a[1].shape),
    "reverse": lambda a, at: np.flip(a[0], axis=at["axis"]),
    "concatenate": lambda a, at: np.concatenate(a[0], axis=at["axis"]),
    "stack": lambda a, at: np.stack(a[0], axis=at["axis"]),
    "split": lambda a, at: tuple(np.split(a[0], at["indices_or_sections"], axis=at["axis"])),
    "strided_slice": lambda a, at: _strided_slice(a[0], at),
    "grad.strided_slice_backward": _strided_slice_backward,
    # index
    "take": lambda a, at: _take(a[0], a[1], at["axis"], at.get("mode", "clip"), at.get("batch_dims", 0)),
    "grad.take_backward": _take_backward,
    "one_hot": lambda a, at: _one_hot(a[0], a[1], a[2], at["depth"], at["axis"], at["dtype"]),
    # linear algebra
    "nn.dense": lambda a, at: np.matmul(a[0], a[1].T),
    "matmul": lambda a, at: np.asarray(np.matmul(a[0], a[1])),
    "nn.batch_matmul": lambda a, at: _batch_matmul(a[0], a[1], at["transpose_a"], at["transpose_b"]),
    "nn.bias_add": lambda a, at: a[0] + a[1].reshape(
        [-1 if i == _norm(at["axis"], a[0].ndim) else 1 for i in range(a[0].ndim)]),
    # nn
    "nn.softmax": lambda a, at: _softmax(a[0], at["axis"]),
    "nn.log_softmax": lambda a, at: _log_softmax(a[0], at["axis"]),
    "nn.nll_loss": _nll_loss,
    "nn.cross_entropy_with_logits": lambda a, at: np.asarray(
        -np.sum(a[0] * a[1]) / a[0].dtype.type(a[0].shape[0]), dtype=a[0].dtype),
    "nn.layer_norm": _layer_norm,
    "nn.group_norm": _group_norm,
    "on_device": lambda a, at: a[0].copy(),
    "device_copy": lambda a, at: a[0].copy(),
    "logical_and": lambda a, at: np.logical_and(a[0], a[1]),
    "logical_or": lambda a, at: np.logical_or(a[0], a[1]),
    "logical_not": lambda a, at: np.logical_not(a[0]),
    "isnan": lambda a, at: np.isnan(a[0]) if a[0].dtype.kind == "f" else np.zeros(a[0].shape, bool),
    "isinf": lambda a, at: np.isinf(a[0]) if a[0].dtype.kind == "f" else np.zeros(a[0].shape, bool),
    "nn.conv2d": _conv2d,
    "nn.max_pool2d": lambda a, at: _pool2d(a[0], at, "max"),
    "nn.avg_pool2d": lambda a, at: _pool2d(a[0], at, "avg"),
    "nn.global_avg_pool2d": lambda a, at: np.mean(a[0], axis=(2, 3), keepdims=True),
    "nn.global_max_pool2d": lambda a, at: np.max(a[0], axis=(2, 3), keepdims=True),
    "nn.adaptive_avg_pool2d": _adaptive_avg_pool2d,
    "nn.conv2d_transpose": _conv2d_transpose,
    "nn.conv2d_backward_weight": _conv2d_backward_weight,
    "grad.max_pool2d_backward": _max_pool2d_backward,
    "grad.max_pool2d_gather": _max_pool2d_gather,
    "grad.max_pool2d_argmax": _max_pool2d_argmax,
    "grad.max_pool2d_unpool": _max_pool2d_unpool,
    "grad.max_pool2d_take": _max_pool2d_take,
    "grad.avg_pool2d_backward": _avg_pool2d_backward,
    "grad.adaptive_avg_pool2d_backward": _adaptive_avg_pool2d_backward,
    "nn.batch_norm": _batch_norm,
    "nn.pad": _pad,
    "nn.leaky_relu": lambda a, at: np.where(a[0] > 0, a[0], a[0] * a[0].dtype.type(at["alpha"])),
    "nn.prelu": lambda a, at: np.where(a[0] > 0, a[0], a[0] * _along(a[1], at["axis"], a[0].ndim)),
    "nn.dropout": lambda a, at: _dropout(a, at),
    "nn.dropout_mask": lambda a, at: _dropout_mask(a[0], at["shape"], at["rate"], at["stream"]),
    # recurrences
    "cumsum": lambda a, at: _cumulative(a[0], at, False),
    "scan": _scan,
    "grad.scan_backward": _scan_backward,
    "cumprod": lambda a, at: _cumulative(a[0], at, True),
    # gradient helpers
    "grad.no_grad": lambda a, at: a[0].copy(),
    "grad.start_checkpoint": lambda a, at: a[0].copy(),
    "grad.end_checkpoint": lambda a, at: a[0].copy(),
    "grad.nll_loss_backward": _nll_backward,
    "grad.nll_loss_weights_backward": _nll_weights_backward,
    # optimizer updates (torch.optim's formulas, SPEC §1 --train)
    "optim.sgd_momentum": lambda a, at: _sgd_momentum(a, at),
    "optim.adam": lambda a, at: _adam(a, at),
}

def _sgd_momentum(a, at):
    p, g, buf, lr, factor = a
    t = p.dtype.type
    buf = buf * t(at["momentum"]) + g * factor
    d = g + buf * t(at["momentum"]) if at["nesterov"] else buf
    return (p - d * lr, buf)


def _adam(a, at):
    p, g, m, v, step_size, bias2_sqrt, decay = a[:7]
    t = p.dtype.type
    m = m * t(at["beta1"]) + g * t(1 - at["beta1"])
    v = v * t(at["beta2"]) + g * g * t(1 - at["beta2"])
    second = np.maximum(a[7], v) if len(a) == 8 else v
    p = p * decay - m / (np.sqrt(second) / bias2_sqrt + t(at["eps"])) * step_size
    return (p, m, v, second) if len(a) == 8 else (p, m, v)


# ----------------------------------------------------------------------------------------------
# EXTRA_EXAMPLES: forward cases the registry's gradient examples do not reach. Each is
# (params, body, positive, int_range); an entry whose operators are not all registered is skipped.
# ----------------------------------------------------------------------------------------------

F23 = "%x: Tensor[(2, 3), float64], %y: Tensor[(3,), float64]"
F234 = "%x: Tensor[(2, 3, 4), float64]"
S234 = "%x: Tensor[(2, 3, 4), float32]"
I23 = "%x: Tensor[(2, 3), int32], %y: Tensor[(2, 3), int32]"
NLL3 = ("%g: float64, %p: Tensor[(3, 4), float64], %t: Tensor[(3,), int64]", 4)
NLLW = ("%g: float64, %p: Tensor[(2, 3, 2), float64], %t: Tensor[(2, 2), int64], "
        "%w: Tensor[(3,), float64]", 3)
NLLWN = ("%g: Tensor[(2, 2), float64], %p: Tensor[(2, 3, 2), float64], %t: Tensor[(2, 2), int64], "
         "%w: Tensor[(3,), float64]", 3)

# Cases that expose a gradc bug filed as an open issue: reported as XFAIL while they fail, and as a
# failure (XPASS) once they pass, so the entry is removed with the fix.
KNOWN_BUGS = {
}

SGDM = "%p: Tensor[(3, 4), DT], %g: Tensor[(3, 4), DT], %b: Tensor[(3, 4), DT], %lr: DT, %f: DT"
ADAM = ("%p: Tensor[(2, 5), DT], %g: Tensor[(2, 5), DT], %m: Tensor[(2, 5), DT], %v: Tensor[(2, 5), DT], "
        "%s: DT, %c: DT, %d: DT")

EXTRA_EXAMPLES = {
    "optim.sgd_momentum": [(SGDM.replace("DT", "float32"), "optim.sgd_momentum(%p, %g, %b, %lr, %f, momentum=0.8f)",
                            False, 2),
                           (SGDM.replace("DT", "float64"),
                            "optim.sgd_momentum(%p, %g, %b, %lr, %f, momentum=0.5f, nesterov=True)", False, 2)],
    "optim.adam": [(ADAM.replace("DT", "float32"), "optim.adam(%p, %g, %m, %v, %s, %c, %d)", True, 2),
                   (ADAM.replace("DT", "float64") + ", %x: Tensor[(2, 5), float64]",
                    "optim.adam(%p, %g, %m, %v, %s, %c, %d, %x, beta1=0.5f, beta2=0.9f, eps=0.1f)", True, 2)],
    "nn.dropout": [("%x: Tensor[(3, 7), float32], %s: int64", "nn.dropout(%x, %s, rate=0.4f, training=True, stream=5).1",
                    False, 1000),
                   ("%x: Tensor[(3, 7), float32], %s: int64", "nn.dropout(%x, %s, rate=0.4f, training=True, stream=5).0",
                    False, 1000),
                   ("%x: Tensor[(2, 2), float64], %s: int64", "nn.dropout(%x, %s, rate=0f, training=True).0", False, 1000)],
    "nn.dropout_mask": [("%s: int64", "nn.dropout_mask(%s, shape=[3, 5], rate=0.3f, stream=2)", False, 1000),
                        ("%s: int64", "nn.dropout_mask(%s, shape=[4, 1, 3], rate=0f)", False, 1000),
                        ("%s: int64", "nn.dropout_mask(%s, shape=[7], rate=0.9f, stream=12345)", False, 1000)],
    "add": [("%x: Tensor[(2, 3), float64]", "add(%x, 1e-3f64) - 2.5f64 * %x / -4f64", False, 2),
            # SPEC §3: an unsuffixed integer literal beyond int32 is int64
            ("%x: Tensor[(2, 3), int64]", "add(%x, 5000000000)", False, 9),
            ("%x: Tensor[(0, 3), float64], %y: Tensor[(3,), float64]", "add(%x, %y)", False, 2),
            ("%x: Tensor[(2, 3), float32], %y: Tensor[(2, 1), float32]", "add(%x, %y)", False, 2),
            ("%x: Tensor[(2, 3), float16], %y: Tensor[(3,), float16]", "add(%x, %y)", False, 2),
            (I23, "add(%x, %y)", False, 50),
            (F23, "(%x * %y + %x, exp(%y) - 1f64).0", False, 2),
            (F23, "(%x / %y, (negative(%y), %x - %y))", False, 2),
            ("%x: Tensor[(2, 3), float32]", "%0 = multiply(%x, 2f); let %v = add(%0, 1.5f); %v * %v",
             False, 2)],
    "subtract": [(I23, "subtract(%x, %y)", False, 50)],
    "multiply": [("%x: Tensor[(4, 1, 3), float32], %y: Tensor[(5, 1), float32]", "multiply(%x, %y)",
                  False, 2), (I23, "multiply(%x, %y)", False, 50)],
    "divide": [("%x: Tensor[(2, 3), float16], %y: Tensor[(3,), float16]", "divide(%x, %y)", False, 2),
               (I23.replace("int32", "int64"), "divide(subtract(%x, 6i64), add(%y, 1i64))", False, 12),
               ("%x: Tensor[(2, 3), int32]", "divide(subtract(%x, 6), -4)", False, 12),
               ("%x: Tensor[(2, 3), float32], %y: Tensor[(3,), float32]", "divide(%x, %y)", False, 2)],
    "maximum": [(I23, "maximum(%x, %y)", False, 7)],
    "minimum": [(I23, "minimum(%x, %y)", False, 7)],
    "power": [("%x: Tensor[(2, 3), int32], %y: Tensor[(2, 3), int32]", "power(%x, %y)", False, 5),
              ("%x: Tensor[(2, 3), float64], %k: Tensor[(3,), int32]", "power(%x, cast(%k, dtype=\"float64\"))",
               False, 4),
              ("%x: Tensor[(2, 3), float16], %y: Tensor[(3,), float16]", "power(%x, %y)", True, 2),
              ("%x: Tensor[(2, 3), float32], %y: Tensor[(3,), float32]", "power(%x, %y)", True, 2)],
    "negative": [("%x: Tensor[(2, 3), int64]", "negative(%x)", False, 9)],
    "abs": [("%x: Tensor[(2, 3), int32]", "abs(subtract(%x, 4))", False, 9),
            ("%x: Tensor[(2, 3), float16]", "abs(%x)", False, 2),
            ("%x: Tensor[(2, 3), float32]", "abs(%x)", False, 2)],
    "exp": [("%x: Tensor[(3, 5), float16]", "exp(%x)", False, 2),
           ("%x: float64", "exp(%x)", False, 2),
            ("%x: Tensor[(4, 5), float32]", "exp(%x)", False, 2),
            ("%x: Tensor[(4, 5), float16]", "exp(%x)", False, 2)],
    "log": [("%x: Tensor[(3, 5), float16]", "log(%x)", True, 2),
           ("%x: Tensor[(4, 5), float32]", "log(%x)", True, 2)],
    "sqrt": [("%x: Tensor[(3, 5), float16]", "sqrt(%x)", True, 2),
           ("%x: Tensor[(4, 5), float32]", "sqrt(%x)", True, 2)],
    "rsqrt": [("%x: Tensor[(3, 5), float16]", "rsqrt(%x)", True, 2),
           ("%x: Tensor[(4, 5), float32]", "rsqrt(%x)", True, 2)],
    "sigmoid": [("%x: Tensor[(3, 5), float16]", "sigmoid(%x)", False, 2),
           ("%x: Tensor[(4, 5), float32]", "sigmoid(%x)", False, 2)],
    "tanh": [("%x: Tensor[(3, 5), float16]", "tanh(%x)", False, 2),
           ("%x: Tensor[(4, 5), float32]", "tanh(%x)", False, 2)],
    "sin": [("%x: Tensor[(3, 5), float16]", "sin(%x)", False, 2),
           ("%x: Tensor[(4, 5), float32]", "sin(%x)", False, 2)],
    "cos": [("%x: Tensor[(3, 5), float16]", "cos(%x)", False, 2),
           ("%x: Tensor[(4, 5), float32]", "cos(%x)", False, 2)],
    "erf": [("%x: Tensor[(3, 5), float16]", "erf(%x)", False, 2),
           ("%x: Tensor[(4, 5), float32]", "erf(%x)", False, 2),
            ("%x: Tensor[(2, 3), float64]", "erf(multiply(%x, 3f64))", False, 2)],
    "nn.relu": [("%x: Tensor[(2, 3), float16]", "nn.relu(%x)", False, 2),
                ("%x: Tensor[(4, 5), float32]", "nn.relu(%x)", False, 2),
                ("%x: Tensor[(2, 3), int32]", "nn.relu(subtract(%x, 3))", False, 7)],
    "clip": [("%x: Tensor[(4, 5), float32]", "clip(%x, a_min=-0.75f, a_max=1)", False, 2),
             ("%x: Tensor[(2, 3), int32]", "clip(%x, a_min=2, a_max=5)", False, 8)],
    "copy": [("%x: Tensor[(2, 3), int64]", "copy(%x)", False, 100)],
    "equal": [("%x: Tensor[(2, 3), bool], %y: Tensor[(3,), bool]", "equal(%x, %y)", False, 2),
              ("%x: Tensor[(2, 3), float16], %y: Tensor[(3,), float16]", "less(%x, %y)", False, 2),
              (I23, "equal(%x, %y)", False, 3), (F23, "equal(%x, %x)", False, 2)],
    "not_equal": [(I23, "not_equal(%x, %y)", False, 3)],
    "less": [("%x: Tensor[(2, 3), int64]", "less(add(%x, 4999999998i64), 5000000000i64)", False, 4),
             (F23, "less(%x, %y)", False, 2), (I23, "%x < %y", False, 3)],
    "less_equal": [(I23, "less_equal(%x, %y)", False, 3)],
    "greater": [(F23, "greater(%x, %y)", False, 2)],
    "greater_equal": [(I23, "greater_equal(%x, %y)", False, 3), (F23, "%x >= %y", False, 2)],
    "where": [("%x: Tensor[(2, 3), float64], %y: float64", "(where(True, %x, %y), where(False, %x, %y))", False, 2),
              ("%c: Tensor[(2, 1), bool], %x: float64, %y: Tensor[(3,), float64]", "where(%c, %x, %y)",
               False, 2),
              ("%c: Tensor[(3,), bool], %x: Tensor[(2, 1), int32], %y: int32", "where(%c, %x, %y)",
               False, 10),
              (F23, "where(greater(%x, %y), %x, %y)", False, 2)],
    "zeros": [("%x: Tensor[(2,), float64]", "(zeros(shape=[], dtype=\"int64\"), ones(shape=[2, 1], dtype=\"bool\"), %x)",
               False, 2),
              ("%x: Tensor[(2,), float64]", "(zeros(shape=[2, 3], dtype=\"float32\"), %x)", False, 2),
              ("%x: Tensor[(2,), float64]", "add(zeros(shape=[2], dtype=\"float64\"), %x)", False, 2)],
    "ones": [("%x: Tensor[(3,), int64]", "add(ones(shape=[2, 3], dtype=\"int64\"), %x)", False, 5)],
    "full": [("%v: float32", "full(%v, shape=[2, 3])", False, 2),
             ("%v: float64", "full(%v, shape=[3], dtype=\"int32\")", False, 2),
             ("%x: Tensor[(2,), float32]", "add(full(2.5f, shape=[2]), %x)", False, 2)],
    "zeros_like": [("%x: Tensor[(2, 3), float32]", "zeros_like(%x)", False, 2)],
    "ones_like": [("%x: Tensor[(2, 3), int32]", "ones_like(%x)", False, 5)],
    "full_like": [("%x: Tensor[(2, 3), float64], %v: float64", "full_like(%x, %v)", False, 2),
                  ("%x: Tensor[(2, 3), int64], %v: int64", "full_like(%x, %v)", False, 9)],
    "cast": [("%c: Tensor[(2, 3), bool], %x: Tensor[(2, 3), float64]",
              "cast(where(%c, %x, zeros_like(%x)), dtype=\"bool\")", False, 2),
             ("%x: Tensor[(2, 3), int64]", "cast(subtract(%x, 5000000000i64), dtype=\"float64\")", False, 9),
             ("%x: Tensor[(2, 3), float32]", "cast(multiply(%x, -7.5f), dtype=\"int64\")", False, 2),
             ("%x: Tensor[(2, 3), float64]", "cast(%x, dtype=\"float32\")", False, 2),
             ("%x: Tensor[(2, 3), float64]", "cast(multiply(%x, 5f64), dtype=\"int32\")", False, 2),
             ("%x: Tensor[(2, 3), int32]", "cast(%x, dtype=\"float64\")", False, 100),
             ("%x: Tensor[(2, 3), int64]", "cast(%x, dtype=\"bool\")", False, 3),
             ("%x: Tensor[(2, 3), bool]", "cast(%x, dtype=\"float32\")", False, 2),
             ("%x: Tensor[(2, 3), float32]", "cast(%x, dtype=\"float16\")", False, 2)],
    "sum_pair": [("%x: Tensor[(2, 3, 4), float64], %y: Tensor[(2, 3, 4), float64]",
                  "sum_pair(%x, %x * %y, axis=[0, 2])", False, 2),
                 ("%x: Tensor[(4, 3, 40), float32], %y: Tensor[(4, 3, 40), float32]",
                  "sum_pair(%x, %y, axis=1, exclude=True, keepdims=True)", False, 2),
                 ("%x: Tensor[(64, 40), float32], %y: Tensor[(64, 40), float32]",
                  "sum_pair(%x, %y, axis=0)", False, 2),
                 ("%x: Tensor[(2, 3, 4), int32], %y: Tensor[(2, 3, 4), int32]", "sum_pair(%x, %y, axis=1)", False, 10)],
    "sum": [("%x: Tensor[(2, 0, 3), float64]", "sum(%x, axis=1)", False, 2),
            ("%a: Tensor[(3, 0), float64], %b: Tensor[(0, 2), float64]", "(matmul(%a, %b), nn.dense(%a, %a))", False, 2),
            (F234, "sum(%x)", False, 2), (F234, "sum(%x, axis=1, exclude=True)", False, 2),
            (F234, "sum(%x, axis=[-1, 0], keepdims=True)", False, 2),
            ("%x: Tensor[(2, 3, 4), int32]", "sum(%x, axis=1)", False, 10),
            (S234, "sum(%x, axis=[0, 1])", False, 2),
            ("%x: Tensor[(2, 3, 4), float16]", "sum(%x, axis=-1)", True, 2),
            ("%x: float64", "sum(%x)", False, 2),
            ("%x: Tensor[(2, 3, 4), int64]", "sum(subtract(%x, 50i64), axis=[0, 2], keepdims=True)", False, 100),
            # TVM's GetReduceAxes: axis None (or []) reduces every axis, `exclude` notwithstanding
            (F234, "sum(%x, exclude=True)", False, 2),
            # outputs side by side in lanes on a CPU: column sums (2 blocks of 16 and a
            # remainder), short rows, float16 columns
            ("%x: Tensor[(40, 37), float32]", "sum(%x, axis=0)", False, 2),
            ("%x: Tensor[(37, 5), float64]", "sum(%x, axis=1, keepdims=True)", False, 2),
            ("%x: Tensor[(9, 33), float16]", "sum(%x, axis=0)", True, 2),
            (F234, "sum(%x, axis=[])", False, 2)],
    "mean": [("%x: Tensor[(2, 3, 4), float16]", "mean(%x, axis=[0, 2], keepdims=True)", False, 2),
             (F234, "mean(%x)", False, 2), (F234, "mean(%x, axis=[0, 2], exclude=True, keepdims=True)",
                                             False, 2), (S234, "mean(%x, axis=-1)", False, 2)],
    "max": [(F234, "max(%x)", False, 2), (F234, "max(%x, axis=[0, 1], keepdims=True)", False, 2),
            ("%x: Tensor[(2, 3, 4), int64]", "max(%x, axis=2)", False, 100),
            ("%x: Tensor[(2, 3, 4), int32]", "max(subtract(%x, 200), axis=[1, 2])", False, 100),
            ("%x: Tensor[(2, 3, 4), float32]", "max(%x, axis=0, exclude=True)", False, 2),
            ("%x: Tensor[(2, 3, 4), float64]", "max(%x, exclude=True)", False, 2)],  # see sum
    "min": [(F234, "min(%x, axis=1, exclude=True)", False, 2),
            ("%x: Tensor[(2, 3, 4), int32]", "min(%x)", False, 100),
            ("%x: Tensor[(2, 3, 4), int64]", "min(add(%x, 5000000000i64), axis=1)", False, 100)],
    "variance": [(F234, "variance(%x)", False, 2), (F234, "variance(%x, axis=1, unbiased=True)", False, 2),
                 (F234, "variance(%x, axis=[0, 2], keepdims=True)", False, 2)],
    "reshape": [("%x: Tensor[(1,), float64]", "reshape(%x, newshape=[])", False, 2),
                ("%x: float64", "reshape(%x, newshape=[1, 1])", False, 2),
                (F234, "reshape(%x, newshape=[-1])", False, 2),
                (F234, "reshape(%x, newshape=[4, 0, 2])", False, 2),
                ("%x: Tensor[(2, 0, 4), float64]", "reshape(%x, newshape=[0, 8], allowzero=True)", False, 2),
                ("%x: Tensor[(2, 3, 4), int32]", "reshape(%x, newshape=[2, -1, 3])", False, 50)],
    "transpose": [("%x: Tensor[(2, 3, 4), float64], %y: Tensor[(4, 1), float64]",
                   "exp(add(transpose(reshape(%x, newshape=[4, 6]), axes=[1, 0]), transpose(%y)))", False, 2),
                  ("%x: Tensor[(2, 3, 4), float64]",
                   "sum(multiply(transpose(%x, axes=[2, 0, 1]), expand_dims(reverse(transpose(%x, axes=[2, 0, 1]), axis=-1), "
                   "axis=0)), axis=1)",
                   False, 2),
                  (F234, "transpose(%x)", False, 2), (F234, "transpose(%x, axes=[-1, 0, 1])", False, 2),
                  (F234, "permute_dims(%x, axes=[0, 2, 1])", False, 2)],
    "expand_dims": [(F234, "expand_dims(%x, axis=3)", False, 2),
                    ("%x: float64", "expand_dims(%x, axis=0, num_newaxis=3)", False, 2),
                    (F234, "expand_dims(%x, axis=-1)", False, 2), (F234, "expand_dims(%x, axis=0)", False, 2),
                    (F234, "expand_dims(%x, axis=-2, num_newaxis=2)", False, 2)],
    "squeeze": [("%x: Tensor[(1, 1), int32]", "squeeze(%x)", False, 9),
                ("%x: Tensor[(2, 3), float64]", "squeeze(%x)", False, 2),
                ("%x: Tensor[(1, 3, 1), float64]", "squeeze(%x)", False, 2),
                ("%x: Tensor[(1, 3, 1), float64]", "squeeze(%x, axis=[-1])", False, 2)],
    "nn.batch_flatten": [("%x: Tensor[(3, 2, 2, 2), int32]", "nn.batch_flatten(%x)", False, 50)],
    "broadcast_to": [("%x: Tensor[(4,), int32]", "broadcast_to(%x, shape=[3, 4])", False, 50),
                     ("%x: float64", "broadcast_to(%x, shape=[2, 2])", False, 2)],
    "collapse_sum_to": [(F234, "collapse_sum_to(%x, shape=[1, 3, 1])", False, 2),
                        (F234, "collapse_sum_to(%x, shape=[2, 3, 4])", False, 2),
                        (F234, "collapse_sum_to(%x, shape=[4])", False, 2),
                        (F234, "collapse_sum_to(%x, shape=[2, 1, 1])", False, 2),
                        (F234, "collapse_sum_to(%x, shape=[])", False, 2)],
    "collapse_sum_like": [("%x: Tensor[(2, 3, 4), float64], %y: Tensor[(2, 3, 4), float64]",
                           "collapse_sum_like(%x, %y)", False, 2)],
    "reverse": [(F234, "reverse(cumsum(reverse(%x, axis=1), axis=1), axis=1)", False, 2),
                (F234, "reverse(%x, axis=0)", False, 2), (F234, "reverse(%x, axis=1)", False, 2)],
    # the CNN family beyond its gradient examples: float32 and float16 (float32 accumulation),
    # the stride-1 paths (padded copies) and the gathering ones (strides), and the backward
    # operators without gradient examples
    "nn.conv2d": [
        ("%x: Tensor[(2, 4, 9, 8), float32], %w: Tensor[(6, 4, 3, 3), float32]", "nn.conv2d(%x, %w, padding=1)",
         False, 2),
        # implicit GEMMs in the GPU's shared-memory tiles (cuda/conv.cpp): 33 and 2 x 32 output
        # channels over 36-49 pixels, strided and padded, grouped; the batch and groups as blocks
        ("%x: Tensor[(2, 3, 9, 9), float64], %w: Tensor[(33, 3, 3, 3), float64]", "nn.conv2d(%x, %w, padding=1)",
         False, 2),
        ("%x: Tensor[(1, 4, 12, 12), float32], %w: Tensor[(64, 2, 3, 3), float32]",
         "nn.conv2d(%x, %w, strides=2, padding=1, groups=2)", False, 2),
        ("%x: Tensor[(2, 4, 9, 8), float16], %w: Tensor[(6, 2, 3, 2), float16]",
         "nn.conv2d(%x, %w, padding=[1, 0, 2, 1], dilation=[2, 1], groups=2)", False, 2),
        ("%x: Tensor[(1, 3, 11, 10), float32], %w: Tensor[(5, 3, 3, 3), float32]",
         "nn.conv2d(%x, %w, strides=2, padding=[1, 1])", False, 2),
        ("%x: Tensor[(2, 3, 7, 7), float64], %w: Tensor[(3, 1, 3, 3), float64]",
         "nn.conv2d(%x, %w, strides=[1, 2], groups=3)", False, 2),
        # images large enough for the padded grid (at most 1.2x the output's pixels): small
        # ones take the im2col path, these the stride-1 one
        ("%x: Tensor[(2, 4, 24, 24), float64], %w: Tensor[(6, 2, 3, 3), float64]",
         "nn.conv2d(%x, %w, padding=[1, 1], groups=2)", False, 2),
        ("%x: Tensor[(1, 3, 40, 26), float32], %w: Tensor[(5, 3, 3, 3), float32]",
         "nn.conv2d(%x, %w, padding=[2, 1], dilation=[2, 1])", False, 2)],
    "nn.conv2d_transpose": [
        ("%x: Tensor[(2, 4, 5, 4), float32], %w: Tensor[(4, 3, 3, 3), float32]",
         "nn.conv2d_transpose(%x, %w, strides=2, padding=1, output_padding=1)", False, 2),
        ("%x: Tensor[(2, 4, 5, 4), float16], %w: Tensor[(4, 3, 2, 2), float16]",
         "nn.conv2d_transpose(%x, %w, groups=2)", False, 2),
        ("%x: Tensor[(2, 4, 24, 24), float64], %w: Tensor[(4, 3, 3, 3), float64]",
         "nn.conv2d_transpose(%x, %w, padding=1, groups=2)", False, 2),
        ("%x: Tensor[(2, 4, 12, 12), float64], %w: Tensor[(4, 3, 3, 3), float64]",
         "nn.conv2d_transpose(%x, %w, padding=1)", False, 2),
        # depthwise with strides (each output row by its residue), a channel multiplier of 2
        ("%x: Tensor[(2, 3, 5, 6), float64], %w: Tensor[(3, 2, 3, 3), float64]",
         "nn.conv2d_transpose(%x, %w, strides=[2, 3], padding=[1, 0, 2, 1], output_padding=[1, 2], dilation=[1, 2], "
         "groups=3)", False, 2),
        ("%x: Tensor[(2, 4, 7, 7), float32], %w: Tensor[(4, 1, 3, 3), float32]",
         "nn.conv2d_transpose(%x, %w, strides=2, padding=1, output_padding=1, groups=4)", False, 2)],
    "nn.conv2d_backward_weight": [
        ("%g: Tensor[(2, 6, 9, 8), float64], %x: Tensor[(2, 4, 9, 8), float64]",
         "nn.conv2d_backward_weight(%g, %x, padding=1, kernel_size=[3, 3], groups=2)", False, 2),
        ("%g: Tensor[(2, 5, 4, 3), float32], %x: Tensor[(2, 3, 9, 7), float32]",
         "nn.conv2d_backward_weight(%g, %x, strides=2, padding=[0, 1], dilation=[1, 2], kernel_size=[3, 3])",
         False, 2),
        ("%g: Tensor[(2, 6, 24, 24), float64], %x: Tensor[(2, 4, 24, 24), float64]",
         "nn.conv2d_backward_weight(%g, %x, padding=1, kernel_size=[3, 3], groups=2)", False, 2)],
    "grad.max_pool2d_backward": [
        ("%g: Tensor[(2, 3, 4, 3), float64], %x: Tensor[(2, 3, 7, 6), float64]",
         "grad.max_pool2d_backward(%g, %x, pool_size=[3, 2], strides=2, padding=[1, 0])", False, 2),
        ("%g: Tensor[(2, 3, 4, 3), float32], %x: Tensor[(2, 3, 7, 6), float32]",
         "grad.max_pool2d_backward(%g, %x, pool_size=2, strides=2, ceil_mode=True)", False, 2)],
    "grad.max_pool2d_argmax": [
        ("%x: Tensor[(2, 3, 7, 6), float32]", "grad.max_pool2d_argmax(%x, pool_size=[3, 2], strides=2, padding=[1, 0])",
         False, 2),
        ("%x: Tensor[(2, 3, 7, 6), float64]",
         "grad.max_pool2d_argmax(%x, pool_size=[2, 3], strides=[3, 3], padding=[1, 0, 0, 2], dilation=[2, 1])",
         False, 2),
        ("%x: Tensor[(2, 3, 7, 6), int32]", "grad.max_pool2d_argmax(%x, pool_size=3, padding=1, ceil_mode=True)",
         False, 3),
        ("%x: Tensor[(1, 2, 5, 5), float32]", "grad.max_pool2d_argmax(%x, pool_size=4, strides=3, padding=3)", False, 2)],
    "grad.max_pool2d_unpool": [
        ("%g: Tensor[(2, 3, 4, 3), float32], %x: Tensor[(2, 3, 7, 6), float32]",
         "grad.max_pool2d_unpool(%g, grad.max_pool2d_argmax(%x, pool_size=2, strides=2, ceil_mode=True), pool_size=2, "
         "strides=2, ceil_mode=True, data_size=[7, 6])", False, 2),
        ("%g: Tensor[(2, 3, 4, 3), float32], %x: Tensor[(2, 3, 7, 6), float32]",
         "grad.max_pool2d_unpool(%g, grad.max_pool2d_argmax(%x, pool_size=3, strides=2, padding=1), pool_size=3, "
         "strides=2, padding=1, data_size=[7, 6])", False, 2),
        # ties: every window's maximum repeated, the first one receives it
        ("%g: Tensor[(2, 3, 4, 6), float32], %x: Tensor[(2, 3, 7, 6), int32]",
         "grad.max_pool2d_unpool(%g, grad.max_pool2d_argmax(%x, pool_size=3, strides=[2, 1], padding=1), "
         "pool_size=3, strides=[2, 1], padding=1, data_size=[7, 6])", False, 2)],
    "nn.max_pool2d": [("%x: Tensor[(2, 3, 7, 6), float16]", "nn.max_pool2d(%x, pool_size=2, strides=2)", False, 2),
                      ("%x: Tensor[(2, 3, 7, 6), int32]", "nn.max_pool2d(%x, pool_size=3, padding=1)", False, 9)],
    "nn.avg_pool2d": [("%x: Tensor[(2, 3, 7, 6), float16]",
                       "nn.avg_pool2d(%x, pool_size=3, strides=2, padding=1, ceil_mode=True)", False, 2)],
    "nn.batch_norm": [("%x: Tensor[(2, 3, 4), float16], %g: Tensor[(3,), float16], %b: Tensor[(3,), float16], "
                       "%m: Tensor[(3,), float16], %v: Tensor[(3,), float16]",
                       "nn.batch_norm(%x, %g, %b, %m, %v)", True, 2)],
    "scan": [("%h: Tensor[(3,), float32], %x: Tensor[(1, 3), float32]", "scan(fn (%s, %xt) { %s + %xt }, %h, %x)",
              False, 2),
             ("%h: Tensor[(2, 4), float32], %x: Tensor[(6, 2, 4), float32]",
              "scan(fn (%s, %xt) { nn.softmax(%s * %xt + %xt) }, %h, %x)", False, 2),
             ("%h: Tensor[(3,), float32], %e: Tensor[(4, 3), float32], %tok: Tensor[(5,), int32]",
              "scan(fn (%s, %k: Tensor[(), int32]) { tanh(%s + take(%e, %k, axis=0)) }, %h, %tok)", False, 4),
             ("%h: Tensor[(3,), float64], %x: Tensor[(4, 2, 3), float64]",
              "scan(fn (%s, %xt) { sum(scan(fn (%a, %b) { %a * %b + %s }, %s, %xt), axis=[0]) }, %h, %x)",
              False, 2),
             ("%h: Tensor[(2,), int32], %x: Tensor[(5, 2), int32]",
              "%f = fn (%s: Tensor[(2,), int32], %xt: Tensor[(2,), int32]) { %s * 2 + %xt }; scan(%f, %h, %x)",
              False, 5)],
    # long axes, few rows: the chunked scan (op/scan.cpp: chunked_scan) on a GPU, and on a CPU with more
    # cores than rows
    "cumsum": [("%x: Tensor[(3000,), float32]", "cumsum(%x)", False, 2),
               ("%x: Tensor[(1, 2500), float64]", "cumsum(%x, axis=1, exclusive=True)", False, 2),
               (S234, "cumsum(%x, exclusive=True)", False, 2),
               ("%x: Tensor[(2, 3, 4), float16]", "cumsum(%x, axis=0)", False, 2),
               (F234, "cumsum(%x)", False, 2), (F234, "cumsum(%x, axis=-1)", False, 2),
               (F234, "cumsum(%x, exclusive=True)", False, 2),
               ("%x: Tensor[(2, 5), int32]", "cumsum(%x, axis=1)", False, 10)],
    "argmax": [(F234, "argmax(%x, axis=1)", False, 2), (F234, "argmax(%x)", False, 2),
               (F234, "argmax(%x, axis=[0, 2], keepdims=True)", False, 2),
               ("%x: Tensor[(3, 4), int32]", "argmax(%x, axis=1, select_last_index=True)", False, 3)],
    "argmin": [(F234, "argmin(%x, axis=-1)", False, 2), ("%x: Tensor[(3, 4), int64]", "argmin(%x, axis=0)", False, 3)],
    "logical_and": [("%a: Tensor[(2, 3), bool], %b: Tensor[(3,), bool]", "logical_and(%a, %b)", False, 2)],
    "logical_or": [("%a: Tensor[(2, 3), bool], %b: Tensor[(2, 1), bool]", "logical_or(%a, %b)", False, 2)],
    "logical_not": [("%a: Tensor[(2, 3), bool]", "logical_not(%a)", False, 2)],
    "isnan": [("%x: Tensor[(2, 3), float32]", "isnan(log(%x))", False, 2),
              ("%x: Tensor[(2, 3), int32]", "isnan(%x)", False, 2)],
    "isinf": [("%x: Tensor[(2, 3), float64]", "isinf(log(%x * %x))", False, 2),
              ("%x: Tensor[(2, 3), float32]", "isinf(%x / %x)", False, 2)],
    "one_hot": [("%i: Tensor[(2, 3), int64]", "one_hot(%i, 1f64, -0.5f64, depth=4)", False, 5),
                ("%i: Tensor[(3,), int32]", "one_hot(%i, 2f, 0f, depth=3, axis=0)", False, 4),
                ("%i: Tensor[(2, 2), int64]", "one_hot(%i, 1f, 0f, depth=3, axis=1, dtype=\"int32\")", False, 3)],
    "cumprod": [(F234, "cumprod(%x)", False, 2), (F234, "cumprod(%x, axis=1, exclusive=True)", False, 2),
                ("%x: Tensor[(1200, 1), float64]", "cumprod(%x, axis=0)", True, 2),
                ("%x: Tensor[(1100,), float64]", "cumprod(%x, exclusive=True)", True, 2)],
    "nn.dense": [("%x: Tensor[(3, 5), float16], %w: Tensor[(4, 5), float16]", "nn.dense(%x, %w)", False, 2),
                 ("%x: Tensor[(37, 70), float64], %w: Tensor[(29, 70), float64]", "nn.dense(%x, %w)", False, 2),
                 ("%x: Tensor[(7,), float64], %w: Tensor[(3, 7), float64]", "nn.dense(%x, %w)", False, 2),
                 ("%x: Tensor[(2, 3, 5), float64], %w: Tensor[(4, 5), float64]", "nn.dense(%x, %w)", False, 2),
                 ("%x: Tensor[(7, 19), float32], %w: Tensor[(9, 19), float32]", "nn.dense(%x, %w)", False, 2),
                 # the GPU's shared-memory tiles (cuda/Gemm.cpp): partial 64 x 64 tiles, K not a
                 # multiple of 16, float16 summed in float32, a fused consumer
                 ("%x: Tensor[(70, 45), float32], %w: Tensor[(100, 45), float32]", "nn.dense(%x, %w)", False, 2),
                 ("%x: Tensor[(40, 20), float16], %w: Tensor[(36, 20), float16]", "nn.dense(%x, %w)", False, 2),
                 ("%x: Tensor[(2, 33, 9), float64], %w: Tensor[(65, 9), float64]", "tanh(nn.dense(%x, %w))",
                  False, 2)],
    "matmul": [("%a: Tensor[(3, 5), float16], %b: Tensor[(5, 4), float16]", "matmul(%a, %b)", False, 2),
               ("%a: Tensor[(33, 65), float64], %b: Tensor[(65, 47), float64]", "matmul(%a, %b)", False, 2),
               ("%a: Tensor[(3, 1, 9, 13), float64], %b: Tensor[(1, 2, 13, 10), float64]", "matmul(%a, %b)",
                False, 2),
               ("%a: Tensor[(17,), float32], %b: Tensor[(17, 21), float32]", "matmul(%a, %b)", False, 2),
               ("%a: Tensor[(4, 5), int32], %b: Tensor[(5, 3), int32]", "matmul(%a, %b)", False, 9),
               ("%a: Tensor[(2, 1, 3, 5), float64], %b: Tensor[(4, 5, 2), float64]", "matmul(%a, %b)", False, 2),
               ("%a: Tensor[(9, 17), float32], %b: Tensor[(17, 33), float32]", "matmul(%a, %b)", False, 2),
               # GPU tiles: a broadcast batch as more blocks, integers summed without FMA
               ("%a: Tensor[(2, 1, 40, 21), float64], %b: Tensor[(3, 21, 35), float64]", "matmul(%a, %b)",
                False, 2),
               ("%a: Tensor[(33, 17), int32], %b: Tensor[(17, 40), int32]", "matmul(%a, %b)", False, 9),
               # the large tiles (128 x 128, 8 deep), partial in M, N and K
               ("%a: Tensor[(130, 21), float32], %b: Tensor[(21, 150), float32]", "matmul(%a, %b)", False, 2)],
    "nn.bias_add": [("%x: Tensor[(2, 3), int32], %b: Tensor[(3,), int32]", "nn.bias_add(%x, %b)", False, 9),
                    ("%x: Tensor[(2, 3, 4), float64], %b: Tensor[(4,), float64]", "nn.bias_add(%x, %b, axis=-1)",
                     False, 2),
                    ("%x: Tensor[(2, 3), float64], %b: Tensor[(2,), float64]", "nn.bias_add(%x, %b, axis=0)",
                     False, 2)],
    "nn.softmax": [("%x: Tensor[(3, 1), float64]", "nn.softmax(%x)", False, 2),
                   (F234, "nn.softmax(multiply(%x, 1000f64))", False, 2),
                   ("%x: Tensor[(3, 7), float16]", "nn.softmax(%x)", False, 2),
                   (F234, "nn.softmax(%x, axis=1)", False, 2), (S234, "nn.softmax(%x, axis=0)", False, 2),
                   # short rows side by side in lanes on a CPU: 2 blocks of 16 rows and a remainder
                   ("%x: Tensor[(37, 10), float32]", "nn.softmax(multiply(%x, 30f))", False, 2),
                   ("%x: Tensor[(5, 19, 3), float16]", "nn.softmax(%x, axis=1)", False, 2),
                   # a GPU warp per row (cuda/softmax.cpp): rows of several 32-element strides,
                   # 9 rows for blocks of 8 warps
                   ("%x: Tensor[(9, 100), float32]", "nn.softmax(multiply(%x, 8f))", False, 2)],
    "nn.log_softmax": [(F234, "nn.log_softmax(multiply(%x, 1000f64), axis=0)", False, 2),
                       (F234, "nn.log_softmax(%x)", False, 2), (S234, "nn.log_softmax(%x, axis=-3)", False, 2),
                       ("%x: Tensor[(33, 10), float32]", "nn.log_softmax(multiply(%x, 30f))", False, 2),
                       ("%x: Tensor[(3, 70, 2), float64]", "nn.log_softmax(%x, axis=1)", False, 2)],
    "nn.nll_loss": [("%p: Tensor[(3, 4), float64], %t: Tensor[(3,), int32]",
                     "nn.nll_loss(%p, %t, reduction=\"sum\")", False, 4),
                    ("%p: Tensor[(4,), float64], %t: int64", "nn.nll_loss(%p, %t)", False, 4),
                    ("%p: Tensor[(5, 3), float64], %t: Tensor[(5,), int64], %w: Tensor[(3,), float64]",
                     "nn.nll_loss(%p, %t, %w, ignore_index=2)", True, 3),
                    ("%p: Tensor[(4, 3), float32], %t: Tensor[(4,), int64]",
                     "nn.nll_loss(nn.log_softmax(%p), %t, reduction=\"none\")", False, 3),
                    # targets in [-1, 3): -1 is out of range but ignored
                    ("%p: Tensor[(6, 3), float64], %t: Tensor[(6,), int64]",
                     "nn.nll_loss(%p, subtract(%t, 1i64), ignore_index=-1)", False, 4),
                    ("%p: Tensor[(2, 3, 2, 2), float64], %t: Tensor[(2, 2, 2), int32], %w: Tensor[(3,), float64]",
                     "nn.nll_loss(%p, %t, %w)", True, 3),
                    # every target ignored: "mean" is 0/0 = nan, as in PyTorch
                    ("%p: Tensor[(3, 4), float64], %t: Tensor[(3,), int64]",
                     "nn.nll_loss(%p, %t, ignore_index=0)", False, 1)],
    "grad.nll_loss_backward": [(NLL3[0], "grad.nll_loss_backward(%g, %p, %t)", False, NLL3[1]),
                               (NLLW[0], "grad.nll_loss_backward(%g, %p, %t, %w)", True, NLLW[1]),
                               (NLLW[0], "grad.nll_loss_backward(%g, %p, %t, %w, reduction=\"sum\", "
                                         "ignore_index=1)", True, NLLW[1]),
                               (NLLWN[0], "grad.nll_loss_backward(%g, %p, %t, %w, reduction=\"none\", "
                                          "ignore_index=0)", True, NLLWN[1])],
    "grad.nll_loss_weights_backward": [
        (NLLW[0], "grad.nll_loss_weights_backward(%g, %p, %t, %w)", True, NLLW[1]),
        ("%g: float64, %p: Tensor[(6, 3), float64], %t: Tensor[(6,), int64], %w: Tensor[(3,), float64]",
         "grad.nll_loss_weights_backward(%g, %p, %t, %w, ignore_index=2)", True, 3),
        (NLLW[0], "grad.nll_loss_weights_backward(%g, %p, %t, %w, reduction=\"sum\", ignore_index=1)",
         True, NLLW[1]),
        (NLLWN[0], "grad.nll_loss_weights_backward(%g, %p, %t, %w, reduction=\"none\", ignore_index=0)",
         True, NLLWN[1])],
    "grad.no_grad": [("%x: Tensor[(2, 3), float64]", "grad.no_grad(%x)", False, 2),
                     ("%x: Tensor[(2, 3), int32]", "grad.no_grad(%x)", False, 9)],
    "grad.start_checkpoint": [("%x: Tensor[(2, 3), float64]",
                               "grad.end_checkpoint(exp(grad.start_checkpoint(%x)))", False, 2)],
}

# ----------------------------------------------------------------------------------------------
# the body parser and evaluator
# ----------------------------------------------------------------------------------------------

LITERAL_DTYPES = {"f": "float32", "f16": "float16", "f32": "float32", "f64": "float64",
                  "i32": "int32", "i64": "int64", "i8": "int8", "u8": "uint8", "b": "bool"}
INFIX = {"*": ("multiply", 5), "/": ("divide", 5), "+": ("add", 4), "-": ("subtract", 4),
         "<": ("less", 3), "<=": ("less_equal", 3), ">": ("greater", 3), ">=": ("greater_equal", 3),
         "==": ("equal", 2), "!=": ("not_equal", 2)}

TOKEN = re.compile(r"""\s*(?:
    (?P<var>%[A-Za-z0-9_]+)
  | (?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?(?:f16|f32|f64|f|i32|i64|i8|u8)?)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<id>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<op><=|>=|==|!=|->|[-+*/<>(),=\[\];:.{}])
)""", re.X)


class ParseError(Exception):
    pass


def tokenize(text):
    toks, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        if toks and toks[-1] == ("op", "."):  # a projection index: digits only (`%t.0.1`)
            m = re.compile(r"\s*(\d+)").match(text, pos)
            if not m:
                raise ParseError(f"expected a field index at {pos}")
            toks.append(("int", m.group(1)))
            pos = m.end()
            continue
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ParseError(f"cannot tokenize {text[pos:pos + 20]!r}")
        pos = m.end()
        toks.append((m.lastgroup, m.group(m.lastgroup)))
    return toks


def literal(tok, negate=False):
    m = re.fullmatch(r"(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)(f16|f32|f64|f|i32|i64|i8|u8)?", tok)
    num, suffix = m.group(1), m.group(2)
    is_float = "." in num or "e" in num.lower()
    if suffix:
        dtype = LITERAL_DTYPES[suffix]
    elif is_float:
        dtype = "float32"  # `1.5` is float32, as in TVM
    else:  # the sign is part of the literal: -2147483648 is int32
        dtype = "int32" if -2 ** 31 <= (-int(num) if negate else int(num)) < 2 ** 31 else "int64"
    value = float(num) if is_float or dtype.startswith("float") else int(num)
    return np.asarray(-value if negate else value, dtype=dtype)


class Parser:
    """body := (`%v =` expr `;` | `let %v [: type] =` expr `;`)* expr"""

    def __init__(self, text):
        self.toks = tokenize(text)
        self.i = 0

    def peek(self, k=0):
        return self.toks[self.i + k] if self.i + k < len(self.toks) else (None, None)

    def take(self, value=None):
        tok = self.peek()
        if tok[0] is None or (value is not None and tok[1] != value):
            raise ParseError(f"expected {value!r}, found {tok[1]!r}")
        self.i += 1
        return tok

    def body(self, end=None):
        """Bindings then a result, up to the end of the text or the token `end`."""
        binds = []
        while True:
            if self.peek()[1] == "let":
                self.take()
                name = self.take()[1]
                if self.peek()[1] == ":":  # skip the type annotation up to `=`
                    depth = 0
                    while not (depth == 0 and self.peek()[1] == "="):
                        t = self.take()[1]
                        depth += t in "([" and 1 or 0
                        depth -= t in ")]" and 1 or 0
                self.take("=")
            elif self.peek()[0] == "var" and self.peek(1)[1] == "=":
                name = self.take()[1]
                self.take("=")
            else:
                break
            binds.append((name, self.expr()))
            self.take(";")
        result = self.expr()
        if self.peek()[1] != end:
            raise ParseError(f"trailing {self.peek()[1]!r}")
        return ("let", binds, result)

    def skip_type(self, stop):
        """Skips a type annotation up to a token of `stop` outside brackets."""
        depth = 0
        while not (depth == 0 and self.peek()[1] in stop):
            t = self.take()[1]
            depth += t in ("(", "[") and 1 or 0
            depth -= t in (")", "]") and 1 or 0

    def function(self):
        """fn (%p [: type], ...) [-> type] { body }: the parameters' names and the body."""
        self.take("fn")
        self.take("(")
        params = []
        while self.peek()[1] != ")":
            params.append(self.take()[1])
            if self.peek()[1] == ":":
                self.take()
                self.skip_type((",", ")"))
            if self.peek()[1] != ")":
                self.take(",")
        self.take(")")
        if self.peek()[1] == "->":
            self.take()
            self.skip_type(("{",))
        self.take("{")
        body = self.body(end="}")
        self.take("}")
        return ("fn", params, body)

    def expr(self, min_prec=0):
        lhs = self.unary()
        while True:
            tok = self.peek()
            if tok[0] != "op" or tok[1] not in INFIX or INFIX[tok[1]][1] < min_prec:
                return lhs
            self.take()
            op, prec = INFIX[tok[1]]
            rhs = self.expr(prec + 1)
            lhs = ("call", op, [lhs, rhs], {})

    def unary(self):
        if self.peek()[1] == "-":
            self.take()
            if self.peek()[0] == "num":
                return self.postfix(("const", literal(self.take()[1], negate=True)))
            return ("call", "negative", [self.unary()], {})
        return self.postfix(self.atom())

    def postfix(self, e):
        while self.peek()[1] == ".":
            self.take()
            e = ("proj", e, int(self.take()[1]))
        return e

    def atom(self):
        kind, val = self.peek()
        if kind == "var":
            self.take()
            return ("var", val)
        if kind == "num":
            self.take()
            return ("const", literal(val))
        if kind == "id" and val in ("True", "False"):
            self.take()
            return ("const", np.asarray(val == "True"))
        if kind == "id" and val == "fn":
            return self.function()
        if kind == "id":
            self.take()
            self.take("(")
            args, attrs = [], {}
            while self.peek()[1] != ")":
                if self.peek()[0] == "id" and self.peek(1)[1] == "=":
                    key = self.take()[1]
                    self.take("=")
                    attrs[key] = self.attr_value()
                else:
                    if attrs:
                        raise ParseError("a positional argument after keyword attributes")
                    args.append(self.expr())
                if self.peek()[1] != ")":
                    self.take(",")
            self.take(")")
            return ("call", val, args, attrs)
        if val == "(":
            self.take()
            fields, trailing = [], False
            while self.peek()[1] != ")":
                fields.append(self.expr())
                trailing = False
                if self.peek()[1] != ")":
                    self.take(",")
                    trailing = True
            self.take(")")
            if len(fields) == 1 and not trailing:
                return fields[0]
            return ("tuple", fields)
        raise ParseError(f"unexpected {val!r}")

    def attr_value(self):
        kind, val = self.peek()
        if val == "[":
            self.take()
            items = []
            while self.peek()[1] != "]":
                items.append(self.attr_value())
                if self.peek()[1] != "]":
                    self.take(",")
            self.take("]")
            return items
        if val == "(":  # a shape written as a tuple
            self.take()
            items = []
            while self.peek()[1] != ")":
                items.append(self.attr_value())
                if self.peek()[1] != ")":
                    self.take(",")
            self.take(")")
            return items
        negate = False
        if val == "-":
            self.take()
            negate = True
            kind, val = self.peek()
        self.take()
        if kind == "num":
            v = literal(val, negate)
            if v.dtype.kind == "f":  # an attribute is a double: TVM's FloatImm keeps the written decimal
                num = float(re.match(r"[0-9.]+(?:[eE][+-]?[0-9]+)?", val).group(0))
                return -num if negate else num
            return int(v)
        if kind == "str":
            return json.loads(val)
        if kind == "id" and val in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[val]
        raise ParseError(f"bad attribute value {val!r}")


def parse_attr_default(text):
    if text == "(required)":
        return None, False
    try:
        p = Parser("f(x=" + text + ")")
        return p.atom()[3]["x"], True
    except (ParseError, TypeError, IndexError):
        return None, False


def calls_in(tree):
    if tree[0] == "call":
        yield tree[1]
        for a in tree[2]:
            yield from calls_in(a)
    elif tree[0] == "tuple":
        for f in tree[1]:
            yield from calls_in(f)
    elif tree[0] == "proj":
        yield from calls_in(tree[1])
    elif tree[0] == "let":
        for _, e in tree[1]:
            yield from calls_in(e)
        yield from calls_in(tree[2])
    elif tree[0] == "fn":
        yield from calls_in(tree[2])


class MissingReference(Exception):
    pass


def evaluate(tree, env, registry):
    kind = tree[0]
    if kind == "var":
        return env[tree[1]]
    if kind == "const":
        return tree[1]
    if kind == "tuple":
        return tuple(evaluate(f, env, registry) for f in tree[1])
    if kind == "proj":
        return evaluate(tree[1], env, registry)[tree[2]]
    if kind == "let":
        env = dict(env)
        for name, e in tree[1]:
            env[name] = evaluate(e, env, registry)
        return evaluate(tree[2], env, registry)
    if kind == "fn":  # a closure over the enclosing values
        _, params, body = tree
        return lambda *vals: evaluate(body, {**env, **dict(zip(params, vals))}, registry)
    _, name, args, attrs = tree
    op = registry["alias"].get(name, name)
    if op not in REFERENCE:
        raise MissingReference(f"no REFERENCE entry for operator '{op}'")
    full = dict(registry["defaults"].get(op, {}))
    full.update(attrs)
    vals = [evaluate(a, env, registry) for a in args]
    out = REFERENCE[op](vals, full)
    if isinstance(out, tuple):
        return tuple(np.asarray(o) for o in out)
    return np.asarray(out)


def leaves(value):
    if isinstance(value, tuple):
        for v in value:
            yield from leaves(v)
    else:
        yield value

# ----------------------------------------------------------------------------------------------
# running one example
# ----------------------------------------------------------------------------------------------


def split_top(text, sep=","):
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([" and 1 or 0
        depth -= ch in ")]" and 1 or 0
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


def parse_params(text):
    params = []
    for p in split_top(text):
        m = re.fullmatch(r"%(\w+)\s*:\s*(.*)", p)
        if not m:
            raise ParseError(f"bad parameter {p!r}")
        name, ty = m.group(1), m.group(2).strip()
        t = re.fullmatch(r"Tensor\[\s*\(([^)]*)\)\s*,\s*(\w+)\s*\]", ty)
        if t:
            shape = tuple(int(d) for d in t.group(1).replace(" ", "").split(",") if d)
            params.append((name, shape, t.group(2)))
        elif re.fullmatch(r"\w+", ty):
            params.append((name, (), ty))
        else:
            raise ParseError(f"unsupported parameter type {ty!r}")
    return params


def draw(rng, shape, dtype, positive, int_range):
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.startswith("int") or dtype.startswith("uint"):
        return rng.integers(0, max(int(int_range), 1), size=shape).astype(dtype)
    mag = rng.uniform(0.5, 1.5, size=shape)
    if not positive:
        mag = mag * rng.choice([-1.0, 1.0], size=shape)
    return np.asarray(mag).astype(dtype)


TOLERANCE = {"float64": (1e-10, 1e-12), "float32": (1e-5, 1e-6), "float16": (4e-3, 2e-3)}

# Operators whose every output is a sum of products of the inputs' elements (or a rearrangement):
# an output's rounding error is bounded by the sum of its terms' magnitudes, which the same
# expression evaluated on the inputs' absolute values gives, not by the output itself (a dense
# output of -0.043 from 45 terms near 1 is off by ulps of 45, not of 0.043).
MULTILINEAR = {"nn.dense", "matmul", "nn.batch_matmul", "nn.conv2d", "nn.conv2d_transpose",
               "nn.conv2d_backward_weight", "sum", "mean", "add", "subtract", "multiply", "negative",
               "transpose", "reshape", "nn.bias_add", "collapse_sum_like", "collapse_sum_to", "sum_pair"}


def ops_of(tree, registry):
    """The operators an expression tree applies (None where it has a closure or constants)."""
    kind = tree[0]
    if kind == "var":
        return set()
    if kind in ("const", "fn"):
        return None
    if kind == "tuple":
        parts = [ops_of(f, registry) for f in tree[1]]
    elif kind == "proj":
        parts = [ops_of(tree[1], registry)]
    elif kind == "let":
        parts = [ops_of(e, registry) for _, e in tree[1]] + [ops_of(tree[2], registry)]
    else:
        parts = [{registry["alias"].get(tree[1], tree[1])}] + [ops_of(a, registry) for a in tree[2]]
    if any(p is None for p in parts):
        return None
    return set().union(*parts)


def term_magnitudes(tree, env, registry):
    """Each output's sum of its terms' magnitudes where the expression is multilinear (MULTILINEAR),
    else None (compare then scales by the output itself)."""
    ops = ops_of(tree, registry)
    if ops is None or not ops or not ops <= MULTILINEAR:
        return None
    absolute = {k: np.abs(v) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v for k, v in env.items()}
    with np.errstate(all="ignore"):
        return list(leaves(evaluate(tree, absolute, registry)))


def compare(got, want, scale=None):
    """None if equal enough, else a reason. `scale`: each element's sum of its terms' magnitudes
    (term_magnitudes), the rounding error's bound, where known."""
    if got.shape != want.shape:
        return f"shape {got.shape} != reference {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != reference {want.dtype}"
    if got.size == 0:
        return None
    if got.dtype.kind == "f":
        rtol, atol = TOLERANCE[got.dtype.name]
        g, w = got.astype(np.float64), want.astype(np.float64)
        size = np.abs(w) if scale is None else np.maximum(np.abs(w), np.abs(np.asarray(scale, dtype=np.float64)))
        with np.errstate(invalid="ignore"):
            bad = ~((np.abs(g - w) <= atol + rtol * size) | (np.isnan(g) & np.isnan(w)) | (g == w))
        if not bad.any():
            return None
        err = np.where(np.isnan(g) != np.isnan(w), np.inf, np.abs(g - w))
        err = np.where(bad, err, -1)
        where = np.unravel_index(int(np.nanargmax(err)), got.shape)
        return (f"max abs err {err[where]:.3g} at {tuple(int(i) for i in where)}: "
                f"gradc {g[where]!r} vs numpy {w[where]!r} (rtol {rtol:g}, atol {atol:g})")
    bad = got != want
    if not bad.any():
        return None
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"{int(bad.sum())} of {got.size} elements differ, first at {where}: gradc {got[where]!r} vs numpy {want[where]!r}"


def run_example(gradc, registry, label, op, params_text, body, positive, int_range, workdir, verbose, extra):
    tag = f"{op}#{label}"
    try:
        params = parse_params(params_text)
        tree = Parser(body).body()
    except ParseError as e:
        return tag, f"cannot parse the example: {e}"
    d = os.path.join(workdir, re.sub(r"[^A-Za-z0-9_#.-]", "_", tag))
    os.makedirs(d)
    rng = np.random.default_rng(zlib.crc32(tag.encode()))
    env, cmd = {}, [gradc, "run", os.path.join(d, "model.relay")]
    for name, shape, dtype in params:
        x = draw(rng, shape, dtype, positive, int_range)
        env["%" + name] = x
        np.save(os.path.join(d, name + ".npy"), x)
        cmd += ["--input", f"{name}={os.path.join(d, name + '.npy')}"]
    out_dir = os.path.join(d, "out")
    cmd += ["--output-dir=" + out_dir] + extra
    with open(os.path.join(d, "model.relay"), "w") as f:
        f.write(f'#[version = "0.0.5"]\ndef @main({params_text}) {{ {body} }}\n')
    try:
        with np.errstate(all="ignore"):
            want = list(leaves(evaluate(tree, env, registry)))
        scales = term_magnitudes(tree, env, registry)
    except MissingReference as e:
        return tag, str(e)
    except Exception as e:  # a reference that cannot evaluate this example is the oracle's bug
        return tag, f"the numpy reference raised {type(e).__name__}: {e}"
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return tag, "gradc run timed out"
    if proc.returncode != 0:
        msg = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        return tag, f"gradc run exited {proc.returncode}: {' | '.join(msg[:4])}"
    got = []
    while os.path.exists(os.path.join(out_dir, f"output_{len(got)}.npy")):
        got.append(np.load(os.path.join(out_dir, f"output_{len(got)}.npy")))
    if len(got) != len(want):
        return tag, f"{len(got)} outputs, reference has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        why = compare(g, np.asarray(w), None if scales is None else scales[i])
        if why:
            return tag, (f"output {i}: {why}" if len(want) > 1 else why)
    if verbose:
        print(f"  {tag}: {' '.join(cmd)}", file=sys.stderr)
    return tag, None


def main(argv):
    extra = []
    if "--" in argv:
        argv, extra = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    args = [a for a in argv[1:] if not a.startswith("--")]
    opts = [a for a in argv[1:] if a.startswith("--")]
    only = None
    if "--only" in argv:
        only = argv[argv.index("--only") + 1]
        args.remove(only)
    if len(args) != 1:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    gradc = args[0]
    ops = json.loads(subprocess.run([gradc, "ops", "--json"], check=True, capture_output=True, text=True).stdout)
    registry = {"alias": {}, "defaults": {}}
    for o in ops:
        for a in o.get("aliases", []):
            registry["alias"][a] = o["name"]
        defaults = {}
        for at in o.get("attributes", []):
            value, ok = parse_attr_default(at["default"])
            if ok:
                defaults[at["name"]] = value
        registry["defaults"][o["name"]] = defaults
    known = {o["name"] for o in ops} | set(registry["alias"])
    if only and only not in known:
        print(f"oracle.py: no operator named '{only}' in `{gradc} ops`", file=sys.stderr)
        return 2
    only = registry["alias"].get(only, only)

    jobs, no_example = [], []
    for o in ops:
        name = o["name"]
        if only and name != only:
            continue
        cases = [(str(k), e["params"], e["body"], e["positive"], e["int_range"])
                 for k, e in enumerate(o["examples"])]
        for k, (params, body, positive, int_range) in enumerate(EXTRA_EXAMPLES.get(name, [])):
            try:
                if not set(calls_in(Parser(body).body())) <= known:
                    continue  # an operator of this extra case is not (yet) registered
            except ParseError:
                pass
            cases.append((f"x{k}", params, body, positive, int_range))
        if not o["examples"]:
            no_example.append((name, len(cases)))
        jobs += [(name,) + c for c in cases]

    verbose = "--verbose" in opts
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="gradc-oracle-") as work, \
            concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(run_example, gradc, registry, label, op, params, body, pos, ir, work, verbose, extra)
                   for op, label, params, body, pos, ir in jobs]
        for fut in futures:
            tag, why = fut.result()
            if tag in KNOWN_BUGS:
                if why is None:
                    failed += 1
                    print(f"XPASS {tag}: fixed; remove it from KNOWN_BUGS")
                else:
                    print(f"XFAIL {tag}: {KNOWN_BUGS[tag]}")
            elif why is None:
                passed += 1
                print(f"PASS {tag}")
            else:
                failed += 1
                print(f"FAIL {tag}: {why}")
    for name, extra_cases in no_example:
        print(f"no example: {name}" + (f" in the registry ({extra_cases} oracle extra cases)" if extra_cases else ""))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
