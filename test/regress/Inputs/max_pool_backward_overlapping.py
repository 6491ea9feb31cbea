"""Max pools whose windows overlap (stride below the window: ResNet's 3 x 3 of stride 2),
value and gradient against numpy. Their backward rescanned every window holding each element
(8x the forward, 57% of googlenet's step); it now finds each window's first maximum once and
adds each window's adjoint there. Ties, windows of -inf, windows partly past the data, dilation.
Usage: max_pool_backward_overlapping.py GRADC WORKDIR."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from pool_reference import check  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(11)

stem = ((3, 3), (2, 2), (1, 1), [1, 1, 1, 1])
check(gradc, work, "m0", "3x3 stride 2 pad 1 (ResNet)", rng.standard_normal((2, 3, 12, 11)), rng, "max", *stem)
# Many ties: the first maximum in row-major tap order takes the window's adjoint.
check(gradc, work, "m1", "ties", rng.integers(0, 3, (2, 2, 9, 9)).astype(np.float64), rng, "max", *stem)
# A plane of -inf: the first tap inside the data is each window's maximum.
x = rng.standard_normal((1, 2, 7, 7))
x[0, 1] = -np.inf
check(gradc, work, "m2", "-inf plane", x, rng, "max", *stem)
# Stride 1 (every element in 9 windows), padded past the data on the bottom and right.
check(gradc, work, "m3", "3x3 stride 1, uneven padding", rng.standard_normal((1, 3, 6, 8)), rng, "max",
      (3, 3), (1, 1), (1, 1), [0, 1, 2, 2])
# Dilated windows that overlap, strides differing per axis.
check(gradc, work, "m4", "dilation 2, strides (2, 1)", rng.standard_normal((2, 1, 11, 10)), rng, "max",
      (3, 2), (2, 1), (2, 2), [2, 1, 2, 0])
