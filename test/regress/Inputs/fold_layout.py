"""The folder's layout operators on constants against numpy: Slice (negative
steps, clamped ends, several axes), Transpose, Tile, Expand, Range, Mod,
ScatterND, Where and Gather on a middle axis, each folded at import (every
input a constant) and written out by `gradc run` (`make DIR`, then
`check DIR`)."""
import os
import sys

import numpy as np
from onnx import TensorProto as T, helper as H, numpy_helper as N

a = np.arange(2 * 3 * 5, dtype=np.int64).reshape(2, 3, 5) * 7 - 40
f = (np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5) / 3
CASES = {
    "slice": (lambda c: [H.make_node("Slice", [c("a"), c("s", [4, 2]), c("e", [-9, 0]), c("ax", [2, 1]),
                                                c("st", [-2, -1])], ["y"])],
              a[:, 2:0:-1, 4::-2]),
    "transpose": (lambda c: [H.make_node("Transpose", [c("a")], ["y"], perm=[2, 0, 1])], a.transpose(2, 0, 1)),
    "tile": (lambda c: [H.make_node("Tile", [c("f"), c("r", [2, 3])], ["y"])], np.tile(f, (2, 3))),
    "expand": (lambda c: [H.make_node("Expand", [c("f"), c("sh", [2, 1, 4])], ["y"])],
               np.broadcast_to(f, (2, 3, 4))),
    "range": (lambda c: [H.make_node("Range", [c("r0", 7), c("r1", -8), c("r2", -3)], ["y"])], np.arange(7, -8, -3)),
    "mod": (lambda c: [H.make_node("Mod", [c("a"), c("m", [3, -4, 5, -6, 7])], ["y"])],
            np.mod(a, np.array([3, -4, 5, -6, 7]))),
    "scatternd": (lambda c: [H.make_node("ScatterND", [c("f"), c("i", [[2], [0]]), c("u", np.ones((2, 4), np.float32))],
                                         ["y"])], np.where(np.array([[1], [0], [1]]) == 1, np.float32(1), f)),
    "where": (lambda c: [H.make_node("Where", [c("w", a[0] > 0), c("a"), c("z", np.int64(0))], ["y"])],
              np.where(a[0] > 0, a, 0)),
    "gather": (lambda c: [H.make_node("Gather", [c("a"), c("g", [[2, -1], [0, 0]])], ["y"], axis=1)],
               np.take(a, np.array([[2, 2], [0, 0]]), axis=1)),
}


def model(name):
    build, want = CASES[name]
    nodes = []

    def c(n, v=None):
        v = {"a": a, "f": f}[n] if v is None else np.asarray(v)
        if v.dtype == np.int32 or (v.dtype.kind == "i" and v.dtype != np.int64):
            v = v.astype(np.int64)
        nodes.append(H.make_node("Constant", [], [n + "_c"], value=N.from_array(v, n + "_v")))
        return n + "_c"

    body = build(c)
    want = np.asarray(want)
    elem = {np.dtype(np.int64): T.INT64, np.dtype(np.float32): T.FLOAT}[want.dtype]
    g = H.make_graph(nodes + body, name, [], [H.make_tensor_value_info("y", elem, list(want.shape))])
    return H.make_model(g, opset_imports=[H.make_opsetid("", 15)]), want


if __name__ == "__main__":
    what, d = sys.argv[1], sys.argv[2]
    for name in CASES:
        m, want = model(name)
        if what == "make":
            with open(os.path.join(d, name + ".onnx"), "wb") as f_:
                f_.write(m.SerializeToString())
        else:
            got = np.load(os.path.join(d, name, "output_0.npy"))
            ok = got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
            print("%s: %s" % (name, "as numpy" if ok else "DIFFERS: %s %s %s" % (got.dtype, got.shape, got.ravel()[:8])))
