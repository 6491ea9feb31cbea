"""The weight gradient of strided convolutions whose im2col and dy rows exceed the scratch bound
(cpu/conv.cpp kWeightGradScratchBytes, 8 MiB): by image, and by chunks of output rows with a
remainder, grouped and not, against numpy in float64. Usage: strided_weight_grad_chunks.py GRADC WORKDIR."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(11)


def weight_grad(x, g, groups, K, stride, pad):
    """d/dw of sum(conv2d(x, w, groups) * g) for an (O, C / groups, K, K) weight."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    N, C = x.shape[:2]
    O, OH, OW = g.shape[1], g.shape[2], g.shape[3]
    Cg, Og = C // groups, O // groups
    dw = np.zeros((O, Cg, K, K))
    for kh in range(K):
        for kw in range(K):
            taps = xp[:, :, kh:kh + stride * (OH - 1) + 1:stride, kw:kw + stride * (OW - 1) + 1:stride]
            for gi in range(groups):
                dw[gi * Og:(gi + 1) * Og, :, kh, kw] = np.einsum(
                    "nohw,nchw->oc", g[:, gi * Og:(gi + 1) * Og], taps[:, gi * Cg:(gi + 1) * Cg])
    return dw


# (N, C, O, H, K, stride, groups): the stem of a ResNet at half size (chunks of whole images),
# then rows of one image in chunks of 56 and a remainder of 24, in two groups.
for i, (N, C, O, H, K, stride, groups) in enumerate([(2, 3, 64, 112, 7, 2, 1), (1, 8, 32, 160, 5, 2, 2)]):
    pad = K // 2
    OH = (H + 2 * pad - K) // stride + 1
    x = rng.standard_normal((N, C, H, H))
    w = rng.standard_normal((O, C // groups, K, K))
    g = rng.standard_normal((N, O, OH, OH))
    params = "%%x: Tensor[%s, float64], %%w: Tensor[%s, float64], %%g: Tensor[%s, float64]" % (
        (N, C, H, H), (O, C // groups, K, K), (N, O, OH, OH))
    body = "sum(nn.conv2d(%%x, %%w, strides=[%d, %d], padding=[%d, %d], groups=%d) * %%g)" % (
        stride, stride, pad, pad, groups)
    _, dw = run_model(gradc, work, "c%d" % i, params, body, {"x": x, "w": w, "g": g}, flags=("--grad", "--wrt=%w"))
    want = weight_grad(x, g, groups, K, stride, pad)
    err = float(np.max(np.abs(dw - want)) / np.max(np.abs(want)))
    print("%s %dx%dx%dx%d, %dx%d stride %d, %d group(s): relative error %.1e" % (
        "PASS" if err < 1e-12 else "FAIL", N, C, H, H, K, K, stride, groups, err))
