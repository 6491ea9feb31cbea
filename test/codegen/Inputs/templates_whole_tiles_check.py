"""Checks templates_whole_tiles.relay's value and gradients (written by gradc run --grad) against numpy:
a 1x1 convolution is a product over the channels."""
import sys

import numpy as np

base = sys.argv[1]
x1, x2, w1, w2 = (np.load("%s.%s.npy" % (base, n)).astype(np.float64) for n in ("x1", "x2", "w1", "w2"))
want = []
grads = {}
for x, w, name in ((x1, w1, "1"), (x2, w2, "2")):
    m = w[:, :, 0, 0]
    a = np.einsum("oc,nchw->nohw", m, x)
    grads["x" + name] = np.einsum("oc,nohw->nchw", m, 2 * a)
    grads["w" + name] = np.einsum("nohw,nchw->oc", 2 * a, x)[:, :, None, None]
    want.append((a * a).sum())
want = [np.array(sum(want)), grads["x1"], grads["x2"], grads["w1"], grads["w2"]]
for k, expected in enumerate(want):
    got = np.load("%s.out/output_%d.npy" % (base, k)).astype(np.float64)
    assert got.shape == expected.shape, (k, got.shape, expected.shape)
    scale = max(1.0, float(np.abs(expected).max()))
    assert np.abs(got - expected).max() <= 1e-5 * scale, (k, np.abs(got - expected).max(), scale)
print("ok")
