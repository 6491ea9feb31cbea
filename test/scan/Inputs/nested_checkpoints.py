"""Nested scans under every pair of time checkpointing settings (nested_checkpoints.test).

An outer scan whose body runs an inner scan, each of them with no checkpointing,
checkpoint_every=2 or 3, or checkpoint_slots=1 or 2, for several step counts of
each (STEPS): `gradc run --grad` of every pair is compared with the pair without any
checkpointing, output by output, bit for bit (the README's promise for the CPU).
Each run has a time limit, so a backward pass that never ends fails the test.
usage: nested_checkpoints.py GRADC WORKDIR
"""
import itertools
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

GRADC, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
SETTINGS = ["", "checkpoint_every=2", "checkpoint_every=3", "checkpoint_slots=1", "checkpoint_slots=2"]
# (outer T, inner steps): 7/6 leaves every setting something to checkpoint in both scans.
STEPS = [(4, 3), (4, 5), (5, 3), (5, 5), (7, 6)]
LIMIT_S = 60

MODEL = """#[version = "0.0.5"]
def @main(%h0: Tensor[(2,), float64], %x: Tensor[({T}, {S}, 2), float64], %w: Tensor[(2, 2), float64]) {{
  %hs = scan(fn (%h, %xt) {{
      %inner = scan(fn (%g, %y) {{ tanh(matmul(%w, %g) + %y) }}, %h, %xt{inner});
      sin(sum(%inner, axis=0))
    }}, %h0, %x{outer});
  sum(%hs * %hs)
}}
"""


def name(setting):
    return setting.replace("checkpoint_", "").replace("=", "") or "none"


def run(T, S, inner, outer):
    """The outputs of one pair, or why there are none."""
    where = os.path.join(WORK, "T%d_S%d_%s_%s" % (T, S, name(inner), name(outer)))
    os.makedirs(where, exist_ok=True)
    with open(os.path.join(where, "m.relay"), "w") as f:
        f.write(MODEL.format(T=T, S=S, inner=", " + inner if inner else "", outer=", " + outer if outer else ""))
    inputs = os.path.join(WORK, "inputs_T%d_S%d" % (T, S))
    cmd = [GRADC, "run", "m.relay", "--grad", "--verify-each", "--inputs-dir=" + inputs, "--output-dir=out"]
    try:
        p = subprocess.run(cmd, cwd=where, capture_output=True, text=True, timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        return "no result after %d s" % LIMIT_S
    if p.returncode != 0:
        return "exit %d: %s" % (p.returncode, p.stderr.strip()[-400:])
    return [np.load(os.path.join(where, "out", "output_%d.npy" % i)) for i in range(4)]


rng = np.random.default_rng(30)
for T, S in STEPS:
    inputs = os.path.join(WORK, "inputs_T%d_S%d" % (T, S))
    os.makedirs(inputs, exist_ok=True)
    np.save(os.path.join(inputs, "h0.npy"), rng.standard_normal(2))
    np.save(os.path.join(inputs, "x.npy"), rng.standard_normal((T, S, 2)))
    np.save(os.path.join(inputs, "w.npy"), 0.7 * rng.standard_normal((2, 2)))

cases = [(T, S, inner, outer) for T, S in STEPS for inner, outer in itertools.product(SETTINGS, SETTINGS)]
with ThreadPoolExecutor(max_workers=2) as pool:
    results = dict(zip(cases, pool.map(lambda c: run(*c), cases)))

failures = 0
for T, S, inner, outer in cases:
    got, want = results[(T, S, inner, outer)], results[(T, S, "", "")]
    label = "T=%d S=%d inner %s outer %s" % (T, S, name(inner), name(outer))
    if isinstance(want, str):
        print("FAIL %s: the reference has no result: %s" % (label, want))
        failures += 1
    elif isinstance(got, str):
        print("FAIL %s: %s" % (label, got))
        failures += 1
    else:
        for i, (g, w) in enumerate(zip(got, want)):
            if g.shape != w.shape or g.dtype != w.dtype or g.tobytes() != w.tobytes():
                diff = np.max(np.abs(g - w)) if g.shape == w.shape else float("nan")
                print("FAIL %s: output_%d differs from the unchecked run's by up to %.3g" % (label, i, diff))
                failures += 1
print("%d pairs of settings, %d failures" % (len(cases), failures))
sys.exit(1 if failures else 0)
