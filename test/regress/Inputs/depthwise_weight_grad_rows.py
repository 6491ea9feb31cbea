"""The weight gradient of depthwise convolutions whose output rows are not a multiple of 16
pixels (MobileNet's 14 and 7, a 5 x 5 kernel, a channel multiplier, a stride) against numpy in
float64; then strides, dilations and paddings that differ by axis (the padded data split into
phases: a padding wider than the stride, phases with no data column first, a stride of 3).
Usage: depthwise_weight_grad_rows.py GRADC WORKDIR."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(7)


def weight_grad(x, g, C, O, KH, KW, stride, dil, pad):
    """d/dw of sum(conv2d(x, w, groups=C) * g) for a (O, 1, KH, KW) weight, O = C * multiplier;
    pad = (top, left, bottom, right)."""
    (sh, sw), (dh, dw_) = stride, dil
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])))
    OH, OW = g.shape[2], g.shape[3]
    dw = np.zeros((O, 1, KH, KW))
    for o in range(O):
        c = o // (O // C)
        for kh in range(KH):
            for kw in range(KW):
                taps = xp[:, c, kh * dh:kh * dh + sh * (OH - 1) + 1:sh, kw * dw_:kw * dw_ + sw * (OW - 1) + 1:sw]
                dw[o, 0, kh, kw] = (taps * g[:, o]).sum()
    return dw


# N, C, multiplier, H, W, KH, KW, strides, dilations, padding (top, left, bottom, right)
CASES = [(2, 6, 1, 14, 14, 5, 5, (1, 1), (1, 1), (2, 2, 2, 2)), (3, 4, 2, 7, 7, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),
         (2, 3, 1, 13, 13, 3, 3, (2, 2), (1, 1), (1, 1, 1, 1)), (1, 2, 1, 20, 20, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),
         (2, 3, 1, 11, 9, 3, 3, (3, 2), (1, 2), (2, 0, 1, 3)), (1, 2, 2, 10, 12, 5, 4, (2, 3), (2, 1), (0, 4, 3, 1)),
         (2, 2, 1, 9, 9, 3, 3, (2, 2), (1, 1), (3, 3, 3, 3))]
for i, (N, C, mult, H, W, KH, KW, stride, dil, pad) in enumerate(CASES):
    O = C * mult
    OH = (H + pad[0] + pad[2] - dil[0] * (KH - 1) - 1) // stride[0] + 1
    OW = (W + pad[1] + pad[3] - dil[1] * (KW - 1) - 1) // stride[1] + 1
    x, w, g = rng.standard_normal((N, C, H, W)), rng.standard_normal((O, 1, KH, KW)), rng.standard_normal((N, O, OH, OW))
    params = "%%x: Tensor[%s, float64], %%w: Tensor[%s, float64], %%g: Tensor[%s, float64]" % (
        (N, C, H, W), (O, 1, KH, KW), (N, O, OH, OW))
    body = "sum(nn.conv2d(%%x, %%w, strides=[%d, %d], padding=[%d, %d, %d, %d], dilation=[%d, %d], groups=%d) * %%g)" % (
        *stride, *pad, *dil, C)
    _, dw = run_model(gradc, work, "d%d" % i, params, body, {"x": x, "w": w, "g": g}, flags=("--grad", "--wrt=%w"))
    want = weight_grad(x, g, C, O, KH, KW, stride, dil, pad)
    err = float(np.max(np.abs(dw - want)))
    print("%s %dx%d output rows of %d pixels, %dx%d kernel, strides %s, dilation %s, padding %s: error %.1e" % (
        "PASS" if err < 1e-12 else "FAIL", N, O, OW, KH, KW, stride, dil, pad, err))
