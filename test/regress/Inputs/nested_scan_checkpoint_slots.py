"""Helpers of nested_scan_checkpoint_slots.test.
  inputs DIR T S   writes h0, x (T outer steps of S inner ones) and w as DIR/NAME.npy and DIR/NAME.raw
  same A B         prints "same A" if the outputs in folders A and B are bitwise equal (output_i.npy,
                   or the C harness's out_i.raw, read as float64 in the other's shape), else the difference
"""
import os
import sys

import numpy as np

if sys.argv[1] == "inputs":
    where, T, S = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    os.makedirs(where, exist_ok=True)
    rng = np.random.default_rng(2)
    for name, value in [("h0", rng.standard_normal(2)), ("x", rng.standard_normal((T, S, 2))),
                        ("w", 0.7 * rng.standard_normal((2, 2)))]:
        np.save(os.path.join(where, name + ".npy"), value)
        value.tofile(os.path.join(where, name + ".raw"))
    sys.exit(0)


def outputs(where, like=None):
    if os.path.exists(os.path.join(where, "output_0.npy")):
        return [np.load(os.path.join(where, "output_%d.npy" % i)) for i in range(4)]
    return [np.fromfile(os.path.join(where, "out_%d.raw" % i), dtype=np.float64).reshape(like[i].shape)
            for i in range(4)]


a = outputs(sys.argv[2])
b = outputs(sys.argv[3], a)
for i, (x, y) in enumerate(zip(a, b)):
    if x.shape != y.shape or x.tobytes() != y.tobytes():
        print("output_%d differs by up to %.3g" % (i, np.max(np.abs(x - y)) if x.shape == y.shape else np.nan))
        sys.exit(1)
print("same " + sys.argv[3])
