"""float16 nn.layer_norm and nn.group_norm against float64 (hostile-inputs report M6): the
statistics were rounded to float16, so rows of mean 100 and spread 0.5 came out 0.05 off.
Mean, variance and x - mean are now computed in float32 and only the result is rounded; the
gradients likewise. Usage: float16_norm_statistics.py GRADC WORKDIR [BODY_LN BODY_GN]; prints
one line per case. The optional bodies replace the norms (to check that the test catches a
composition left in float16)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
ln_body = sys.argv[3] if len(sys.argv) > 3 else "nn.layer_norm(%x, %g, %b)"
gn_body = sys.argv[4] if len(sys.argv) > 4 else "nn.group_norm(%x, %g, %b, num_groups=4)"
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(11)
EPS = 1e-5


def report(case, ok, detail):
    print("%s %s: %s" % ("PASS" if ok else "FAIL", case, detail))


def scale_ulps(got, want):
    """The largest |got - want| in float16 ulps at the magnitude of the largest |want|."""
    top = np.float16(np.max(np.abs(want)))
    return float(np.max(np.abs(got.astype(np.float64) - want))) / float(np.spacing(top))


def rows(x, groups):
    """x (float64) as the rows a norm normalises: layer_norm's last axis (groups None), or
    group_norm's groups of channels with the axes after them."""
    return x.reshape(-1, x.shape[-1]) if groups is None else x.reshape(x.shape[0] * groups, -1)


def along(v, x, groups):
    """A per-channel vector (float64) broadcast against x: the last axis or axis 1."""
    return v.astype(np.float64).reshape((-1,) if groups is None else (1, -1) + (1,) * (x.ndim - 2))


def forward64(x, g, b, groups):
    """The norm in float64 from the float16 inputs, and its x-hat and sigma per row."""
    r = rows(x.astype(np.float64), groups)
    centred = r - r.mean(1, keepdims=True)
    sigma = np.sqrt((centred ** 2).mean(1, keepdims=True) + EPS)
    xhat = (centred / sigma).reshape(x.shape)
    return xhat * along(g, x, groups) + along(b, x, groups), xhat, sigma


def backward64(x, g, w, groups):
    """d/d(x, gamma, beta) of sum(norm(x) · w) in float64: with h = d/d(x-hat) = w · gamma,
    dx = (h - mean(h) - x-hat · mean(h · x-hat)) / sigma per row."""
    _, xhat, sigma = forward64(x, g, np.zeros_like(g), groups)
    w64 = w.astype(np.float64)
    h, xh = rows(w64 * along(g, x, groups), groups), rows(xhat, groups)
    dx = (h - h.mean(1, keepdims=True) - xh * (h * xh).mean(1, keepdims=True)) / sigma
    others = tuple(a for a in range(x.ndim) if a != (x.ndim - 1 if groups is None else 1))
    return dx.reshape(x.shape), (w64 * xhat).sum(others), w64.sum(others)


# The report's case: layer_norm of (4, 1024) rows 0.5·randn + offset, gamma 1, beta 0, and with
# a gamma and beta of their own at offset 100. Each result within 1 float16 ulp (at its largest
# magnitude) of float64; rounding once costs half of one, and the float32 computation rounded
# once is shown beside (the report measured 0.05, some 25 ulps, at offset 100).
ln_params = "%x: Tensor[(4, 1024), float16], %g: Tensor[(1024,), float16], %b: Tensor[(1024,), float16]"
for offset, affine in ((0, False), (10, False), (100, False), (1000, False), (100, True)):
    x = (0.5 * rng.standard_normal((4, 1024)) + offset).astype(np.float16)
    g = (1 + 0.5 * rng.standard_normal(1024)).astype(np.float16) if affine else np.ones(1024, np.float16)
    b = rng.standard_normal(1024).astype(np.float16) if affine else np.zeros(1024, np.float16)
    got = run_model(gradc, work, "ln%d%s" % (offset, "g" if affine else ""), ln_params, ln_body,
                    {"x": x, "g": g, "b": b})[0]
    want = forward64(x, g, b, None)[0]
    x32 = x.astype(np.float32)
    d32 = x32 - x32.mean(-1, keepdims=True)
    once = (d32 / np.sqrt((d32 * d32).mean(-1, keepdims=True) + np.float32(EPS)) * g.astype(np.float32) +
            b.astype(np.float32)).astype(np.float16)
    err = scale_ulps(got, want)
    report("float16 layer_norm at row mean %d%s" % (offset, " with gamma and beta" if affine else ""),
           err <= 1, "%.2f ulps, max error %.1e (float32 rounded once: %.2f ulps)" %
           (err, np.max(np.abs(got - want)), scale_ulps(once, want)))

# group_norm of (2, 8, 6, 10) in 4 groups, each group around its own offset.
gn_params = ("%x: Tensor[(2, 8, 6, 10), float16], %g: Tensor[(8,), float16], "
             "%b: Tensor[(8,), float16]")
for offset in (0, 50, 1000):
    x = (0.5 * rng.standard_normal((2, 8, 6, 10)) + offset).astype(np.float16)
    g = (1 + 0.5 * rng.standard_normal(8)).astype(np.float16)
    b = rng.standard_normal(8).astype(np.float16)
    got = run_model(gradc, work, "gn%d" % offset, gn_params, gn_body, {"x": x, "g": g, "b": b})[0]
    want = forward64(x, g, b, 4)[0]
    err = scale_ulps(got, want)
    report("float16 group_norm at group mean %d" % offset, err <= 1,
           "%.2f ulps, max error %.1e" % (err, np.max(np.abs(got - want))))

# Gradients of sum(norm(x) · w) for x, gamma and beta, in float16 against float64, each within
# 1 ulp at its own largest magnitude.
for name, params, body, shape, groups in (
        ("layer_norm", ln_params + ", %w: Tensor[(4, 1024), float16]", "sum((%s) * %%w)" % ln_body, (4, 1024), None),
        ("group_norm", gn_params + ", %w: Tensor[(2, 8, 6, 10), float16]", "sum((%s) * %%w)" % gn_body,
         (2, 8, 6, 10), 4)):
    channels = shape[-1] if groups is None else shape[1]
    for offset in (0, 100):
        x = (0.5 * rng.standard_normal(shape) + offset).astype(np.float16)
        g = (1 + 0.5 * rng.standard_normal(channels)).astype(np.float16)
        b = rng.standard_normal(channels).astype(np.float16)
        w = rng.standard_normal(shape).astype(np.float16)
        outs = run_model(gradc, work, "d%s%d" % (name, offset), params, body, {"x": x, "g": g, "b": b, "w": w},
                         flags=("--grad", "--wrt=%x,%g,%b"))
        dx, dg, db = outs[1:4]
        want = backward64(x, g, w, groups)
        errs = [scale_ulps(got, ref) for got, ref in zip((dx, dg, db), want)]
        report("float16 %s gradients at mean %d" % (name, offset), max(errs) <= 1,
               "dx %.2f, dgamma %.2f, dbeta %.2f ulps at their largest magnitude" % tuple(errs))
