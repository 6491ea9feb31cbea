"""Max pools over very wide rows: the CPU strategy keeps an output row's maxima and argmaxes in
locals on the thread's stack, and a row of 1.5 million windows overflowed it (a crash, exit 139).
Rows longer than 1024 windows take the generic kernels. Value and gradient against numpy for
rows of 1024 windows (kept) and 1025 and a million (generic).
Usage: max_pool_wide_rows.py GRADC WORKDIR."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(3)

# windows of 3 at stride 2 (overlapping: disjoint windows' gradient is an element-wise gather)
for tag, windows in (("w0", 1024), ("w1", 1025), ("w2", 1000000)):
    width = 2 * windows + 1
    x = rng.standard_normal((1, 2, 2, width))
    cols = 2 * np.arange(windows)[:, None] + np.arange(3)[None, :]
    taps = x[..., cols]  # (1, 2, 2, windows, 3)
    want = taps.max(axis=4).sum()
    first = 2 * np.arange(windows) + taps.argmax(axis=4)
    dx = np.zeros_like(x)
    for n in range(1):
        for c in range(2):
            for h in range(2):
                np.add.at(dx[n, c, h], first[n, c, h], 1.0)
    got, got_dx = run_model(gradc, work, tag, "%%x: Tensor[(1, 2, 2, %d), float64]" % width,
                            "sum(nn.max_pool2d(%x, pool_size=[1, 3], strides=[1, 2]))", {"x": x},
                            flags=("--grad", "--wrt=%x"))
    err = max(abs(float(got) - want) / abs(want), float(np.max(np.abs(got_dx - dx))))
    print("%s rows of %d windows: error %.1e" % ("PASS" if err < 1e-12 else "FAIL", windows, err))
