"""The three 1 x 1 convolutions of stride 1 (forward, data and weight gradients) over 1024
channels, float32, against PyTorch: each operand's step along the product's k is known now, so
the weights are broadcast where they lie. Usage: conv1x1_tap_division.py GRADC WORKDIR."""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(31)
n, c, o, side = 2, 1024, 96, 7
x = rng.standard_normal((n, c, side, side)).astype(np.float32)
w = (rng.standard_normal((o, c, 1, 1)) / 32).astype(np.float32)
dy = rng.standard_normal((n, o, side, side)).astype(np.float32)
tx, tw, tdy = torch.tensor(x), torch.tensor(w), torch.tensor(dy)
T = lambda a: "Tensor[%s, float32]" % (a.shape,)
cases = [
    ("forward", "%%x: %s, %%w: %s" % (T(x), T(w)), "nn.conv2d(%x, %w)", {"x": x, "w": w},
     F.conv2d(tx, tw)),
    ("data gradient", "%%dy: %s, %%w: %s" % (T(dy), T(w)), "nn.conv2d_transpose(%dy, %w)", {"dy": dy, "w": w},
     F.conv_transpose2d(tdy, tw)),
    ("weight gradient", "%%dy: %s, %%x: %s" % (T(dy), T(x)), "nn.conv2d_backward_weight(%dy, %x, kernel_size=[1, 1])",
     {"dy": dy, "x": x}, torch.ops.aten.convolution_backward(tdy, tx, tw, None, [1, 1], [0, 0], [1, 1], False,
                                                               [0, 0], 1, [False, True, False])[1]),
]
for i, (name, params, body, inputs, want) in enumerate(cases):
    got = run_model(gradc, work, "c%d" % i, params, body, inputs)[0]
    want = want.numpy()
    err = float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))
    print("%s %s: output %s, error %.1e" % ("PASS" if err < 1e-5 else "FAIL", name, want.shape, err))
