"""Average pools a row at a time (the CPU strategies, cpu/pool.cpp): the forward sums an output
row's windows tap by tap, the backward fills a data row from each window row that holds it,
each tap one loop over the windows whose tap lies in the data. Value and gradient against
numpy: inception_v3's pools (3 x 3 of stride 1, padding counted), the padding not counted,
densenet's 2 x 2 of stride 2, strides with gaps (columns in no window), dilated windows
unevenly padded, ceil_mode, and the shapes the generic kernels keep (a window of 17 columns,
rows of 1100). Usage: avg_pool_row_windows.py GRADC WORKDIR."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from pool_reference import check  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(24)


def case(tag, name, shape, k, s, d, pad, include_pad=True, ceil=False):
    check(gradc, work, tag, name, rng.standard_normal(shape), rng, "avg", k, s, d, pad, include_pad, ceil)


case("a0", "3x3 stride 1 pad 1, padding counted (inception's)", (2, 5, 17, 17), (3, 3), (1, 1), (1, 1), [1, 1, 1, 1])
case("a1", "3x3 stride 1 pad 1, padding not counted", (2, 3, 9, 35), (3, 3), (1, 1), (1, 1), [1, 1, 1, 1], False)
case("a2", "2x2 stride 2 (densenet's transitions)", (2, 4, 14, 14), (2, 2), (2, 2), (1, 1), [0, 0, 0, 0])
case("a3", "2x2 stride 3, columns in no window", (1, 3, 10, 11), (2, 2), (3, 3), (1, 1), [0, 0, 0, 0])
case("a4", "3x2 dilated 2 by 3, uneven padding", (2, 2, 11, 13), (3, 2), (1, 2), (2, 3), [2, 1, 0, 3], False)
case("a5", "3x3 stride 2 ceil_mode, padding counted", (1, 3, 12, 15), (3, 3), (2, 2), (1, 1), [1, 1, 1, 1],
     True, True)
case("a6", "5x5 stride 2 pad 2, not counted, ceil_mode", (1, 2, 8, 9), (5, 5), (2, 2), (1, 1), [2, 2, 2, 2],
     False, True)
case("a7", "a window of 17 columns (the generic backward)", (1, 2, 5, 20), (2, 17), (1, 1), (1, 1), [0, 0, 0, 0])
case("a8", "rows of 1100 (the generic kernels)", (1, 1, 3, 1100), (2, 3), (1, 1), (1, 1), [0, 1, 0, 1])
