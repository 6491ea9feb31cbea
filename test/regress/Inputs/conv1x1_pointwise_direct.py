"""1 x 1 convolutions of stride 1 on images of 1024 pixels or more run as one product per image
and group, reading the data and writing the result where they lie (pointwise_direct). Values
against PyTorch, outputs garbage-filled by `gradc run`: forward with a fused bias and relu,
groups, the data gradient (nn.conv2d_transpose), the weight gradient (images of 2048 pixels or more added one after another),
float64 and float32, and a 1023-pixel image
(the chunked path) beside a 1024-pixel one. Usage: conv1x1_pointwise_direct.py GRADC WORKDIR."""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(37)


def T(a):
    return "Tensor[%s, %s]" % (a.shape, a.dtype)


def check(tag, name, dtype, n, c, o, h, w, groups=1, transposed=False, epilogue=False):
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    wt = (rng.standard_normal((c, o // groups, 1, 1) if transposed else (o, c // groups, 1, 1)) / 8).astype(dtype)
    bias = rng.standard_normal((o,)).astype(dtype)
    inputs = {"x": x, "w": wt}
    params = "%%x: %s, %%w: %s" % (T(x), T(wt))
    if transposed:
        body = "nn.conv2d_transpose(%%x, %%w, groups=%d)" % groups
        want = F.conv_transpose2d(torch.tensor(x), torch.tensor(wt), groups=groups)
    else:
        body = "nn.conv2d(%%x, %%w, groups=%d)" % groups
        want = F.conv2d(torch.tensor(x), torch.tensor(wt), groups=groups)
    if epilogue:
        params += ", %%b: %s" % T(bias)
        inputs["b"] = bias
        body = "nn.relu(nn.bias_add(%s, %%b))" % body
        want = torch.relu(want + torch.tensor(bias).reshape(1, -1, 1, 1))
    want = want.numpy()
    got = run_model(gradc, work, tag, params, body, inputs)[0]
    err = float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))
    bound = 1e-12 if dtype == np.float64 else 1e-5
    print("%s %s: output %s, error %.1e" % ("PASS" if err < bound else "FAIL", name, want.shape, err))


def check_weight(tag, name, dtype, n, c, o, h, w, groups=1):
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    dy = rng.standard_normal((n, o, h, w)).astype(dtype)
    wt = torch.zeros((o, c // groups, 1, 1), dtype=torch.float64 if dtype == np.float64 else torch.float32)
    want = torch.ops.aten.convolution_backward(torch.tensor(dy), torch.tensor(x), wt, None, [1, 1], [0, 0], [1, 1],
                                               False, [0, 0], groups, [False, True, False])[1].numpy()
    body = "nn.conv2d_backward_weight(%%dy, %%x, kernel_size=[1, 1], groups=%d)" % groups
    got = run_model(gradc, work, tag, "%%dy: %s, %%x: %s" % (T(dy), T(x)), body, {"dy": dy, "x": x})[0]
    err = float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))
    bound = 1e-12 if dtype == np.float64 else 1e-5
    print("%s %s: output %s, error %.1e" % ("PASS" if err < bound else "FAIL", name, want.shape, err))


check("p0", "forward 64 -> 48 on 32x32, bias and relu fused, float64", np.float64, 2, 64, 48, 32, 32, epilogue=True)
check("p1", "forward 96 -> 64 on 32x32, 2 groups, float32", np.float32, 3, 96, 64, 32, 32, groups=2)
check("p2", "data gradient 48 -> 80 on 32x48, float64", np.float64, 2, 48, 80, 32, 48, transposed=True)
check("p3", "data gradient 64 -> 32 on 40x40, 4 groups, float32", np.float32, 2, 64, 32, 40, 40, groups=4, transposed=True)
check("p4", "forward 32 -> 40 on 31x33 (1023 pixels, chunked), float64", np.float64, 2, 32, 40, 31, 33)
check("p5", "forward 32 -> 40 on 16x64 (1024 pixels), float64", np.float64, 2, 32, 40, 16, 64)
check_weight("p6", "weight gradient 64 -> 48 on 32x64, 3 images, float64", np.float64, 3, 64, 48, 32, 64)
check_weight("p7", "weight gradient 96 -> 64 on 64x32, 2 groups, float32", np.float32, 2, 96, 64, 64, 32, groups=2)
check_weight("p8", "weight gradient 40 -> 24 on 48x48, one image, float64", np.float64, 1, 40, 24, 48, 48)
check_weight("p9", "weight gradient 40 -> 24 on 32x32 (chunked), float64", np.float64, 2, 40, 24, 32, 32)
