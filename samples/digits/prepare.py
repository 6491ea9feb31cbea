"""Writes scikit-learn's bundled 8x8 digits (1 797 images, Debian's
python3-sklearn; no download) as .npy files for the C trainer: a fixed
shuffle, 1 437 training and 360 test images, pixels scaled to [0, 1].
Usage: prepare.py OUTDIR"""
import os
import sys

import numpy as np
from sklearn.datasets import load_digits

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
digits = load_digits()
x = (digits.images / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
y = digits.target.astype(np.int64)
order = np.random.default_rng(0).permutation(len(y))
x, y = x[order], y[order]
test = 360
np.save(os.path.join(out, "train_x.npy"), x[test:])
np.save(os.path.join(out, "train_y.npy"), y[test:])
np.save(os.path.join(out, "test_x.npy"), x[:test])
np.save(os.path.join(out, "test_y.npy"), y[:test])
print("digits: %d training and %d test images of 8x8 in %s" % (len(y) - test, test, out))
