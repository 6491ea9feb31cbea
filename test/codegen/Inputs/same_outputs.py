"""same_outputs.py DIR_A DIR_B RTOL: every output_i.npy of DIR_A matches DIR_B's within RTOL of its
largest magnitude (two targets sum in different orders); prints `N outputs match`."""
import os
import sys

import numpy as np

a_dir, b_dir, rtol = sys.argv[1], sys.argv[2], float(sys.argv[3])
n = 0
while os.path.exists(os.path.join(a_dir, "output_%d.npy" % n)):
    a = np.load(os.path.join(a_dir, "output_%d.npy" % n)).astype(np.float64)
    b = np.load(os.path.join(b_dir, "output_%d.npy" % n)).astype(np.float64)
    scale = max(1e-30, float(np.max(np.abs(a))))
    err = float(np.max(np.abs(a - b)))
    if a.shape != b.shape or err > rtol * scale:
        sys.exit("output %d: shapes %s %s, error %.3g of %.3g" % (n, a.shape, b.shape, err, scale))
    n += 1
print("%d outputs match" % n)
