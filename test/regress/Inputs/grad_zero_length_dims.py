"""Gradients through a zero-length dimension (issue 14, item 9). Each case runs through
`gradc run --grad` and is compared with numpy: the forward value, then one gradient per
parameter, which is zeros of the parameter's shape here (either the result has no
elements or it does not depend on the parameter's elements). The `grad` dump of each case
is also parsed back and its @main_adjoint run, which must give the same outputs.
Usage: grad_zero_length_dims.py GRADC WORKDIR; prints one line per case."""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)

# (parameter shapes, Relay body, numpy forward)
CASES = [
    ({"x": (2, 0, 3)}, "reshape(%x, newshape=[-1])", lambda x: x.reshape(-1)),
    ({"x": (0, 3)}, "reshape(%x, newshape=[3, 0], allowzero=True)", lambda x: x.reshape(3, 0)),
    ({"x": (0, 3)}, "expand_dims(%x, axis=0)", lambda x: x[None]),
    ({"x": (3, 0)}, "expand_dims(%x, axis=1, num_newaxis=2)", lambda x: x[:, None, None]),
    ({"x": (0, 3)}, "squeeze(expand_dims(%x, axis=0))", lambda x: x),
    ({"x": (3, 0)}, "cumsum(%x)", lambda x: np.cumsum(x)),
    ({"x": (3, 0)}, "mean(%x, axis=0)", lambda x: np.mean(x, axis=0)),
    ({"x": (3, 0)}, "max(%x, axis=0)", lambda x: np.max(x, axis=0)),
    ({"x": (0,), "w": (4, 0)}, "nn.dense(%x, %w)", lambda x, w: x @ w.T),
    ({"x": (3,), "w": (0, 3)}, "nn.dense(%x, %w)", lambda x, w: x @ w.T),
    ({"x": (2, 0, 3), "w": (4, 3)}, "nn.dense(%x, %w)", lambda x, w: x @ w.T),
    ({"x": (2, 2, 0), "w": (4, 0)}, "nn.dense(%x, %w) + 1f", lambda x, w: x @ w.T + 1),
    ({"x": (2, 2, 3), "w": (0, 3)}, "nn.dense(%x, %w)", lambda x, w: x @ w.T),
    ({"x": (2, 0), "w": (4, 0)}, "nn.dense(%x, %w) + 1f", lambda x, w: x @ w.T + 1),
    ({"a": (0,), "b": (0,)}, "matmul(%a, %b)", lambda a, b: a @ b),
    ({"a": (0,), "b": (0, 3)}, "matmul(%a, %b)", lambda a, b: a @ b),
    ({"a": (3,), "b": (3, 0)}, "matmul(%a, %b)", lambda a, b: a @ b),
    ({"a": (2, 0), "b": (0,)}, "matmul(%a, %b)", lambda a, b: a @ b),
    ({"a": (0, 2, 3), "b": (3,)}, "matmul(%a, %b)", lambda a, b: a @ b),
    ({"a": (2, 0), "b": (0, 4)}, "matmul(%a, %b) + 1f", lambda a, b: a @ b + 1),
]


def shape_text(s):
    return "(" + ", ".join(map(str, s)) + ("," if len(s) == 1 else "") + ")"


def same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


rng = np.random.default_rng(14)
for i, (shapes, body, forward) in enumerate(CASES):
    name = "case%d" % i
    params = ", ".join("%%%s: Tensor[%s, float32]" % (k, shape_text(s)) for k, s in shapes.items())
    inputs = {k: rng.uniform(0.5, 1.5, s).astype(np.float32) for k, s in shapes.items()}
    outputs = run_model(gradc, work, name, params, body, inputs, flags=["--grad"])
    expected = [np.asarray(forward(*inputs.values()), np.float32)] + [np.zeros(s, np.float32) for s in shapes.values()]
    ok = len(outputs) == len(expected) and all(same(o, e) for o, e in zip(outputs, expected))
    # The dump of the gradient program means the same when parsed back.
    model, dump = os.path.join(work, name + ".relay"), os.path.join(work, name + "_grad.relay")
    with open(dump, "w") as f:
        subprocess.run([gradc, "compile", model, "--grad", "--emit=obj", "-o", os.path.join(work, name),
                        "--dump-ir=grad"], check=True, stderr=f)
    out = os.path.join(work, name + "_again")
    subprocess.run([gradc, "run", dump, "--entry=main_adjoint", "--output-dir", out] +
                   ["--input=%s=%s" % (k, os.path.join(work, "%s_%s.npy" % (name, k))) for k in shapes],
                   check=True, stdout=subprocess.DEVNULL)
    again = [np.load(os.path.join(out, "output_%d.npy" % j)) for j in range(len(outputs))]
    ok = ok and all(same(a, o) for a, o in zip(again, outputs))
    print("%s %s %s" % ("ok" if ok else "WRONG", body, shapes))
