"""Writes the ONNX files of the import tests into DIR: a small valid model,
and malformed ones (truncated, garbage, a tensor instead of a model, an input
nobody defines, a cycle, operators and attributes gradc does not map, a
dynamic input dimension).

usage: make_models.py DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
r = np.random.default_rng(0)


def save(name, nodes, inputs, outputs, inits=(), opset=13, check=True):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    if check:
        onnx.checker.check_model(m)
    with open(os.path.join(out, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())
    return m


def vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


# A valid model: conv, batch norm, relu, average pool, flatten, gemm, softmax;
# a name with a '.' and one starting with a digit.
w = numpy_helper.from_array(r.standard_normal((4, 2, 3, 3)).astype(np.float32), "conv.weight")
g = numpy_helper.from_array(r.uniform(0.5, 1.5, 4).astype(np.float32), "bn.scale")
b = numpy_helper.from_array(r.standard_normal(4).astype(np.float32), "bn.bias")
mu = numpy_helper.from_array(r.standard_normal(4).astype(np.float32), "bn.mean")
var = numpy_helper.from_array(r.uniform(0.5, 1.5, 4).astype(np.float32), "bn.var")
fc = numpy_helper.from_array(r.standard_normal((16, 5)).astype(np.float32), "0fc")
good = save("good", [
    helper.make_node("Conv", ["x", "conv.weight"], ["c"], pads=[1, 1, 1, 1], name="conv"),
    helper.make_node("BatchNormalization", ["c", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["n"], epsilon=1e-3),
    helper.make_node("Relu", ["n"], ["r"]),
    helper.make_node("AveragePool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Flatten", ["p"], ["f"]),
    helper.make_node("Gemm", ["f", "0fc"], ["y"], alpha=0.5),
    helper.make_node("Softmax", ["y"], ["prob"]),
], [vi("x", [3, 2, 4, 4])], [vi("prob", [3, 5])], [w, g, b, mu, var, fc])
np.save(os.path.join(out, "x.npy"), r.standard_normal((3, 2, 4, 4)).astype(np.float32))

data = good.SerializeToString()
with open(os.path.join(out, "truncated.onnx"), "wb") as f:
    f.write(data[: len(data) // 2])
with open(os.path.join(out, "garbage.onnx"), "wb") as f:
    f.write(bytes(r.integers(0, 256, 4096, dtype=np.uint8)))
with open(os.path.join(out, "tensor.onnx"), "wb") as f:
    f.write(w.SerializeToString())

save("undefined", [helper.make_node("Add", ["x", "missing_weight"], ["y"])], [vi("x", [2])], [vi("y", [2])],
     check=False)
save("cycle", [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])],
     [vi("x", [2])], [vi("b", [2])], check=False)
save("unmapped", [
    helper.make_node("Hardmax", ["x"], ["h"], name="first"),
    helper.make_node("Relu", ["h"], ["r"]),
    helper.make_node("Pad", ["x", "pads"], ["p"], mode="wrap", name="pad"),
    helper.make_node("Det", ["x"], ["d"], name="last"),
], [vi("x", [2, 2])], [vi("r", [2, 2]), vi("p", [2, 4]), vi("d", [])],
    [numpy_helper.from_array(np.array([0, 1, 0, 1], dtype=np.int64), "pads")])
# What the index and window mappings refuse, each a located error.
save("refused_index", [
    helper.make_node("Einsum", ["x", "x"], ["e"], equation="ii,ij->j", name="diag"),
    helper.make_node("ScatterND", ["x", "i", "u"], ["s"], reduction="mul", name="scatter"),
    helper.make_node("GatherElements", ["x", "long"], ["g"], axis=0, name="gather"),
    helper.make_node("Einsum", ["x"], ["f"], equation="ij,jk->ik", name="terms"),
    helper.make_node("MaxPool", ["v"], ["m"], kernel_shape=[1, 1, 1, 1], name="pool4d"),
    helper.make_node("ReduceSum", ["x", "axes"], ["r"], keepdims=0, name="sum"),
], [vi("x", [2, 2]), vi("u", [1, 2]), vi("v", [1, 1, 2, 2, 2, 2]), vi("axes", [1], TensorProto.INT64)],
    [vi("e", [2]), vi("s", [2, 2]), vi("g", [2, 3]), vi("f", [2, 2]), vi("m", [1, 1, 2, 2, 2, 2]), vi("r", [2])],
    [numpy_helper.from_array(np.array([[1]], dtype=np.int64), "i"),
     numpy_helper.from_array(np.zeros((2, 3), dtype=np.int64), "long")], opset=16, check=False)
save("dynamic", [helper.make_node("Relu", ["x"], ["y"])], [vi("x", ["batch", 3])], [vi("y", ["batch", 3])])
