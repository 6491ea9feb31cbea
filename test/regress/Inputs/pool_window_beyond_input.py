"""Pools whose window is far longer than the data (hostile-inputs report, informational: a
window of 2^31 columns with SAME padding ran 2^31 taps per output, over 60 s). The tap loops
now visit only the taps that can reach the data (and, in the gradients, the windows). Each
case against numpy, value and gradient. Usage: pool_window_beyond_input.py GRADC WORKDIR."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from pool_reference import check  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(5)


cases = 0


def case(name, shape, kind, k, s, d, pad, include_pad=False):
    """Runs WORK/pN.relay, N counting the cases from 0."""
    global cases
    check(gradc, work, "p%d" % cases, name, rng.standard_normal(shape), rng, kind, k, s, d, pad, include_pad)
    cases += 1


SAME = 2 ** 31 - 1  # the padding of a window of 2^31 at stride 1, split as ONNX's SAME_UPPER does
big = [0, SAME // 2, 0, SAME - SAME // 2]
case("avg_pool2d with a window of 2^31 columns over 5", (1, 2, 3, 5), "avg", (2, 2 ** 31), (1, 1), (1, 1), big)
case("avg_pool2d with a window of 2^31 columns, pads counted", (1, 2, 3, 5), "avg", (2, 2 ** 31), (1, 1), (1, 1),
     big, include_pad=True)
case("max_pool2d with a window of 2^31 columns over 5", (1, 2, 3, 5), "max", (2, 2 ** 31), (1, 1), (1, 1), big)
# Strides as long as the windows: the max pool's gradient writes each window's taps.
case("max_pool2d with disjoint windows of 2^31 columns", (1, 2, 3, 5), "max", (2, 2 ** 31), (2, 2 ** 31), (1, 1), big)
# Dilated and strided, the window 2^31 taps of 3 rows (3·(2^31 - 1) + 1 rows) over 4, unevenly padded.
span = 3 * (2 ** 31 - 1) + 1
tall = [span // 2, 1, span + 5 - span // 2, 0]
for kind in ("avg", "max"):
    case("%s_pool2d with a dilated window of 2^31 rows over 4" % kind, (2, 1, 4, 7), kind, (2 ** 31, 3), (5, 2),
         (3, 1), tall)
