"""The data gradient of strided depthwise convolutions (conv2d_transpose with groups = input
channels) against a numpy scatter in float64: strides, dilations, paddings and output paddings
that differ by axis, a channel multiplier, an even kernel, a column class no tap reaches.
Usage: depthwise_transpose_strided_columns.py GRADC WORKDIR."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(11)


def transpose(dy, w, stride, dil, pad, out_pad):
    """conv2d_transpose(dy, w, groups=C): dy (N, C, H, W), w (C, m, KH, KW), pad (top, left,
    bottom, right); out[n, c·m + j] gathers dy[n, c] · w[c, j] at oh = ih·sh - top + kh·dh."""
    N, C, H, W = dy.shape
    m, KH, KW = w.shape[1:]
    OH = (H - 1) * stride[0] - pad[0] - pad[2] + dil[0] * (KH - 1) + 1 + out_pad[0]
    OW = (W - 1) * stride[1] - pad[1] - pad[3] + dil[1] * (KW - 1) + 1 + out_pad[1]
    out = np.zeros((N, C * m, OH, OW))
    for c in range(C):
        for j in range(m):
            for kh in range(KH):
                for kw in range(KW):
                    for ih in range(H):
                        oh = ih * stride[0] - pad[0] + kh * dil[0]
                        if not 0 <= oh < OH:
                            continue
                        for iw in range(W):
                            ow = iw * stride[1] - pad[1] + kw * dil[1]
                            if 0 <= ow < OW:
                                out[:, c * m + j, oh, ow] += dy[:, c, ih, iw] * w[c, j, kh, kw]
    return out


# N, C, multiplier, H, W, KH, KW, strides, dilations, padding (top, left, bottom, right), output padding
CASES = [(2, 3, 1, 7, 7, 3, 3, (2, 2), (1, 1), (1, 1, 1, 1), (1, 1)),
         (1, 2, 2, 5, 6, 3, 5, (3, 2), (1, 2), (2, 0, 1, 3), (0, 1)),
         (2, 4, 1, 4, 4, 4, 4, (2, 2), (1, 1), (0, 0, 0, 0), (0, 0)),
         (1, 2, 1, 3, 9, 1, 1, (1, 4), (1, 1), (0, 0, 0, 0), (0, 3)),
         (1, 3, 1, 20, 21, 5, 5, (2, 2), (1, 1), (2, 2, 2, 2), (1, 0))]
# float64, then the first and last cases in float32 (16 lanes a vector on AVX-512, not 8)
RUNS = [(case, "float64") for case in CASES] + [(CASES[0], "float32"), (CASES[-1], "float32")]
for i, ((N, C, mult, H, W, KH, KW, stride, dil, pad, out_pad), dtype) in enumerate(RUNS):
    dy, w = rng.standard_normal((N, C, H, W)), rng.standard_normal((C, mult, KH, KW))
    if dtype == "float32":
        dy, w = dy.astype(np.float32), w.astype(np.float32)
    want = transpose(dy.astype(np.float64), w.astype(np.float64), stride, dil, pad, out_pad)
    params = "%%dy: Tensor[%s, %s], %%w: Tensor[%s, %s]" % ((N, C, H, W), dtype, (C, mult, KH, KW), dtype)
    body = ("nn.conv2d_transpose(%%dy, %%w, strides=[%d, %d], padding=[%d, %d, %d, %d], dilation=[%d, %d], "
            "output_padding=[%d, %d], groups=%d)" % (*stride, *pad, *dil, *out_pad, C))
    (got,) = run_model(gradc, work, "t%d" % i, params, body, {"dy": dy, "w": w})
    err = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("inf")
    print("%s %s %dx%d to %dx%d, %dx%d kernel, strides %s, dilation %s, padding %s, output padding %s: error %.1e" % (
        "PASS" if err < (1e-12 if dtype == "float64" else 1e-5) else "FAIL", dtype, H, W, want.shape[2], want.shape[3],
        KH, KW, stride, dil, pad, out_pad, err))
