"""The nll_loss weight gradients against float64 (found by the differential tester): they were a
plain running sum in the tensor's dtype over the batch (float32 over 10^5 rows off by 2e-4,
float16 over 957 rows by 1%); every sum is now compensated in the accumulator dtype.
Usage: nll_weights_accuracy.py GRADC WORKDIR."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(0)


def exact_dw(p, t, w, g, reduction):
    """d/dw of g * nll_loss(p, t, w) in float64, and the sum of the magnitudes of its terms."""
    picked = p[np.arange(len(t)), t].astype(np.float64)
    dw, size = np.zeros(len(w)), np.zeros(len(w))
    if reduction == "sum":
        np.add.at(dw, t, -float(g) * picked)
        np.add.at(size, t, np.abs(float(g) * picked))
    else:
        W = np.sum(w.astype(np.float64)[t])
        L = -np.sum(w.astype(np.float64)[t] * picked) / W
        np.add.at(dw, t, float(g) / W * (-picked - L))
        np.add.at(size, t, abs(float(g) / W) * (np.abs(picked) + abs(L)))
    return dw, size


for dtype, n, bound in [(np.float32, 100003, 2), (np.float16, 957, 2)]:
    for reduction in ["sum", "mean"]:
        p = rng.uniform(1, 1.4, (n, 3)).astype(dtype)
        t = rng.integers(0, 3, n).astype(np.int64)
        w = np.array([0.86, 0.62, 0.71], dtype)
        g = np.array(-1.436, dtype)
        name = "%s_%s" % (np.dtype(dtype).name, reduction)
        ty = np.dtype(dtype).name
        outs = run_model(gradc, work, name, "%%g: %s, %%p: Tensor[(%d, 3), %s], %%t: Tensor[(%d,), int64], "
                         "%%w: Tensor[(3,), %s]" % (ty, n, ty, n, ty),
                         'grad.nll_loss_weights_backward(%%g, %%p, %%t, %%w, reduction="%s")' % reduction,
                         {"g": g, "p": p, "t": t, "w": w})
        want, size = exact_dw(p, t, w, g, reduction)
        # "mean" subtracts the loss from each term: the sums cancel, so the error is measured
        # against the size of the terms (each rounded once is what an exact sum of them costs)
        err = np.max(np.abs(outs[0].astype(np.float64) - want) / (np.finfo(dtype).eps * size))
        print("%s nll_loss_weights_backward %s over %d, reduction=%s: %.3f eps of the terms' size (bound %g)"
              % ("PASS" if err <= bound else "FAIL", ty, n, reduction, err, bound))
