"""A product with K = 1400 in K blocks of one size (even_k_blocks) on this host, float32 and float64, against
numpy in float64, outputs garbage-filled by gradc run. Usage: gemm_even_k_blocks.py GRADC WORKDIR."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(1400)
for dtype, tol in (("float32", 1e-5), ("float64", 1e-12)):
    x = rng.standard_normal((70, 1400)).astype(dtype)
    w = rng.standard_normal((90, 1400)).astype(dtype)
    params = "%%x: Tensor[(70, 1400), %s], %%w: Tensor[(90, 1400), %s]" % (dtype, dtype)
    got = run_model(gradc, work, "d" + dtype, params, "nn.dense(%x, %w)", {"x": x, "w": w})[0]
    want = x.astype(np.float64) @ w.astype(np.float64).T
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    print("%s %s: error %.1e" % ("PASS" if err < tol else "FAIL", dtype, err))
