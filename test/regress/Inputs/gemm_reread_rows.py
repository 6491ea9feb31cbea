"""Products whose orientation counts how their broadcast rows are read (Gemm.cpp, orient): GPT-2's
qkv product and resnet50's 1 x 1 convolution 512 -> 128 at 28 x 28 (none of their rows streamed from
memory once per panel: reread_cost), and a 1 x 1 data gradient 32 -> 128 at 56 x 56 (its pixels not
read in place across k: across_cost), on this host, float32 and float64, against numpy in float64.
Usage: gemm_reread_rows.py GRADC WORKDIR [CASE...] (every case by default)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

# name: (x's shape, w's shape, body, the float64 reference)
CASES = {
    "dense": ((128, 768), (2304, 768), "nn.dense(%x, %w)", lambda x, w: x @ w.T),
    "conv": ((2, 512, 28, 28), (128, 512, 1, 1), "nn.conv2d(%x, %w, padding=[0, 0])",
             lambda x, w: np.einsum("nchw,oc->nohw", x, w[:, :, 0, 0])),
    "conv_transpose": ((1, 128, 56, 56), (128, 32, 1, 1), "nn.conv2d_transpose(%x, %w, padding=[0, 0])",
                       lambda x, w: np.einsum("nchw,co->nohw", x, w[:, :, 0, 0])),
}

gradc, work, chosen = sys.argv[1], sys.argv[2], sys.argv[3:] or list(CASES)
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(2304)
for dtype, tol in (("float32", 1e-5), ("float64", 1e-12)):
    for name in chosen:
        xs, ws, body, reference = CASES[name]
        x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
        params = "%%x: Tensor[%s, %s], %%w: Tensor[%s, %s]" % (xs, dtype, ws, dtype)
        got = run_model(gradc, work, "%s_%s" % (name, dtype), params, body, {"x": x, "w": w})[0]
        want = reference(x.astype(np.float64), w.astype(np.float64))
        err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
        print("%s %s %s: error %.1e" % ("PASS" if err < tol else "FAIL", name, dtype, err))
