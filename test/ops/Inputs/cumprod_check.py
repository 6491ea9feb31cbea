"""Checks cumprod.relay's value and gradient (written by gradc run --grad) against PyTorch."""
import sys

import numpy as np
import torch

base = sys.argv[1]
x = torch.tensor(np.load(base + ".x.npy"), requires_grad=True)
w = torch.arange(1, 25, dtype=torch.float64).reshape(4, 6)


def exclusive(c, dim):
    ones = torch.ones_like(c.narrow(dim, 0, 1))
    return torch.cat([ones, c.narrow(dim, 0, c.shape[dim] - 1)], dim)


y = ((torch.cumprod(x, 1) * w).sum() + (exclusive(torch.cumprod(x, 1), 1) * w * w).sum()
     + (torch.cumprod(x.reshape(-1), 0) * w.reshape(-1)).sum() + (exclusive(torch.cumprod(x, 0), 0) * w).sum())
y.backward()
for k, want in enumerate([y, x.grad]):
    got = np.load("%s.out/output_%d.npy" % (base, k))
    want = want.detach().numpy()
    assert got.shape == want.shape, (k, got.shape, want.shape)
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12), (k, got, want)
print("ok")
