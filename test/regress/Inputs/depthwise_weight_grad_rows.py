"""The weight gradient of depthwise convolutions whose output rows are not a multiple of 16
pixels (MobileNet's 14 and 7, a 5 x 5 kernel, a channel multiplier, a stride) against numpy in
float64. Usage: depthwise_weight_grad_rows.py GRADC WORKDIR."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(7)


def weight_grad(x, g, C, O, K, stride, pad):
    """d/dw of sum(conv2d(x, w, groups=C) * g) for a (O, 1, K, K) weight, O = C * multiplier."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    OH, OW = g.shape[2], g.shape[3]
    dw = np.zeros((O, 1, K, K))
    for o in range(O):
        c = o // (O // C)
        for kh in range(K):
            for kw in range(K):
                taps = xp[:, c, kh:kh + stride * (OH - 1) + 1:stride, kw:kw + stride * (OW - 1) + 1:stride]
                dw[o, 0, kh, kw] = (taps * g[:, o]).sum()
    return dw


for i, (N, C, mult, H, K, stride) in enumerate([(2, 6, 1, 14, 5, 1), (3, 4, 2, 7, 3, 1), (2, 3, 1, 13, 3, 2),
                                                (1, 2, 1, 20, 3, 1)]):
    O, pad = C * mult, K // 2
    OH = (H + 2 * pad - K) // stride + 1
    x, w, g = rng.standard_normal((N, C, H, H)), rng.standard_normal((O, 1, K, K)), rng.standard_normal((N, O, OH, OH))
    params = "%%x: Tensor[%s, float64], %%w: Tensor[%s, float64], %%g: Tensor[%s, float64]" % (
        (N, C, H, H), (O, 1, K, K), (N, O, OH, OH))
    body = "sum(nn.conv2d(%%x, %%w, strides=[%d, %d], padding=[%d, %d], groups=%d) * %%g)" % (stride, stride, pad, pad, C)
    _, dw = run_model(gradc, work, "d%d" % i, params, body, {"x": x, "w": w, "g": g}, flags=("--grad", "--wrt=%w"))
    want = weight_grad(x, g, C, O, K, stride, pad)
    err = float(np.max(np.abs(dw - want)))
    print("%s %dx%d output rows of %d pixels, %dx%d kernel, stride %d: error %.1e" % (
        "PASS" if err < 1e-12 else "FAIL", N, O, OH, K, K, stride, err))
