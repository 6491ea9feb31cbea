"""A max pool computes the cheap element-wise value it reads (relu of a batch norm's formula)
at each tap instead of reading it from memory (OpDef::producer_reads; transform/Fuse.cpp), in
the forward and in the pool's gradient: conv -> batch norm (training) -> activation -> max pool,
value and the gradients of the input, the weight, gamma and beta against PyTorch in float64, for
vgg's 2 x 2 of stride 2, resnet's stem pool (3 x 3, stride 2, padding 1: an element in up to 4
windows), a 3 x 3 of stride 1 (9 windows), leaky_relu before a ceil_mode pool, and a sigmoid
(a costly producer, which stays a kernel before overlapping windows).
Usage: pool_fused_producers.py GRADC WORKDIR."""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(41)

ACTS = {"relu": ("nn.relu(%s)", F.relu), "leaky": ("nn.leaky_relu(%s, alpha=0.1f)", lambda t: F.leaky_relu(t, 0.1)),
        "sigmoid": ("sigmoid(%s)", torch.sigmoid)}


def check(tag, name, shape, act, k, s, p, ceil=False):
    n, c, h, w = shape
    x, wt = rng.standard_normal(shape), rng.standard_normal((c, c, 3, 3)) * 0.3
    gamma, beta = rng.standard_normal(c), rng.standard_normal(c)
    ts = [torch.tensor(a, requires_grad=True) for a in (x, wt, gamma, beta)]
    y = F.max_pool2d(ACTS[act][1](F.batch_norm(F.conv2d(ts[0], ts[1], padding=1), None, None, ts[2], ts[3],
                                               training=True, eps=1e-5)), k, s, p, ceil_mode=ceil)
    g = rng.standard_normal(tuple(y.shape))
    loss = (y * torch.tensor(g)).sum()
    loss.backward()
    bn = "nn.batch_norm(%0, %g, %b, mean(%0, axis=[0, 2, 3]), variance(%0, axis=[0, 2, 3])).0"
    body = "%%0 = nn.conv2d(%%x, %%w, padding=[1, 1]);\n  sum(nn.max_pool2d(%s, pool_size=[%d, %d], " \
           "strides=[%d, %d], padding=[%d, %d], ceil_mode=%s) * %%gy)" % (
               ACTS[act][0] % bn, k, k, s, s, p, p, "True" if ceil else "False")
    params = ", ".join("%%%s: Tensor[%s, float64]" % (key, a.shape) for key, a in
                       (("x", x), ("w", wt), ("g", gamma), ("b", beta), ("gy", g)))
    got = run_model(gradc, work, tag, params, body, {"x": x, "w": wt, "g": gamma, "b": beta, "gy": g},
                    flags=("--grad", "--wrt=%x,%w,%g,%b"))
    want = [loss.detach().numpy()] + [t.grad.numpy() for t in ts]
    err = max(float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b))))) for a, b in zip(got, want))
    print("%s %s: output %s, error %.1e" % ("PASS" if err < 1e-11 else "FAIL", name, tuple(y.shape), err))


check("p0", "relu, 2x2 stride 2 (vgg's)", (2, 4, 12, 10), "relu", 2, 2, 0)
check("p1", "relu, 3x3 stride 2 pad 1 (resnet's stem)", (2, 3, 13, 14), "relu", 3, 2, 1)
check("p2", "relu, 3x3 stride 1 pad 1", (1, 3, 9, 11), "relu", 3, 1, 1)
check("p3", "leaky_relu, 3x3 stride 2 ceil_mode", (2, 3, 10, 9), "leaky", 3, 2, 0, ceil=True)
check("p4", "sigmoid, 3x3 stride 1 pad 1", (1, 3, 8, 8), "sigmoid", 3, 1, 1)
check("p5", "sigmoid, 2x2 stride 2", (1, 3, 8, 8), "sigmoid", 2, 2, 0)
