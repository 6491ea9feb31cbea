"""Strided convolutions whose one image's im2col exceeds half the L2 (5.1 MB here, in float64):
the forward in chunks of output rows, against numpy in float64, grouped and not, with a fused
epilogue. Usage: strided_conv_row_chunks.py GRADC WORKDIR."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(13)


def conv(x, w, groups, stride, pad):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    N, C = x.shape[:2]
    O, Cg, K = w.shape[0], w.shape[1], w.shape[2]
    OH = (x.shape[2] + 2 * pad - K) // stride + 1
    Og = O // groups
    out = np.zeros((N, O, OH, OH))
    for kh in range(K):
        for kw in range(K):
            taps = xp[:, :, kh:kh + stride * (OH - 1) + 1:stride, kw:kw + stride * (OH - 1) + 1:stride]
            for gi in range(groups):
                out[:, gi * Og:(gi + 1) * Og] += np.einsum(
                    "oc,nchw->nohw", w[gi * Og:(gi + 1) * Og, :, kh, kw], taps[:, gi * Cg:(gi + 1) * Cg])
    return out


# (N, C, O, H, K, stride, groups): 80 x 80 outputs of 100 taps per pixel.
for i, (N, C, O, H, K, stride, groups) in enumerate([(2, 4, 16, 160, 5, 2, 1), (1, 8, 12, 159, 5, 2, 2)]):
    pad = K // 2
    OH = (H + 2 * pad - K) // stride + 1
    x = rng.standard_normal((N, C, H, H))
    w = rng.standard_normal((O, C // groups, K, K))
    params = "%%x: Tensor[%s, float64], %%w: Tensor[%s, float64]" % ((N, C, H, H), (O, C // groups, K, K))
    body = "tanh(nn.conv2d(%%x, %%w, strides=[%d, %d], padding=[%d, %d], groups=%d))" % (
        stride, stride, pad, pad, groups)
    (y,) = run_model(gradc, work, "f%d" % i, params, body, {"x": x, "w": w})
    want = np.tanh(conv(x, w, groups, stride, pad))
    err = float(np.max(np.abs(y - want)))
    print("%s %dx%dx%dx%d, %dx%d stride %d, %d group(s), %dx%d outputs: error %.1e" % (
        "PASS" if err < 1e-12 else "FAIL", N, C, H, H, K, K, stride, groups, OH, OH, err))
