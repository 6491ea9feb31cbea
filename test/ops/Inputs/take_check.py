"""Checks take.relay's value and gradients (written by gradc run --grad) against PyTorch."""
import sys

import numpy as np
import torch

base = sys.argv[1]
e, w = (torch.tensor(np.load("%s.%s.npy" % (base, n)), requires_grad=True) for n in "ew")
i = torch.tensor(np.load(base + ".i.npy"))
y = torch.tensor(np.load(base + ".y.npy")).long()
h = torch.tanh(e[i.clamp(0, 9)] @ w)  # (2, 5, 6)
t = h[:, i % 5]  # take along axis 1 with mode="wrap": (2, 2, 5, 6)
ls = torch.log_softmax(h[0:1, 0:3].reshape(3, 6), -1)
loss = (t * t).sum() - (ls * torch.nn.functional.one_hot(y, 6)).sum() / 3
loss.backward()
for k, want in enumerate([loss, e.grad, w.grad]):
    got = np.load("%s.out/output_%d.npy" % (base, k))
    want = want.detach().numpy()
    assert got.shape == want.shape, (k, got.shape, want.shape)
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12), (k, np.abs(got - want).max())
print("ok")
