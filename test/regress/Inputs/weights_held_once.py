"""`make DIR` writes an ONNX model of 12 MatMuls whose weights total 192
MiB; `measure GRADC DIR` (a small process of its own, so that the forked
child's peak is gradc's alone) runs `gradc import` and `gradc compile` on it
and prints each one's peak resident memory as a multiple of the weights'
size.

usage: weights_held_once.py make DIR | measure GRADC DIR
"""
import os
import sys

WEIGHTS = 12 * 2048 * 2048 * 4


def make(d):
    import numpy as np
    from onnx import TensorProto as T, helper as H, numpy_helper as N
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(12):
        inits.append(N.from_array(rng.standard_normal((2048, 2048), dtype=np.float32), "w%d" % i))
        nodes.append(H.make_node("MatMul", [prev, "w%d" % i], ["h%d" % i]))
        prev = "h%d" % i
    g = H.make_graph(nodes, "big", [H.make_tensor_value_info("x", T.FLOAT, [1, 2048])],
                     [H.make_tensor_value_info(prev, T.FLOAT, [1, 2048])], inits)
    with open(os.path.join(d, "big.onnx"), "wb") as f:
        f.write(H.make_model(g, opset_imports=[H.make_opsetid("", 13)]).SerializeToString())


def measure(gradc, d):
    model = os.path.join(d, "big.onnx")
    for what, args in [("import", ["import", model, "-o", os.path.join(d, "m")]),
                       ("compile", ["compile", model, "-o", os.path.join(d, "c"), "-O0"])]:
        pid = os.fork()
        if pid == 0:
            os.execv(gradc, [gradc] + args)
        _, status, usage = os.wait4(pid, 0)
        ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        print("%s: %s, peak %.2f times the weights" % (what, "ok" if ok else "FAILED", usage.ru_maxrss * 1024 / WEIGHTS))
    # Only after both: a child forked from a process holding the model would count it.
    import numpy as np
    import onnx
    from onnx import numpy_helper
    inits = onnx.load(model).graph.initializer
    same = sum(np.array_equal(numpy_helper.to_array(t), np.load(os.path.join(d, "m.weights", t.name + ".npy")))
               for t in inits)
    print("weights: %d of %d equal to the initializers" % (same, len(inits)))


if __name__ == "__main__":
    make(sys.argv[2]) if sys.argv[1] == "make" else measure(sys.argv[2], sys.argv[3])
