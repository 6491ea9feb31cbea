"""The data gradient of a 1 x 1 convolution of stride 1 (nn.conv2d_transpose on the padded grid)
reads the weight in place, its k-th row of the product the weight's k-th row; larger kernels
copy the flipped weight out first. Values against PyTorch in float64: resnet50's shapes (2048 ->
512 on 7 x 7, 256 -> 64 on 14 x 14), groups, dilation, and a 3 x 3 for the copy.
Usage: conv_transpose_1x1_in_place.py GRADC WORKDIR."""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(29)


def check(tag, name, n, c, o, side, k, groups=1, pad=0):
    """nn.conv2d_transpose(dy, w) for dy (n, c, side, side), w (c, o / groups, k, k)."""
    dy, w = rng.standard_normal((n, c, side, side)), rng.standard_normal((c, o // groups, k, k))
    want = F.conv_transpose2d(torch.tensor(dy), torch.tensor(w), padding=pad, groups=groups).numpy()
    params = "%%dy: Tensor[%s, float64], %%w: Tensor[%s, float64]" % (dy.shape, w.shape)
    got = run_model(gradc, work, tag, params, "nn.conv2d_transpose(%%dy, %%w, padding=[%d, %d], groups=%d)" % (
        pad, pad, groups), {"dy": dy, "w": w})[0]
    err = float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))
    print("%s %s: output %s, error %.1e" % ("PASS" if err < 1e-12 else "FAIL", name, want.shape, err))


check("t0", "1x1 2048 -> 512 on 7x7", 2, 2048, 512, 7, 1)
check("t1", "1x1 256 -> 64 on 14x14", 2, 256, 64, 14, 1)
check("t2", "1x1 96 -> 48 on 9x9, 3 groups", 2, 96, 48, 9, 1, groups=3)
check("t3", "3x3 32 -> 16 on 32x32, padding 1", 2, 32, 16, 32, 3, pad=1)
