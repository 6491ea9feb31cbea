"""cumsum against float64 on long axes (issue 14 item 4): every prefix sum is carried in
the dtype's accumulator with Neumaier's compensation (float16 in float32), so each output is
the exact prefix sum rounded once, forward and in the gradient (a reversed cumsum). A plain
float32 running sum over 6 700 elements was off by 7e-5 relative; PyTorch's CPU cumsum
accumulates float32 in double. Usage: cumsum_accuracy.py GRADC WORKDIR."""
import os
import sys
from fractions import Fraction

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(14)


def max_ulps(got, exact, dtype):
    """Largest distance from the float64 result, in ulps of the rounded result."""
    spacing = np.abs(np.spacing(exact.astype(dtype))).astype(np.float64)
    return float(np.max(np.abs(got.astype(np.float64) - exact) / spacing))


def report(case, got, exact, dtype, bound=0.501):
    """Correctly rounded (0.5 ulp, and a hair for the float64 reference's own rounding)."""
    err = max_ulps(got, exact, dtype)
    print("%s %s: %.3f ulps (bound %g)" % ("PASS" if err <= bound else "FAIL", case, err, bound))


x = rng.random(6700).astype(np.float32)
w = rng.random(6700).astype(np.float32)
out, dx, dw = run_model(gradc, work, "f32", "%x: Tensor[(6700,), float32], %w: Tensor[(6700,), float32]",
                        "sum(cumsum(%x, axis=0) * %w)", {"x": x, "w": w}, ["--grad"])
report("float32 cumsum gradient over 6700 (a reversed cumsum)", dx,
       np.cumsum(w[::-1].astype(np.float64))[::-1], np.float32)

x = (rng.random((3, 100003)) - 0.3).astype(np.float32)
h = (rng.random(40000) * 0.01).astype(np.float16)
d = rng.standard_normal(200000)
a, b, c, e = run_model(gradc, work, "long", "%x: Tensor[(3, 100003), float32], %h: Tensor[(40000,), float16], "
                       "%d: Tensor[(200000,), float64]",
                       "(cumsum(%x, axis=-1), cumsum(%h), cumsum(%x, axis=0, exclusive=True), cumsum(%d))",
                       {"x": x, "h": h, "d": d})
report("float32 cumsum along 100003 of mixed signs", a, np.cumsum(x.astype(np.float64), axis=1), np.float32)
report("float16 cumsum over 40000 (accumulated in float32)", b, np.cumsum(h.astype(np.float64)), np.float16)
report("float32 exclusive cumsum along axis 0", c,
       np.concatenate([np.zeros((1, x.shape[1])), np.cumsum(x.astype(np.float64), axis=0)[:-1]]), np.float32)
# float64 has no wider accumulator: the compensated sum keeps each prefix within an ulp or so
# of the exact one, computed here in integers (every float64 is a multiple of 2^-1074).
exact, total = [], 0
for v in d:
    num, den = float(v).as_integer_ratio()  # den is a power of two, at most 2^1074
    total += num * (2**1074 // den)
    exact.append(float(Fraction(total, 2**1074)))
report("float64 cumsum over 200000 normals", e, np.array(exact), np.float64, bound=1)
numpy_err = max_ulps(np.cumsum(d), np.array(exact), np.float64)
print("(numpy's sequential float64 cumsum: %.0f ulps)" % numpy_err)
