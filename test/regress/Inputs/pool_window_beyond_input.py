"""Pools whose window is far longer than the data (hostile-inputs report, informational: a
window of 2^31 columns with SAME padding ran 2^31 taps per output, over 60 s). The tap loops
now visit only the taps that can reach the data (and, in the gradients, the windows). Each
case against numpy, value and gradient. Usage: pool_window_beyond_input.py GRADC WORKDIR."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(5)


def axis_windows(n, k, s, d, lo, hi):
    """Per output position along one axis: the data positions its taps hit (in tap order) and
    the number of its taps inside the padded data."""
    out = (n + lo + hi - d * (k - 1) - 1) // s + 1
    hits, padded = [], []
    for o in range(out):
        start = o * s - lo
        first, end = max(0, -(start // d)), min(k, -((start - n) // d))  # ceil((0 - start) / d) ...
        hits.append([start + t * d for t in range(first, max(first, end))])
        padded.append(max(0, min(k, -((start - n - hi) // d)) - max(0, -((start + lo) // d))))
    return hits, padded


def pool(x, w, kind, k, s, d, pad, include_pad):
    """sum(pool(x) · w) and its gradient for x, in float64."""
    rows, rpad = axis_windows(x.shape[2], k[0], s[0], d[0], pad[0], pad[2])
    cols, cpad = axis_windows(x.shape[3], k[1], s[1], d[1], pad[1], pad[3])
    y = np.zeros(w.shape)
    dx = np.zeros(x.shape)
    for oh, r in enumerate(rows):
        for ow, c in enumerate(cols):
            block = x[:, :, r][:, :, :, c].reshape(x.shape[0], x.shape[1], -1)
            if kind == "max":
                first = block.argmax(axis=2)  # the first maximum in row-major tap order
                y[:, :, oh, ow] = block.max(axis=2)
                for n in range(x.shape[0]):
                    for ch in range(x.shape[1]):
                        i = first[n, ch]
                        dx[n, ch, r[i // len(c)], c[i % len(c)]] += w[n, ch, oh, ow]
            else:
                count = max(1, rpad[oh] * cpad[ow] if include_pad else len(r) * len(c))
                y[:, :, oh, ow] = block.sum(axis=2) / count
                for i in r:
                    dx[:, :, i, c] += (w[:, :, oh, ow] / count)[:, :, None]
    return (y * w).sum(), dx


cases = 0


def case(name, shape, kind, k, s, d, pad, include_pad=False):
    """Runs WORK/pN.relay, N counting the cases from 0."""
    global cases
    x = rng.standard_normal(shape)
    y_shape = shape[:2] + tuple(len(axis_windows(shape[2 + i], k[i], s[i], d[i], pad[i], pad[i + 2])[0])
                                for i in range(2))
    w = rng.standard_normal(y_shape)
    want, dx = pool(x, w, kind, k, s, d, pad, include_pad)
    attrs = "pool_size=[%d, %d], strides=[%d, %d], dilation=[%d, %d], padding=[%d, %d, %d, %d]" % (
        *k, *s, *d, *pad)
    if kind == "avg":
        attrs += ", count_include_pad=%s" % include_pad
    params = "%%x: Tensor[%s, float64], %%w: Tensor[%s, float64]" % (tuple(shape), tuple(y_shape))
    body = "sum(nn.%s_pool2d(%%x, %s) * %%w)" % (kind, attrs)
    got, got_dx = run_model(gradc, work, "p%d" % cases, params, body, {"x": x, "w": w}, flags=("--grad", "--wrt=%x"))
    cases += 1
    err = max(abs(float(got) - want), float(np.max(np.abs(got_dx - dx))))
    print("%s %s: output %s, error %.1e" % ("PASS" if err < 1e-12 else "FAIL", name, y_shape, err))


SAME = 2 ** 31 - 1  # the padding of a window of 2^31 at stride 1, split as ONNX's SAME_UPPER does
big = [0, SAME // 2, 0, SAME - SAME // 2]
case("avg_pool2d with a window of 2^31 columns over 5", (1, 2, 3, 5), "avg", (2, 2 ** 31), (1, 1), (1, 1), big)
case("avg_pool2d with a window of 2^31 columns, pads counted", (1, 2, 3, 5), "avg", (2, 2 ** 31), (1, 1), (1, 1),
     big, include_pad=True)
case("max_pool2d with a window of 2^31 columns over 5", (1, 2, 3, 5), "max", (2, 2 ** 31), (1, 1), (1, 1), big)
# Strides as long as the windows: the max pool's gradient writes each window's taps.
case("max_pool2d with disjoint windows of 2^31 columns", (1, 2, 3, 5), "max", (2, 2 ** 31), (2, 2 ** 31), (1, 1), big)
# Dilated and strided, the window 2^31 taps of 3 rows (3·(2^31 - 1) + 1 rows) over 4, unevenly padded.
span = 3 * (2 ** 31 - 1) + 1
tall = [span // 2, 1, span + 5 - span // 2, 0]
for kind in ("avg", "max"):
    case("%s_pool2d with a dilated window of 2^31 rows over 4" % kind, (2, 1, 4, 7), kind, (2 ** 31, 3), (5, 2),
         (3, 1), tall)
