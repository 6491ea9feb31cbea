"""Convolutions through the CPU's materialised im2col (strides; images too small for the padded
grid), whose column taps are unrolled so that each output row copies its columns inside the data
without a select and writes zeros either side: value, data and weight gradients against PyTorch
in float64, for resnet's stem (7 x 7 of stride 2, padding 3), a strided 3 x 3, a 1 x 1 of stride
2, small images of stride 1 (7 x 7 and 14 x 14 at 3 x 3), asymmetric padding and dilation,
groups; and the padded grid's copies (padded_copy, grad_on_grid: each element written once).
The data gradients of the strided ones gather by the outputs' residues modulo the
strides (col2im_by_residue).
Usage: conv_im2col_runs.py GRADC WORKDIR."""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(5)


def check(tag, name, n, c, o, hw, k, s, pad, d=(1, 1), groups=1):
    """sum(conv2d(x, w) * g) through `gradc run --grad` against torch in float64; pad is
    (top, left, bottom, right)."""
    x = rng.standard_normal((n, c) + hw)
    w = rng.standard_normal((o, c // groups) + k)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    y = torch.nn.functional.conv2d(torch.nn.functional.pad(xt, (pad[1], pad[3], pad[0], pad[2])), wt, stride=s,
                                   dilation=d, groups=groups)
    g = rng.standard_normal(tuple(y.shape))
    (y * torch.tensor(g)).sum().backward()
    attrs = "strides=[%d, %d], padding=[%d, %d, %d, %d], dilation=[%d, %d], groups=%d" % (*s, *pad, *d, groups)
    params = "%%x: Tensor[%s, float64], %%w: Tensor[%s, float64], %%g: Tensor[%s, float64]" % (
        x.shape, w.shape, g.shape)
    got = run_model(gradc, work, tag, params, "sum(nn.conv2d(%%x, %%w, %s) * %%g)" % attrs,
                    {"x": x, "w": w, "g": g}, flags=("--grad", "--wrt=%x,%w"))
    want = [(y * torch.tensor(g)).sum().detach().numpy(), xt.grad.numpy(), wt.grad.numpy()]
    err = max(float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b))))) for a, b in zip(got, want))
    print("%s %s: output %s, error %.1e" % ("PASS" if err < 1e-12 else "FAIL", name, tuple(y.shape), err))


check("c0", "7x7 stride 2 pad 3 (resnet's stem)", 2, 3, 8, (32, 30), (7, 7), (2, 2), (3, 3, 3, 3))
check("c1", "3x3 stride 2 pad 1", 2, 4, 6, (15, 16), (3, 3), (2, 2), (1, 1, 1, 1))
check("c2", "1x1 stride 2", 2, 5, 3, (14, 14), (1, 1), (2, 2), (0, 0, 0, 0))
check("c3", "3x3 stride 1 pad 1 on 7x7", 2, 6, 5, (7, 7), (3, 3), (1, 1), (1, 1, 1, 1))
check("c4", "3x3 stride 1 pad 1 on 14x14", 1, 4, 4, (14, 14), (3, 3), (1, 1), (1, 1, 1, 1))
check("c5", "5x3 stride (2, 3), padding (2, 0, 1, 2), dilation (1, 2)", 1, 3, 4, (11, 13), (5, 3), (2, 3),
      (2, 0, 1, 2), (1, 2))
check("c7", "3x3 stride 2 pad 1, 2 groups", 2, 4, 6, (9, 10), (3, 3), (2, 2), (1, 1, 1, 1), groups=2)
check("c8", "4x4 stride 3 pad 2, dilation 2", 1, 3, 2, (13, 14), (4, 4), (3, 3), (2, 2, 2, 2), (2, 2))
# the padded grid (stride 1, at most 1.2x the output's pixels), whose copies write each element once
check("c9", "3x3 stride 1 padding (1, 2, 0, 1) on 26x28, the padded grid", 2, 3, 4, (26, 28), (3, 3), (1, 1),
      (1, 2, 0, 1))
check("c10", "3x3 padding 3 on 30x30, the padded grid forward", 1, 2, 3, (30, 30), (3, 3), (1, 1), (3, 3, 3, 3))
check("c11", "depthwise 3x3 stride 2 on 12x13", 2, 4, 4, (12, 13), (3, 3), (2, 2), (1, 1, 1, 1), groups=4)
check("c12", "depthwise 3x3 stride 1 on 9x9", 1, 3, 6, (9, 9), (3, 3), (1, 1), (1, 1, 1, 1), groups=3)
# strides as long as the image: 300 x 300 residue classes, where the data gradient scans every tap
check("c13", "3x3 stride 300 on 302x302, a data gradient of 90000 residue classes", 1, 2, 3, (302, 302), (3, 3),
      (300, 300), (0, 0, 0, 0))
check("c14", "1x1 stride 2 on 32x32, a product per image", 2, 5, 3, (32, 32), (1, 1), (2, 2), (0, 0, 0, 0))
# a class of 9 x 9 = 81 taps, past the 64 a class sums in one expression: the scan again
check("c16", "1x1 stride 2 on 13x13: even columns one more than odd", 2, 4, 3, (13, 13), (1, 1), (2, 2),
      (0, 0, 0, 0))
check("c17", "3x3 stride 3 pad 1 on 16x17: three column classes interleaved", 1, 3, 5, (16, 17), (3, 3), (3, 3),
      (1, 1, 1, 1))
check("c15", "17x17 stride 2 on 40x40, classes of 81 taps", 1, 2, 2, (40, 40), (17, 17), (2, 2), (8, 8, 8, 8))
check("c6", "3x3 on 2x2 with padding 2: rows and columns of padding only", 1, 2, 3, (2, 2), (3, 3), (1, 1),
      (2, 2, 2, 2))
