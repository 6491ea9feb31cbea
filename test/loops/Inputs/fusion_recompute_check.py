"""Checks fusion_recompute.relay's outputs (written by gradc run) against numpy."""
import sys

import numpy as np

base = sys.argv[1]
x, y, z, b = (np.load("%s.%s.npy" % (base, n)).astype(np.float64) for n in "xyzb")
p = (x + b) * y
expected = [p.sum(0), p + z, np.exp(x) + y, np.exp(x) * z, (x + y + z) ** 2, x - y, (x - y) * z, -6 * y]
for i, e in enumerate(expected):
    got = np.load("%s.out/output_%d.npy" % (base, i))
    assert got.shape == e.shape, (i, got.shape, e.shape)
    assert np.allclose(got, e, rtol=1e-5, atol=1e-5), (i, np.abs(got - e).max())
print("ok", len(expected))
