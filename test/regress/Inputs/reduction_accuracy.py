"""Reductions against numpy (issue 7, items 2-4): float16 sums accumulate in float32,
float32 sums are compensated (not one sequential accumulator), max/min start from the
dtype's limits. Usage: reduction_accuracy.py GRADC WORKDIR; prints one line per case."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(7)


def run(name, params, body, inputs):
    return run_model(gradc, work, name, params, body, inputs)[0]


def ulps(got, want, dtype):
    spacing = np.abs(np.spacing(np.array(want, dtype=dtype)))
    return float(np.abs(np.float64(got) - np.float64(want)) / np.float64(spacing))


def report(case, ok, detail):
    print("%s %s: %s" % ("PASS" if ok else "FAIL", case, detail))


# float32: 2*10^7 ones (one sequential accumulator stops at 16777216).
n = 20_000_000
got = run("ones32", "%x: Tensor[(20000000,), float32]", "sum(%x)", {"x": np.ones(n, np.float32)})
report("sum of 2e7 float32 ones", float(got) == 2e7, "got %r" % float(got))

# float32: 2^20 random values against the exact (float64) sum, within 2 ulps.
x = rng.standard_normal(1 << 20).astype(np.float32) + np.float32(3)
exact = np.float32(np.sum(x, dtype=np.float64))
got = run("rand32", "%x: Tensor[(1048576,), float32]", "sum(%x)", {"x": x})
report("sum of 2^20 float32 normals", ulps(got, exact, np.float32) <= 2,
       "%.1f ulps from the exact sum (numpy's pairwise: %.1f)" % (ulps(got, exact, np.float32),
                                                                  ulps(np.sum(x), exact, np.float32)))

# float32 mean along an axis with a ragged tail, against float64.
m = rng.random((3, 100003), dtype=np.float32)
got = run("mean32", "%x: Tensor[(3, 100003), float32]", "mean(%x, axis=1)", {"x": m})
want = np.mean(m, axis=1, dtype=np.float64).astype(np.float32)
report("mean over 100003 float32", all(ulps(g, w, np.float32) <= 2 for g, w in zip(got, want)),
       "ulps %s" % [round(ulps(g, w, np.float32), 1) for g, w in zip(got, want)])

# float16: 4096 ones (a float16 accumulator stops at 2048), and a softmax row of 4096.
got = run("ones16", "%x: Tensor[(4096,), float16]", "sum(%x)", {"x": np.ones(4096, np.float16)})
report("sum of 4096 float16 ones", float(got) == 4096.0, "got %r" % float(got))
row = np.zeros((1, 4096), np.float16)
got = run("softmax16", "%x: Tensor[(1, 4096), float16]", "nn.softmax(%x)", {"x": row})
total = float(np.sum(got, dtype=np.float64))
report("float16 softmax row of 4096 sums to 1", abs(total - 1.0) < 1e-2, "sum %r" % total)
h = rng.standard_normal((8, 300)).astype(np.float16)
got = run("dense16", "%x: Tensor[(8, 300), float16], %w: Tensor[(5, 300), float16]", "nn.dense(%x, %w)",
          {"x": h, "w": h[:5]})
want = (h.astype(np.float32) @ h[:5].astype(np.float32).T).astype(np.float16)
err = np.abs(got.astype(np.float32) - want.astype(np.float32)) / np.abs(np.spacing(want)).astype(np.float32)
report("float16 dense accumulates in float32", float(np.max(err)) <= 1, "max error %.1f ulps" % float(np.max(err)))

# float32 softmax rows of 10^6 (sums of exponentials, 2 terms a lane added plainly between
# compensated steps: Kernel.h, compensated_sum's `group`), against float64 from x - max rounded
# to float32 as any float32 softmax computes it (that rounding alone moves exp(x - max) by up to
# ~17 ulps at x - max = -28), in ulps of each output.
w = (rng.standard_normal((2, 1_000_003)) * 3).astype(np.float32)
got = run("softmax32", "%x: Tensor[(2, 1000003), float32]", "nn.softmax(%x)", {"x": w})
e = np.exp((w - w.max(axis=1, keepdims=True)).astype(np.float64))
want = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
err = np.abs(got.astype(np.float64) - want) / np.abs(np.spacing(want)).astype(np.float64)
report("float32 softmax rows of 10^6", float(np.max(err)) <= 4, "max error %.1f ulps" % float(np.max(err)))

# max/min of bool and at the int64 and int32 limits.
b = np.array([False, False, False])
got = run("maxbool", "%x: Tensor[(3,), bool]", "(max(%x), min(%x), max(%x == %x))", {"x": b})
outs = [np.load(os.path.join(work, "maxbool", "output_%d.npy" % i)) for i in range(3)]
report("max/min of bool", [bool(o) for o in outs] == [False, False, True], "got %s" % [bool(o) for o in outs])
for dt, info in (("int64", np.iinfo(np.int64)), ("int32", np.iinfo(np.int32))):
    v = np.array([info.min, info.max], dtype=dt)
    run("lim" + dt, "%%x: Tensor[(2,), %s]" % dt, "(max(%x), min(%x))", {"x": v})
    outs = [int(np.load(os.path.join(work, "lim" + dt, "output_%d.npy" % i))) for i in range(2)]
    lo = np.array([info.min], dtype=dt)
    run("low" + dt, "%%x: Tensor[(1,), %s]" % dt, "(max(%x), min(%x))", {"x": lo})
    low = [int(np.load(os.path.join(work, "low" + dt, "output_%d.npy" % i))) for i in range(2)]
    report("max/min of %s at its limits" % dt, outs == [info.max, info.min] and low == [info.min, info.min],
           "got %s and %s" % (outs, low))
