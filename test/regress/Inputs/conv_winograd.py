"""3 x 3 convolutions of stride 1 as Winograd F(2 x 2, 3 x 3): the forward and, through --grad, the
data gradient (a stride-1 transposed convolution, the kernel flipped) and the weight gradient
(the transform transposed, summed over chunks of tiles), against PyTorch with a
float64 reference: tiles chunked by tile rows of one image (79 x 81) and by images, odd
and non-square outputs (the last tile row and column keep half), other paddings (none, two, and
unequal sides), a fused bias and relu, and float64. Every element of the output is compared, not
only a weighted sum. Usage: conv_winograd.py GRADC WORKDIR."""
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(23)


def check(tag, name, n, c, o, h, w_, pad=(1, 1, 1, 1), dtype="float32", epilogue=False):
    top, left, bottom, right = pad
    x, w = rng.standard_normal((n, c, h, w_)), rng.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)
    b = rng.standard_normal(o)
    ts = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    y = F.conv2d(F.pad(ts[0], (left, right, top, bottom)), ts[1])
    if epilogue:
        y = F.relu(y + ts[2].reshape(1, -1, 1, 1))
    g = rng.standard_normal(tuple(y.shape))
    loss = (y * torch.tensor(g)).sum()
    loss.backward()
    call = "nn.conv2d(%%x, %%w, padding=[%d, %d, %d, %d])" % pad
    if epilogue:
        call = "nn.relu(nn.bias_add(%s, %%b))" % call
    params = ", ".join("%%%s: Tensor[%s, %s]" % (k, a.shape, dtype) for k, a in (("x", x), ("w", w), ("b", b), ("g", g)))
    np_t = np.float32 if dtype == "float32" else np.float64
    inputs = {k: a.astype(np_t) for k, a in (("x", x), ("w", w), ("b", b), ("g", g))}
    got = run_model(gradc, work, tag, params, "sum(%s * %%g)" % call, inputs, flags=("--grad", "--wrt=%x,%w,%b"))
    want = [loss.detach().numpy()] + [t.grad.numpy() if t.grad is not None else np.zeros(t.shape) for t in ts]
    fwd = run_model(gradc, work, tag + "_fwd", params, call, inputs)[0]
    outs = list(zip(got, want)) + [(fwd, y.detach().numpy())]
    err = max(float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b))))) for a, b in outs)
    tol = 2e-5 if dtype == "float32" else 1e-12
    # the forward and both gradients took the Winograd path
    dump = subprocess.run([gradc, "compile", os.path.join(work, tag + ".relay"), "--grad", "--wrt=%x,%w,%b",
                           "--dump-ir=loops", "-o", os.path.join(work, tag + "_loops")],
                          capture_output=True, text=True, check=True).stderr
    kernels = [line.split("(")[0] for line in dump.splitlines()
               if line.lstrip().startswith("kernel") and ("winograd_weight" in line or "winograd_sums" in line)]
    data_grad = sum("conv2d_transpose" in kernel for kernel in kernels)
    weight_grad = sum("conv2d_backward_weight" in kernel for kernel in kernels)
    forward = len(kernels) - data_grad - weight_grad
    ok = err < tol and forward >= 1 and data_grad >= 1 and weight_grad >= 1
    print("%s %s: output %s, error %.1e, Winograd kernels: %d forward, %d data and %d weight gradient"
          % ("PASS" if ok else "FAIL", name, tuple(y.shape), err, forward, data_grad, weight_grad))


check("k0", "64 -> 72 at 79x81, batch 2 (chunks of tile rows, odd)", 2, 64, 72, 79, 81)
check("k6", "64 -> 64 at 56x56, batch 2", 2, 64, 64, 56, 56)
check("k1", "64 -> 64 at 15x15, batch 4 (odd: half tiles)", 4, 64, 64, 15, 15)
check("k2", "64 -> 80 at 9x13, batch 3, bias and relu fused", 3, 64, 80, 9, 13, epilogue=True)
check("k3", "72 -> 64 at 21x12, batch 2, no padding", 2, 72, 64, 21, 12, pad=(0, 0, 0, 0))
check("k4", "68 -> 64 at 13x16, batch 3, padding 2, 0, 1, 2", 3, 68, 64, 13, 16, pad=(2, 0, 1, 2))
check("k5", "64 -> 64 at 10x10, batch 2, float64", 2, 64, 64, 10, 10, dtype="float64")
# rows of 12 tiles or more: the weight gradient reads x and dy in place, not from planes
check("k7", "68 -> 64 at 25x29, batch 2, padding 2, 0, 1, 2 (in place, odd)", 2, 68, 64, 25, 29, pad=(2, 0, 1, 2))
check("k8", "64 -> 64 at 24x26, batch 2, no padding (in place)", 2, 64, 64, 24, 26, pad=(0, 0, 0, 0))
check("k9", "128 -> 32 at 20x18, batch 2 (narrow: 32 channels)", 2, 128, 32, 20, 18)
check("k10", "32 -> 40 at 11x14, batch 3 (narrow, odd)", 3, 32, 40, 11, 14)
