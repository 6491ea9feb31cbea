"""Convolutions through the materialised im2col whose product spans a chunk of several images
(output images under 128 pixels), each output column's image and pixel a division, and whose K
is long enough to be blocked: the partial sums between K blocks stay in scratch
(Gemm::c_scattered), the output written once. Value and both gradients against PyTorch (float64
reference), in float32, the zoo's dtype: resnet18's 3 x 3 at 7 x 7 and its stride-2 3 x 3 from
14 x 14, a chunk of images with a remainder, the bias and relu fused as the product's epilogue;
and in float64.
Usage: conv_strided_chunk_partials.py GRADC WORKDIR."""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(17)


def check(tag, name, n, c, o, side, s, dtype="float32", epilogue=False):
    x, w = rng.standard_normal((n, c, side, side)), rng.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)
    b = rng.standard_normal(o)
    ts = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    y = F.conv2d(ts[0], ts[1], stride=s, padding=1)
    if epilogue:
        y = F.relu(y + ts[2].reshape(1, -1, 1, 1))
    g = rng.standard_normal(tuple(y.shape))
    loss = (y * torch.tensor(g)).sum()
    loss.backward()
    call = "nn.conv2d(%%x, %%w, strides=[%d, %d], padding=[1, 1])" % (s, s)
    if epilogue:
        call = "nn.relu(nn.bias_add(%s, %%b))" % call
    params = ", ".join("%%%s: Tensor[%s, %s]" % (k, a.shape, dtype) for k, a in (("x", x), ("w", w), ("b", b), ("g", g)))
    np_t = np.float32 if dtype == "float32" else np.float64
    inputs = {k: a.astype(np_t) for k, a in (("x", x), ("w", w), ("b", b), ("g", g))}
    got = run_model(gradc, work, tag, params, "sum(%s * %%g)" % call, inputs, flags=("--grad", "--wrt=%x,%w,%b"))
    want = [loss.detach().numpy()] + [t.grad.numpy() if t.grad is not None else np.zeros(t.shape) for t in ts]
    # the output itself, through a forward-only run: every element, not only their weighted sum
    fwd = run_model(gradc, work, tag + "_fwd", params, call, inputs)[0]
    outs = list(zip(got, want)) + [(fwd, y.detach().numpy())]
    err = max(float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b))))) for a, b in outs)
    tol = 2e-5 if dtype == "float32" else 1e-12
    print("%s %s: output %s, error %.1e" % ("PASS" if err < tol else "FAIL", name, tuple(y.shape), err))


check("k0", "512 -> 512 at 7x7, batch 8 (chunks of 5 and 3)", 8, 512, 512, 7, 1)
check("k1", "256 -> 512 stride 2 from 14x14, batch 8", 8, 256, 512, 14, 2)
check("k2", "64 -> 128 at 7x7, batch 5, bias and relu fused", 5, 64, 128, 7, 1, epilogue=True)
check("k3", "64 -> 256 at 7x7, batch 3, float64", 3, 64, 256, 7, 1, dtype="float64")
