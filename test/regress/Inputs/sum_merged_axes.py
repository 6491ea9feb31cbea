"""Sums over runs of adjacent axes (the kernel merges them) against numpy in float64: batch
norm's (N, H, W) of (N, C, H, W), a mean keeping dims, (N, C) of (N, C, L) with L kept, and
collapse_sum_to's leading axes. Usage: sum_merged_axes.py GRADC WORKDIR."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(3)
cases = [((2, 5, 7, 7), "sum(%x, axis=[0, 2, 3])", lambda x: x.sum(axis=(0, 2, 3))),
         ((3, 4, 6, 10), "mean(%x, axis=[0, 2, 3], keepdims=True)", lambda x: x.mean(axis=(0, 2, 3), keepdims=True)),
         ((2, 3, 17), "sum(%x, axis=[0, 1])", lambda x: x.sum(axis=(0, 1))),
         ((2, 3, 4, 5), "collapse_sum_to(%x, shape=[4, 5])", lambda x: x.sum(axis=(0, 1)))]
for i, (shape, body, ref) in enumerate(cases):
    x = rng.standard_normal(shape)
    (got,) = run_model(gradc, work, "s%d" % i, "%%x: Tensor[%s, float64]" % (tuple(shape),), body, {"x": x})
    want = ref(x)
    err = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("inf")
    print("%s %s: error %.1e" % ("PASS" if err < 1e-13 else "FAIL", body, err))
