"""Checks templates.relay's value and gradients (written by gradc run --grad) against PyTorch."""
import sys

import numpy as np
import torch

base = sys.argv[1]
x, w1, w2, w3 = (torch.tensor(np.load("%s.%s.npy" % (base, n)), requires_grad=True) for n in ("x", "w1", "w2", "w3"))
h = torch.relu((x @ w1.T) * 0.5)
h = torch.relu((h @ w2.T) * 0.25)
h = torch.relu((h @ w3.T) * 2)
loss = (h * h).sum()
loss.backward()
for k, want in enumerate([loss, x.grad, w1.grad, w2.grad, w3.grad]):
    got = np.load("%s.out/output_%d.npy" % (base, k))
    want = want.detach().numpy()
    assert got.shape == want.shape, (k, got.shape, want.shape)
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12), (k, np.abs(got - want).max())
print("ok")
