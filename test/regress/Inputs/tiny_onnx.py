"""Writes two small ONNX models for the tests of what `gradc import` writes.

  a.onnx: y = x . W, with x of shape (1, 2) and W = ones(2, 3): y is [2, 2, 2] for x = ones
  b.onnx: y = x . W + V, with W = 7 * ones(2, 3), V = ones(3): y is [15, 15, 15]
  x.npy:  ones(1, 2), float32

usage: tiny_onnx.py DIR
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(name, nodes, inits):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with open(os.path.join(out, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())


save("a", [helper.make_node("MatMul", ["x", "W"], ["y"])],
     [numpy_helper.from_array(np.ones((2, 3), np.float32), "W")])
save("b", [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Add", ["m", "V"], ["y"])],
     [numpy_helper.from_array(np.full((2, 3), 7, np.float32), "W"), numpy_helper.from_array(np.ones(3, np.float32), "V")])
np.save(os.path.join(out, "x.npy"), np.ones((1, 2), np.float32))
