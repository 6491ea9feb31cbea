"""Max pools computed an output row's windows side by side (the CPU strategy, cpu/pool.cpp):
the taps outside, the row's windows inside with selects, the windows that read no padding
unguarded. Value and gradient against numpy, for googlenet's pools (3 x 3 of stride 1, and of
stride 2 with ceil_mode), rows long enough for LLVM's vectorizer, disjoint windows (vgg's 2 x 2
of stride 2, with ties; 3 x 3 of stride 3 whose edge windows read padding), a plane of -inf.
Usage: max_pool_row_windows.py GRADC WORKDIR."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from pool_reference import check  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(23)

check(gradc, work, "r0", "3x3 stride 1 pad 1 (googlenet's branch)", rng.standard_normal((2, 5, 14, 14)), rng, "max",
      (3, 3), (1, 1), (1, 1), [1, 1, 1, 1])
check(gradc, work, "r1", "3x3 stride 2 ceil_mode (googlenet's)", rng.standard_normal((2, 4, 15, 16)), rng, "max",
      (3, 3), (2, 2), (1, 1), [0, 0, 0, 0], ceil=True)
check(gradc, work, "r2", "3x3 stride 2 pad 1, rows of 75 windows", rng.standard_normal((1, 2, 5, 150)), rng, "max",
      (3, 3), (2, 2), (1, 1), [1, 1, 1, 1])
check(gradc, work, "r3", "3x3 stride 1, rows of 98 windows", rng.standard_normal((1, 2, 4, 100)), rng, "max",
      (3, 3), (1, 1), (1, 1), [0, 0, 0, 0])
check(gradc, work, "r4", "2x2 stride 2 with ties (vgg's)", rng.integers(0, 2, (2, 3, 8, 10)).astype(np.float64), rng,
      "max", (2, 2), (2, 2), (1, 1), [0, 0, 0, 0])
check(gradc, work, "r5", "3x3 stride 3 pad 1, disjoint", rng.standard_normal((1, 2, 9, 11)), rng, "max",
      (3, 3), (3, 3), (1, 1), [1, 1, 1, 1])
x = rng.standard_normal((1, 2, 6, 9))
x[0, 0] = -np.inf
check(gradc, work, "r6", "-inf plane, stride 1", x, rng, "max", (3, 3), (1, 1), (1, 1), [1, 1, 1, 1])
