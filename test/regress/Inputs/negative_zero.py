"""Odd functions keep the sign of zero (issue 14, item 13): f(-0) is -0 and f(+0) is +0
for tanh, erf, sin and sqrt (and the identity-like copy and clip), in float32 (whose tanh
and erf are VectorMath's inline arithmetic), float64 and float16, in a scalar loop and a
vectorized one. Usage: negative_zero.py GRADC WORKDIR [gradc run flags]; one line per case."""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work, flags = sys.argv[1], sys.argv[2], sys.argv[3:]
os.makedirs(work, exist_ok=True)
erf = np.vectorize(math.erf, otypes=[np.float64])
REFERENCE = {"tanh": np.tanh, "erf": erf, "sin": np.sin, "sqrt": np.sqrt, "copy": lambda x: x,
             "clip": lambda x: np.clip(x, -1, 1)}
for dtype in ("float32", "float64", "float16"):
    for n in (2, 67):  # 67: a vectorized body and a scalar tail
        x = np.where(np.arange(n) % 2 == 0, -0.0, 0.0).astype(dtype)
        x[-1] = -0.0
        names = list(REFERENCE)
        body = "(%s)" % ", ".join("clip(%x, a_min=-1, a_max=1)" if f == "clip" else "%s(%%x)" % f for f in names)
        outputs = run_model(gradc, work, "z_%s_%d" % (dtype, n), "%%x: Tensor[(%d,), %s]" % (n, dtype), body, {"x": x},
                            flags)
        for f, got in zip(names, outputs):
            want = REFERENCE[f](x.astype(np.float64)).astype(dtype)
            ok = np.array_equal(np.signbit(got), np.signbit(want)) and not np.any(got)
            print("%s %s %s n=%d" % ("ok" if ok else "WRONG", f, dtype, n))
