"""Runs every function of inplace.relay with `gradc run` and compares each
result (a parameter updated in place is read back from its buffer) with
numpy. Prints `ok` or what differs. Usage: inplace_check.py GRADC MODEL DIR"""
import os
import subprocess
import sys

import numpy as np

gradc, model, work = sys.argv[1:4]
rng = np.random.default_rng(7)


def f32(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def run(entry, inputs):
    d = os.path.join(work, entry)
    os.makedirs(d, exist_ok=True)
    args = [gradc, "run", model, "--entry=" + entry, "--output-dir=" + os.path.join(d, "out")]
    for name, value in inputs.items():
        path = os.path.join(d, name + ".npy")
        np.save(path, value)
        args.append("--input=%s=%s" % (name, path))
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    out, i = [], 0
    while os.path.exists(os.path.join(d, "out", "output_%d.npy" % i)):
        out.append(np.load(os.path.join(d, "out", "output_%d.npy" % i)))
        i += 1
    return out


failures = []


def check(entry, inputs, expected, tol):
    got = run(entry, inputs)
    if len(got) != len(expected):
        failures.append("%s: %d results, expected %d" % (entry, len(got), len(expected)))
        return
    for i, (g, e) in enumerate(zip(got, expected)):
        e = np.asarray(e)
        if g.shape != e.shape or not np.allclose(g, e, rtol=tol, atol=tol):
            failures.append("%s: output_%d differs by %s" % (entry, i, np.abs(g.astype(np.float64) - e).max()))


w, g, lr = f32(64, 32), f32(64, 32), np.float32(0.1)
check("sgd", {"w": w, "g": g, "lr": np.array(lr)}, [w - lr * g], 1e-6)

x, w = f32(8, 32), f32(64, 32)
y = x.astype(np.float64) @ w.T.astype(np.float64)
check("step", {"x": x, "w": w, "lr": np.array(lr)}, [(y * y).sum(), w - 0.1 * (y.T @ x)], 1e-5)

a, b = f32(4, 4), f32(4, 4)
check("swap", {"a": a, "b": b}, [b, a], 0)
check("transpose_self", {"a": a}, [a.T], 0)
check("both", {"a": a}, [a, a * 2], 0)
check("late_reader", {"a": a, "b": b}, [a + 1, a * b], 0)

x, y, w = f32(64, 4096), f32(64, 4096), f32(64, 64)
check("bigk", {"x": x, "y": y, "w": w}, [w + x.astype(np.float64) @ y.T.astype(np.float64)], 1e-4)

w, v, g = (rng.uniform(-1, 1, (16, 16)) for _ in range(3))
v1 = 0.9 * v + g
check("momentum", {"w": w, "v": v, "g": g, "lr": np.array(0.05)}, [w - 0.05 * v1, v1], 1e-12)

check("cross", {"a": a, "b": b}, [a + b, b - a], 0)

print("\n".join(failures) if failures else "ok")
