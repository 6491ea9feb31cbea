"""Draws the trainer's curves (its CSV: epoch, loss, test accuracy) to a PNG.
Usage: plot.py CURVES.csv OUT.png"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

rows = np.loadtxt(sys.argv[1], delimiter=",", skiprows=1, ndmin=2)
fig, loss_ax = plt.subplots(figsize=(6, 3.5))
loss_ax.plot(rows[:, 0], rows[:, 1], "o-", color="tab:blue")
loss_ax.set_xlabel("epoch")
loss_ax.set_ylabel("mean training loss", color="tab:blue")
acc_ax = loss_ax.twinx()
acc_ax.plot(rows[:, 0], 100 * rows[:, 2], "s-", color="tab:orange")
acc_ax.set_ylabel("test accuracy (%)", color="tab:orange")
acc_ax.axhline(95, color="tab:orange", lw=0.5, ls="--")
fig.suptitle("gradc: digits CNN, one compiled training step per batch (Adam)")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=100)
print("curves: " + sys.argv[2])
