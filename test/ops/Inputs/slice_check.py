"""Checks slice.relay's value and gradients (written by gradc run --grad) against PyTorch."""
import sys

import numpy as np
import torch

base = sys.argv[1]
a, b, c = (torch.tensor(np.load("%s.%s.npy" % (base, n)), requires_grad=True) for n in "abc")
x = torch.cat([a, b, c], 1)
p = torch.split(torch.tanh(x), [3, 4, 5], -1)
s = torch.stack([p[0], a * a], 1)
sl = p[2][[2, 1, 0]][:, [4, 2]]  # rows 2:-5:-1, columns -1:0:-2
q = torch.split(x, 4, 1)
y = (s * s).sum() + torch.exp(sl).sum() + (q[1] * p[1]).sum() + q[2].sum()
y.backward()
for i, want in enumerate([y, a.grad, b.grad, c.grad]):
    got = np.load("%s.out/output_%d.npy" % (base, i))
    want = want.detach().numpy()
    assert got.shape == want.shape, (i, got.shape, want.shape)
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12), (i, np.abs(got - want).max())
print("ok")
