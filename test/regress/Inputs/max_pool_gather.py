"""grad.max_pool2d_backward over disjoint windows as an element-wise gather (each element from
the one window holding it: g where it is that window's argmax): the gradient of
sum(max_pool2d(x) * gy) against numpy's scan of each window in tap order (a later tap replaces
the maximum when greater or NaN; the first tap in the data always), on ties, NaN, -inf, padding,
dilation, ceil_mode and gaps between windows, and with relu before the pool (its zeros tie).
Usage: max_pool_gather.py GRADC WORKDIR."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(11)


def out_size(n, k, s, d, lo, hi, ceil):
    span = n + lo + hi - d * (k - 1) - 1
    o = (span + (s - 1 if ceil else 0)) // s + 1
    if ceil and (o - 1) * s >= n + lo:
        o -= 1
    return o


def reference(x, gy, k, s, d, pad, ceil):
    N, C, H, W = x.shape
    OH = out_size(H, k[0], s[0], d[0], pad[0], pad[2], ceil)
    OW = out_size(W, k[1], s[1], d[1], pad[1], pad[3], ceil)
    y = np.zeros((N, C, OH, OW))
    dx = np.zeros_like(x)
    for n in range(N):
        for c in range(C):
            for oh in range(OH):
                for ow in range(OW):
                    cur, arg = -np.inf, None
                    for kh in range(k[0]):
                        for kw in range(k[1]):
                            ih, iw = oh * s[0] + kh * d[0] - pad[0], ow * s[1] + kw * d[1] - pad[1]
                            if not (0 <= ih < H and 0 <= iw < W):
                                continue
                            v = x[n, c, ih, iw]
                            if arg is None or v > cur or v != v:
                                cur, arg = v, (ih, iw)
                    y[n, c, oh, ow] = cur
                    if arg is not None:
                        dx[n, c, arg[0], arg[1]] += gy[n, c, oh, ow]
    return y, dx


def case(label, shape, k, s, d=(1, 1), pad=(0, 0, 0, 0), ceil=False, fill=None, relu=False):
    x = rng.standard_normal(shape)
    if fill:
        fill(x)
    xin = np.maximum(x, 0) if relu else x
    OH = out_size(shape[2], k[0], s[0], d[0], pad[0], pad[2], ceil)
    OW = out_size(shape[3], k[1], s[1], d[1], pad[1], pad[3], ceil)
    gy = rng.standard_normal((shape[0], shape[1], OH, OW))
    _, dx = reference(xin, gy, k, s, d, pad, ceil)
    if relu:
        dx = np.where(x > 0, dx, 0.0)
    pool = "nn.max_pool2d(%s, pool_size=[%d, %d], strides=[%d, %d], dilation=[%d, %d], padding=[%d, %d, %d, %d]%s)" % (
        "nn.relu(%x)" if relu else "%x", *k, *s, *d, *pad, ", ceil_mode=True" if ceil else "")
    tag = "g%d" % case.n
    case.n += 1
    (got_dx,) = run_model(gradc, work, tag,
                          "%%x: Tensor[%s, float64], %%gy: Tensor[%s, float64]" % (tuple(shape), gy.shape),
                          "sum(multiply(%s, %%gy))" % pool, {"x": x, "gy": gy}, flags=("--grad", "--wrt=%x"))[1:]
    both_nan = np.isnan(got_dx) & np.isnan(dx)
    err = float(np.max(np.where(both_nan, 0.0, np.abs(got_dx - dx))))
    print("%s %s: error %.1e" % ("PASS" if err < 1e-12 else "FAIL", label, err))


case.n = 0


def ties(x):
    x[..., ::2, :] = 1.0  # whole rows equal: the first tap of each window wins


def nans(x):
    x[0, 0, 1, 1] = np.nan
    x[0, 1, 0, 0] = np.nan
    x[0, 1, 1, 1] = np.nan  # two NaN in one window: the later one
    x[1, 0, 2:4, 2:4] = np.nan


def minus_inf(x):
    x[0, 0] = -np.inf


case("2x2 stride 2 (vgg's)", (2, 3, 8, 10), (2, 2), (2, 2))
case("2x2 stride 2 on odd sizes", (2, 3, 7, 9), (2, 2), (2, 2))
case("2x2 stride 2, ties", (2, 3, 8, 8), (2, 2), (2, 2), fill=ties)
case("2x2 stride 2, NaN", (2, 2, 6, 6), (2, 2), (2, 2), fill=nans)
case("2x2 stride 2, -inf plane", (2, 2, 6, 6), (2, 2), (2, 2), fill=minus_inf)
case("2x2 stride 2 ceil_mode", (1, 2, 7, 5), (2, 2), (2, 2), ceil=True)
case("3x3 stride 3 pad 1", (2, 2, 11, 10), (3, 3), (3, 3), pad=(1, 1, 1, 1))
case("2x3 stride 3, dilation (2, 1), padding 1, 0, 0, 2", (2, 3, 7, 6), (2, 3), (3, 3), d=(2, 1), pad=(1, 0, 0, 2))
case("2x2 stride 3 (gaps)", (1, 2, 8, 9), (2, 2), (3, 3))
case("relu before 2x2 stride 2 (zeros tie)", (2, 3, 8, 8), (2, 2), (2, 2), relu=True)
