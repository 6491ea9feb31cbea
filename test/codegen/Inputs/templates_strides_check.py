"""Checks templates_strides.relay's value and gradients (written by gradc run --grad) against PyTorch."""
import sys

import numpy as np
import torch

base = sys.argv[1]
x1, x2, w1, w2 = (torch.tensor(np.load("%s.%s.npy" % (base, n)).astype(np.float64), requires_grad=True)
                  for n in ("x1", "x2", "w1", "w2"))
a = torch.nn.functional.conv2d(torch.relu(x1), w1)
b = torch.nn.functional.conv2d(torch.relu(x2), w2)
loss = (a * a).sum() + (b * b).sum()
loss.backward()
for k, want in enumerate([loss, x1.grad, x2.grad, w1.grad, w2.grad]):
    got = np.load("%s.out/output_%d.npy" % (base, k)).astype(np.float64)
    want = want.detach().numpy()
    assert got.shape == want.shape, (k, got.shape, want.shape)
    scale = max(1.0, float(np.abs(want).max()))
    assert np.abs(got - want).max() <= 1e-5 * scale, (k, np.abs(got - want).max(), scale)
print("ok")
