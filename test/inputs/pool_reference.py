"""numpy references of the 2-D pools, for the Python checks under test/: per
window the data positions its taps hit, and sum(pool(x) · w) with its gradient
for x in float64 (max: the first maximum in row-major tap order takes the
window's adjoint, as PyTorch and gradc do)."""
import numpy as np

from gradc_run import run_model


def axis_windows(n, k, s, d, lo, hi, ceil=False):
    """Per output position along one axis: the data positions its taps hit (in tap order) and
    the number of its taps inside the padded data. With `ceil`, the extent rounds up, less a
    last window that would start past the data and its leading padding."""
    out = (n + lo + hi - d * (k - 1) - 1 + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= n + lo:
        out -= 1
    hits, padded = [], []
    for o in range(out):
        start = o * s - lo
        first, end = max(0, -(start // d)), min(k, -((start - n) // d))  # ceil((0 - start) / d) ...
        hits.append([start + t * d for t in range(first, max(first, end))])
        padded.append(max(0, min(k, -((start - n - hi) // d)) - max(0, -((start + lo) // d))))
    return hits, padded


def pool(x, w, kind, k, s, d, pad, include_pad, ceil=False):
    """sum(pool(x) · w) and its gradient for x, in float64."""
    rows, rpad = axis_windows(x.shape[2], k[0], s[0], d[0], pad[0], pad[2], ceil)
    cols, cpad = axis_windows(x.shape[3], k[1], s[1], d[1], pad[1], pad[3], ceil)
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


def check(gradc, work, tag, name, x, rng, kind, k, s, d, pad, include_pad=False, ceil=False):
    """Runs sum(pool(x) · w) with w drawn from RNG through `gradc run --grad`
    as WORK/TAG.relay and prints PASS or FAIL NAME with the largest error of
    the value and the gradient for x against numpy."""
    shape = x.shape
    y_shape = shape[:2] + tuple(len(axis_windows(shape[2 + i], k[i], s[i], d[i], pad[i], pad[i + 2], ceil)[0])
                                for i in range(2))
    w = rng.standard_normal(y_shape)
    want, dx = pool(x, w, kind, k, s, d, pad, include_pad, ceil)
    attrs = "pool_size=[%d, %d], strides=[%d, %d], dilation=[%d, %d], padding=[%d, %d, %d, %d]" % (
        *k, *s, *d, *pad)
    if kind == "avg":
        attrs += ", count_include_pad=%s" % include_pad
    if ceil:
        attrs += ", ceil_mode=True"
    params = "%%x: Tensor[%s, float64], %%w: Tensor[%s, float64]" % (tuple(shape), tuple(y_shape))
    body = "sum(nn.%s_pool2d(%%x, %s) * %%w)" % (kind, attrs)
    got, got_dx = run_model(gradc, work, tag, params, body, {"x": x, "w": w}, flags=("--grad", "--wrt=%x"))
    got = float(got)
    same = got == want or (np.isnan(got) and np.isnan(want))  # a window of -inf makes the value non-finite
    err = max(0.0 if same else abs(got - want), float(np.max(np.abs(got_dx - dx))))
    print("%s %s: output %s, error %.1e" % ("PASS" if err < 1e-12 else "FAIL", name, y_shape, err))
