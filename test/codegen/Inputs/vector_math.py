"""float32 exp, log, tanh and erf (codegen/VectorMath.h: inline arithmetic that
vectorizes, not libm calls) against the float64 result rounded to float32, in
ulps, over 2^22 float32 bit patterns spread over the whole range (both signs,
subnormals, the overflow and underflow edges) plus the special values (a zero
result with the reference's sign).
Usage: vector_math.py GRADC WORKDIR [gradc run flags, e.g. --cpu=x86-64 for
the polynomials without FMA]; prints one line per function."""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work, flags = sys.argv[1], sys.argv[2], sys.argv[3:]
os.makedirs(work, exist_ok=True)
bits = np.arange(0, 1 << 32, 1021, dtype=np.uint64).astype(np.uint32)
edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 88.72283, 88.72284, 88.7229, -87.33654, -103.972, -103.98,
                  -104.0, 1e-45, 1.17549435e-38, 1.0, 0.625, -0.625, 0.6249999, 9.0, 44.0, 1e-30, -1e-30],
                 dtype=np.float32)
x = np.concatenate([bits.view(np.float32), edges])
n = x.size
outputs = run_model(gradc, work, "math", "%%x: Tensor[(%d,), float32]" % n, "(exp(%x), log(%x), tanh(%x), erf(%x))",
                    {"x": x}, flags)

erf = np.vectorize(math.erf, otypes=[np.float64])  # libm's double erf, rounded below

with np.errstate(all="ignore"):
    for i, (name, ref) in enumerate((("exp", np.exp), ("log", np.log), ("tanh", np.tanh), ("erf", erf))):
        got = outputs[i]
        want = ref(x.astype(np.float64)).astype(np.float32)  # correctly rounded but for rare ties
        same_class = (np.isnan(got) == np.isnan(want)) & (np.isinf(got) == np.isinf(want))
        finite = np.isfinite(want) & np.isfinite(got)
        both_special = ~np.isfinite(want) & ~np.isfinite(got)
        sign_ok = both_special & (np.isnan(want) | (np.sign(got) == np.sign(want)))
        zero_sign_wrong = (want == 0) & (got == 0) & (np.signbit(got) != np.signbit(want))  # tanh(-0) is -0
        spacing = np.spacing(np.abs(want[finite])).astype(np.float64)
        spacing[spacing == 0] = np.float64(np.float32(1.4e-45))
        ulps = np.abs(got[finite].astype(np.float64) - want[finite].astype(np.float64)) / spacing
        worst = float(ulps.max()) if ulps.size else 0.0
        bad_special = int(np.sum(~same_class) + np.sum(both_special & ~sign_ok) + np.sum(zero_sign_wrong))
        ok = worst <= 2.0 and bad_special == 0
        print("%s %s: %d values, max %.2f ulp, %.4f%% not correctly rounded, %d special values wrong" % (
            "PASS" if ok else "FAIL", name, n, worst, 100.0 * float(np.mean(ulps > 0.5)), bad_special))
