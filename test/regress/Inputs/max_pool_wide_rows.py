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

for tag, width in (("w0", 2048), ("w1", 2050), ("w2", 2000000)):
    x = rng.standard_normal((1, 2, 2, width))
    pairs = x.reshape(1, 2, 2, width // 2, 2)
    want = pairs.max(axis=4).sum()
    first = pairs.argmax(axis=4)
    dx = np.zeros_like(pairs)
    np.put_along_axis(dx, first[..., None], 1.0, axis=4)
    got, got_dx = run_model(gradc, work, tag, "%%x: Tensor[(1, 2, 2, %d), float64]" % width,
                            "sum(nn.max_pool2d(%x, pool_size=[1, 2], strides=[1, 2]))", {"x": x},
                            flags=("--grad", "--wrt=%x"))
    err = max(abs(float(got) - want) / abs(want), float(np.max(np.abs(got_dx - dx.reshape(x.shape)))))
    print("%s rows of %d windows: error %.1e" % ("PASS" if err < 1e-12 else "FAIL", width // 2, err))
