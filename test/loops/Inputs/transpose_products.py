"""Runs transpose_products.relay's gradient with `gradc run --grad` and compares
the loss and every parameter's gradient with PyTorch's autograd (float64) on
the same inputs; prints `N of N gradients equal` (loss included)."""
import os
import subprocess
import sys

import numpy as np
import torch

gradc, model, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(7)
shapes = {"x": (6, 4), "W": (5, 4), "V": (3, 5), "U": (5, 6)}
inputs = {k: (rng.standard_normal(s) * 0.5).astype(np.float32) for k, s in shapes.items()}
cmd = [gradc, "run", model, "--grad", "--output-dir", work]
for k, v in inputs.items():
    np.save(os.path.join(work, k + ".npy"), v)
    cmd.append("--input=%s=%s" % (k, os.path.join(work, k + ".npy")))
subprocess.run(cmd, check=True)
got = [np.load(os.path.join(work, "output_%d.npy" % i)) for i in range(5)]

t = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in inputs.items()}
h = torch.tanh(t["x"] @ t["W"].T)
q = torch.tanh((h @ t["V"].T).T)
p = h @ t["U"]
loss = (q * q).sum() + (p.T + p).sum()
loss.backward()
want = [loss.detach().numpy()] + [t[k].grad.numpy() for k in shapes]
equal = 0
for i, (g, w) in enumerate(zip(got, want)):
    err = float(np.abs(g - w).max() / max(np.abs(w).max(), 1e-30))
    equal += err < 1e-5
    if err >= 1e-5:
        print("output %d differs by %.3g" % (i, err))
print("%d of %d gradients equal" % (equal, len(want)))
