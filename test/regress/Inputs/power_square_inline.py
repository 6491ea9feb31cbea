"""sum(x^2) + sum(y^3) + sum(z^4) and its gradient, float32 and float64, against numpy: x^2 is
x·x bit for bit, its gradient 2·x, y^3 and 3·y^2, z^4 (pow) and 4·z^3 within rounding; outputs
garbage-filled by gradc run.
Usage: power_square_inline.py GRADC WORKDIR."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(2)
for dtype, tol in (("float32", 2e-6), ("float64", 1e-14)):
    x = rng.standard_normal((4, 37)).astype(dtype)
    y = rng.standard_normal((4, 37)).astype(dtype)
    z = rng.standard_normal((4, 37)).astype(dtype)
    T = "Tensor[(4, 37), %s]" % dtype
    suffix = "f" if dtype == "float32" else "f64"
    body = "add(add(sum(power(%%x, 2%s)), sum(power(%%y, 3%s))), sum(power(%%z, 4%s)))" % ((suffix,) * 3)
    loss, dx, dy, dz = run_model(gradc, work, "p" + dtype, "%%x: %s, %%y: %s, %%z: %s" % (T, T, T), body,
                                 {"x": x, "y": y, "z": z}, flags=["--grad"])
    x64, y64, z64 = x.astype(np.float64), y.astype(np.float64), z.astype(np.float64)
    want = float(np.sum(x64 * x64) + np.sum(y64 ** 3) + np.sum(z64 ** 4))
    checks = [("loss", abs(float(loss) - want) / abs(want) < tol),
              ("dx = 2x exactly", np.array_equal(dx, (2 * x).astype(dtype))),
              ("dy = 3y^2", np.max(np.abs(dy - 3 * y64 * y64)) / np.max(3 * y64 * y64) < tol),
              ("dz = 4z^3", np.max(np.abs(dz - 4 * z64 ** 3)) / np.max(np.abs(4 * z64 ** 3)) < tol)]
    for name, ok in checks:
        print("%s %s %s" % ("PASS" if ok else "FAIL", dtype, name))
