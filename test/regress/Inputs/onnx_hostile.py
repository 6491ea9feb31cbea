"""Writes the ONNX models of the importer's regression tests (test/regress/
onnx_*.test) into DIR: for each case NAME given (all when none is), NAME.onnx,
its inputs NAME.inputs/INPUT.npy, and the outputs ONNX's semantics give
NAME.expected/output_I.npy where the case runs.

usage: onnx_hostile.py DIR [NAME...]
       onnx_hostile.py --compare DIR NAME...   (after gradc run NAME.onnx
           --inputs-dir DIR/NAME.inputs --output-dir DIR/NAME.out: prints
           "NAME: as expected" or what differs; integers bitwise, floats
           within 1e-6 relative, NaN and infinities exactly)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper

vi = H.make_tensor_value_info
CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def const(name, array):
    return H.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(array), name + "_value"))


def model(nodes, inputs, outputs, inits=(), opset=13, **kw):
    g = H.make_graph(nodes, "g", inputs, outputs, list(inits))
    return H.make_model(g, opset_imports=[H.make_opsetid("", opset)], **kw)


def elem(a):
    return {np.dtype(np.float32): T.FLOAT, np.dtype(np.float64): T.DOUBLE, np.dtype(np.int64): T.INT64,
            np.dtype(np.int32): T.INT32, np.dtype(np.bool_): T.BOOL}[np.asarray(a).dtype]


def out(name, a):
    return vi(name, elem(a), list(np.shape(a)))


# --- H3: folding broadcasts as numpy, in the tensor's dtype ----------------

@case
def fold_broadcast():
    f = np.float32
    a, b = np.array([[1], [2], [3]], f), np.array([[10, 20, 30]], f)
    c, d = np.ones((1, 1, 1), f), np.array([5, 10, 15, 20], f)
    e, g = np.array([1, 2], f), np.array([[10], [20]], f)
    p, q = np.array([0.1, 1e30], f), np.array([[0.2], [3e-45]], f)
    with np.errstate(over="ignore"):
        ys = [a + b, c * d, e - g, p / q]
    nodes = [const("a", a), const("b", b), const("c", c), const("d", d), const("e", e), const("g", g),
             const("p", p), const("q", q),
             H.make_node("Add", ["a", "b"], ["y0"]), H.make_node("Mul", ["c", "d"], ["y1"]),
             H.make_node("Sub", ["e", "g"], ["y2"]), H.make_node("Div", ["p", "q"], ["y3"])]
    # Read by a node that is not folded: the folded value broadcasts again.
    x = np.arange(9, dtype=f).reshape(3, 3)
    nodes.append(H.make_node("Mul", ["x", "y0"], ["y4"]))
    ys.append(x * ys[0])
    return model(nodes, [out("x", x)], [out("y%d" % i, y) for i, y in enumerate(ys)]), {"x": x}, ys


@case
def fold_integers():
    i64, i32 = np.int64, np.int32
    a, b = np.array([7, -7, 9, -9], i64), np.array([[2], [-4]], i64)
    big = np.array([2 ** 62, -(2 ** 63)], i64)
    m, n = np.array([2147483647, -5], i32), np.array([1, 2], i32)
    with np.errstate(over="ignore"):
        ys = [(np.trunc(a / b)).astype(i64), big * np.array([2], i64), m + n, np.trunc(m / n).astype(i32),
              big - np.array([1], i64)]
    nodes = [const("a", a), const("b", b), const("big", big), const("two", np.array([2], i64)),
             const("m", m), const("n", n), const("one", np.array([1], i64)),
             H.make_node("Div", ["a", "b"], ["y0"]), H.make_node("Mul", ["big", "two"], ["y1"]),
             H.make_node("Add", ["m", "n"], ["y2"]), H.make_node("Div", ["m", "n"], ["y3"]),
             H.make_node("Sub", ["big", "one"], ["y4"])]
    return model(nodes, [], [out("y%d" % i, y) for i, y in enumerate(ys)]), {}, ys


# --- H9: int64 constants keep their exact values ----------------------------

@case
def int64_exact():
    c = np.array([9223372036854775807, 9007199254740993, -9223372036854775808], np.int64)
    x = np.zeros(3, np.int64)
    s = np.array(9223372036854775806, np.int64)
    nodes = [const("c", c), const("s", s), const("h", np.array(2 ** 53, np.int64)), const("u", np.array(1, np.int64)),
             H.make_node("Identity", ["c"], ["y0"]), H.make_node("Add", ["x", "c"], ["y1"]),
             H.make_node("Add", ["x", "s"], ["y2"]), H.make_node("Add", ["h", "u"], ["y3"]),
             H.make_node("Cast", ["c"], ["y4"], to=T.INT32)]
    ys = [c, x + c, x + s, np.array(2 ** 53 + 1, np.int64), c.astype(np.int32)]
    return model(nodes, [out("x", x)], [out("y%d" % i, y) for i, y in enumerate(ys)]), {"x": x}, ys


# --- H4 and M3: infinities and NaN stay what they are ----------------------

@case
def infinite_constants():
    f, d = np.float32, np.float64
    x = np.array([-2, -0.5, 0.5, 3], f)
    x64 = x.astype(d)
    inf, ninf = np.array(np.inf, f), np.array(-np.inf, f)
    with np.errstate(invalid="ignore", over="ignore"):
        ys = [x + inf, x64 + np.array(np.inf, d), np.full((2, 3), -np.inf, f),
              np.where(x > 0, x, np.inf * (np.exp(x) - 1)).astype(f),
              np.where(x > 0, x, np.inf * x).astype(f),
              np.pad(x, (1, 2), constant_values=-np.inf), np.clip(x, -np.inf, 1),
              np.where(x > 0, x, -np.inf)]
    nodes = [const("inf", inf), const("inf64", np.array(np.inf, d)), const("ninf", ninf), const("zero", np.array(0, f)),
             const("one", np.array(1, f)), const("pads", np.array([1, 2], np.int64)),
             const("shape", np.array([2, 3], np.int64)),
             H.make_node("Add", ["x", "inf"], ["y0"]), H.make_node("Add", ["x64", "inf64"], ["y1"]),
             H.make_node("ConstantOfShape", ["shape"], ["y2"],
                         value=numpy_helper.from_array(np.array([-np.inf], f), "v")),
             H.make_node("Elu", ["x"], ["y3"], alpha=float("inf")),
             H.make_node("LeakyRelu", ["x"], ["y4"], alpha=float("inf")),
             H.make_node("Pad", ["x", "pads", "ninf"], ["y5"]),
             H.make_node("Clip", ["x", "ninf", "one"], ["y6"]),
             H.make_node("Greater", ["x", "zero"], ["pos"]),
             H.make_node("Where", ["pos", "x", "ninf"], ["y7"])]
    return (model(nodes, [out("x", x), out("x64", x64)], [out("y%d" % i, y) for i, y in enumerate(ys)]),
            {"x": x, "x64": x64}, ys)


@case
def nan_literals():
    f, d = np.float32, np.float64
    x = np.array([-2, -0.5, 0.5, 3], f)
    x64 = x.astype(d)
    ys = [x + np.float32(np.nan), np.pad(x, (1, 0), constant_values=np.nan),
          np.where(x > 0, x, np.nan).astype(f), np.maximum(x64, 0), np.clip(x64, -1e300, 1.5),
          np.clip(x64, -1e300, 1e300)]
    nodes = [const("nan", np.array(np.nan, f)), const("pads", np.array([1, 0], np.int64)),
             const("zero64", np.array(0, d)), const("lo", np.array(-1e300, d)), const("hi", np.array(1.5, d)),
             const("huge", np.array(1e300, d)),
             H.make_node("Add", ["x", "nan"], ["y0"]), H.make_node("Pad", ["x", "pads", "nan"], ["y1"]),
             H.make_node("LeakyRelu", ["x"], ["y2"], alpha=float("nan")),
             H.make_node("Clip", ["x64", "zero64"], ["y3"]),  # a float64 clamp(min=0): no max
             H.make_node("Clip", ["x64", "lo", "hi"], ["y4"]), H.make_node("Clip", ["x64", "lo", "huge"], ["y5"])]
    return (model(nodes, [out("x", x), out("x64", x64)], [out("y%d" % i, y) for i, y in enumerate(ys)]),
            {"x": x, "x64": x64}, ys)


@case
def clip64_no_bounds():
    x = np.array([-1e300, 2.5], np.float64)
    return model([H.make_node("Clip", ["x"], ["y"])], [out("x", x)], [out("y", x)]), {"x": x}, [x]


# --- H5: window attributes of the wrong length ------------------------------

def window_case(op, **attrs):
    inputs = [vi("x", T.FLOAT, [1, 1, 5, 5])]
    inits = []
    names = ["x"]
    if op.startswith("Conv"):
        inits.append(numpy_helper.from_array(np.ones((1, 1, 2, 2), np.float32), "w"))
        names.append("w")
    return model([H.make_node(op, names, ["y"], **attrs)], inputs, [vi("y", T.FLOAT, [1, 1, 3, 3])], inits)


@case
def window_pool_one_stride():
    return window_case("MaxPool", auto_pad="SAME_UPPER", kernel_shape=[2, 2], strides=[2]), None, None


@case
def window_conv_one_stride():
    return window_case("Conv", auto_pad="SAME_LOWER", kernel_shape=[2, 2], strides=[2]), None, None


@case
def window_transpose_one_kernel():
    return window_case("ConvTranspose", auto_pad="SAME_UPPER", kernel_shape=[2], dilations=[1]), None, None


@case
def window_pool_no_kernel():
    return window_case("AveragePool", auto_pad="SAME_UPPER", strides=[2, 2]), None, None


# --- H8: opsets outside the mapped range; declared outputs ------------------

@case
def opset6_add():
    m = model([H.make_node("Add", ["a", "b"], ["y"], broadcast=1, axis=0)],
              [vi("a", T.FLOAT, [3, 3]), vi("b", T.FLOAT, [3])], [vi("y", T.FLOAT, [3, 3])], opset=6)
    return m, None, None


@case
def opset1_concat():
    m = model([H.make_node("Concat", ["a", "b"], ["y"])], [vi("a", T.FLOAT, [2, 3]), vi("b", T.FLOAT, [2, 3])],
              [vi("y", T.FLOAT, [2, 6])], opset=1)
    return m, None, None


@case
def opset8_add_relu():
    # Add-7 and Relu-6 are the definitions opset 11 has too: mapped, numpy broadcasting.
    a, b = np.arange(9, dtype=np.float32).reshape(3, 3), np.array([-5, 200, 300], np.float32)
    nodes = [H.make_node("Add", ["a", "b"], ["s"]), H.make_node("Relu", ["s"], ["y"])]
    y = np.maximum(a + b, 0)
    return model(nodes, [out("a", a), out("b", b)], [out("y", y)], opset=8), {"a": a, "b": b}, [y]


@case
def opset18_relu():
    return model([H.make_node("Relu", ["a"], ["y"])], [vi("a", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])],
                 opset=18), None, None


@case
def declared_shape_differs():
    # The graph declares (5,) for a sum over (3, 2)'s last axis: (3,).
    return model([H.make_node("ReduceSum", ["a", "axes"], ["y"], keepdims=0)], [vi("a", T.FLOAT, [3, 2])],
                 [vi("y", T.FLOAT, [5])], [numpy_helper.from_array(np.array([1], np.int64), "axes")]), None, None


@case
def declared_dtype_differs():
    return model([H.make_node("Relu", ["a"], ["y"])], [vi("a", T.FLOAT, [2])], [vi("y", T.DOUBLE, [2])]), None, None


@case
def declared_dims_open():
    # Open dimensions declare nothing to compare.
    a = np.ones((2, 3), np.float32)
    return (model([H.make_node("Relu", ["a"], ["y"]), H.make_node("Neg", ["a"], ["z"])], [out("a", a)],
                  [vi("y", T.FLOAT, ["n", 3]), vi("z", T.FLOAT, [None, None])]), {"a": a}, [a, -a])


# --- M1: declared sizes are checked before allocating ------------------------

@case
def declared_size_bomb():
    t = onnx.TensorProto()
    t.name = "W"
    t.data_type = T.DOUBLE
    t.dims.extend([1 << 27])
    t.double_data.append(1.0)
    return model([H.make_node("Relu", ["W"], ["y"])], [], [vi("y", T.DOUBLE, [1 << 27])], [t]), None, None


# --- M2: ONNX strings never reach the Relay text unescaped -----------------

@case
def hostile_strings():
    x = np.array([1, 2], np.float32)
    m = model([H.make_node("Relu", ["w\nx"], ["y\r\"\\"], name="n\nd")], [vi("w\nx", T.FLOAT, [2])],
              [vi("y\r\"\\", T.FLOAT, [2])],
              producer_name="x\ndef @evil(%q: float32) { exp(%q) }\n//", producer_version="1\n2")
    return m, {"w_x": x}, [x]


@case
def nll_reduction_injected():
    m = model([H.make_node("NegativeLogLikelihoodLoss", ["p", "t"], ["y"],
                           reduction='mean", ignore_index=0); //')],
              [vi("p", T.FLOAT, [3, 2]), vi("t", T.INT64, [3])], [vi("y", T.FLOAT, [])])
    return m, None, None


# --- M4: a ceil_mode pool keeps gradc's (PyTorch's) extent downstream ------

@case
def ceil_pool_flatten():
    x = np.arange(25, dtype=np.float64).reshape(1, 1, 5, 5)
    w = np.arange(18, dtype=np.float64).reshape(2, 9) / 10
    nodes = [H.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1],
                         ceil_mode=1),
             H.make_node("Flatten", ["p"], ["f"]), H.make_node("Gemm", ["f", "w"], ["y"], transB=1)]
    # PyTorch: windows start at -1, 1, 3 (the one at 5 starts in the padding).
    pooled = np.array([[0, 2, 4], [10, 12, 14], [20, 22, 24]], np.float64).reshape(1, 9)
    return (model(nodes, [out("x", x)], [vi("y", T.DOUBLE, [1, 2])], [numpy_helper.from_array(w, "w")]),
            {"x": x}, [pooled @ w.T])


# --- issue 30 item 3: training BatchNormalization before opset 14 ----------

@case
def bn_training_opset13():
    r = np.random.default_rng(1)
    x = r.standard_normal((3, 2, 4, 4))
    scale, bias = np.array([0.5, 1.5]), np.array([0.1, -0.2])
    mean, var = np.array([0.3, -0.1]), np.array([1.2, 0.8])
    momentum, eps = 0.75, 0.25  # both exact in float32
    m, v = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    y = (x - m[:, None, None]) / np.sqrt(v[:, None, None] + eps) * scale[:, None, None] + bias[:, None, None]
    ys = [y, mean * momentum + m * (1 - momentum), var * momentum + v * (1 - momentum), m, v]
    names = ["y", "running_mean", "running_var", "saved_mean", "saved_var"]
    inits = [numpy_helper.from_array(a, n) for a, n in [(scale, "scale"), (bias, "bias"), (mean, "mean"), (var, "var")]]
    node = H.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], names, momentum=momentum,
                       epsilon=eps)
    return model([node], [out("x", x)], [out(n, a) for n, a in zip(names, ys)], inits), {"x": x}, ys


# --- M7: long names ----------------------------------------------------------

@case
def long_names():
    x = np.array([1, 2, 3], np.float32)
    a, b = "w" * 300, "v" * 10000
    inits = [numpy_helper.from_array(np.array([1, 1, 1], np.float32), a),
             numpy_helper.from_array(np.array([2, 2, 2], np.float32), b),
             numpy_helper.from_array(np.array([3, 3, 3], np.float32), a + "x")]
    nodes = [H.make_node("Add", ["x", a], ["s"]), H.make_node("Mul", ["s", b], ["t"]),
             H.make_node("Sub", ["t", a + "x"], ["y"])]
    return model(nodes, [out("x", x)], [out("y", x)], inits), {"x": x}, [(x + 1) * 2 - 3]


# --- issue 30 item 4: every unmapped operator, downstream ones too -----------

@case
def unmapped_downstream():
    m = model([H.make_node("Hardmax", ["x"], ["a"]), H.make_node("LpNormalization", ["a"], ["b"]),
               H.make_node("Relu", ["b"], ["c"]), H.make_node("Shrink", ["c"], ["y"])],
              [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])], opset=17)
    return m, None, None


@case
def unmapped_after_bad_initializer():
    t = numpy_helper.from_array(np.ones(3, np.float32), "W")
    t.raw_data = t.raw_data[:-4]
    m = model([H.make_node("Add", ["x", "W"], ["a"]), H.make_node("Hardmax", ["a"], ["y"])],
              [vi("x", T.FLOAT, [3])], [vi("y", T.FLOAT, [3])], [t])
    return m, None, None


# --- L4: attribute values outside their range --------------------------------

@case
def bad_attribute_values():
    nodes = [H.make_node("ReduceMax", ["a"], ["r"], axes=[1], keepdims=7),
             H.make_node("Flatten", ["b"], ["f"], axis=7),
             H.make_node("Split", ["c"], ["s0", "s1"], axis=-2),
             H.make_node("Cast", ["c"], ["k"], to=-1)]
    m = model(nodes, [vi("a", T.FLOAT, [3, 1, 2]), vi("b", T.FLOAT, [2, 3, 4, 5]), vi("c", T.FLOAT, [4])],
              [vi("r", T.FLOAT, [3, 2]), vi("f", T.FLOAT, [120, 1]), vi("s0", T.FLOAT, [2]), vi("s1", T.FLOAT, [2]),
               vi("k", T.FLOAT, [4])])
    return m, None, None


# --- L5: many names that sanitize alike ------------------------------------

@case
def many_alike_names():
    n = 8000
    x = np.zeros(1, np.float32)
    # Each CJK character is three bytes, each sanitized to '_': all "t______".
    names = ["x"] + ["t\u4e00" + chr(0x4e00 + i) for i in range(n)]
    nodes = [H.make_node("Relu", [names[i]], [names[i + 1]]) for i in range(n)]
    return model(nodes, [out("x", x)], [vi(names[-1], T.FLOAT, [1])]), {"x": x}, [x]


# --- L6: nesting deeper than protobuf's limit --------------------------------

@case
def nested_deep():
    leaf = H.make_graph([H.make_node("Identity", ["c"], ["o"])], "g", [], [vi("o", T.BOOL, [])])
    inner = leaf
    for _ in range(60):
        node = H.make_node("If", ["c"], ["o"], then_branch=inner, else_branch=leaf)
        inner = H.make_graph([node], "g", [], [vi("o", T.BOOL, [])])
    m = model(list(inner.node), [vi("c", T.BOOL, [])], [vi("o", T.BOOL, [])], opset=13)
    return m, None, None


# --- L7: external data, wherever it points ----------------------------------

def external(location):
    t = numpy_helper.from_array(np.ones(3, np.float32), "W")
    t.ClearField("raw_data")
    t.data_location = T.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", location
    return model([H.make_node("Add", ["x", "W"], ["y"])], [vi("x", T.FLOAT, [3])], [vi("y", T.FLOAT, [3])], [t])


@case
def external_missing():
    return external("nope.bin"), None, None


@case
def external_absolute():
    return external("/etc/passwd"), None, None


@case
def external_parent():
    return external("../../../../etc/passwd"), None, None


# --- L2: no follow-on error after a refused initializer ---------------------

@case
def bad_initializer_only():
    t = numpy_helper.from_array(np.ones(3, np.float32), "W")
    t.raw_data = t.raw_data[:-4]
    return model([H.make_node("Add", ["x", "W"], ["y"])], [vi("x", T.FLOAT, [3])], [vi("y", T.FLOAT, [3])],
                 [t]), None, None


# --- L3: a wrong --input-shape is explained by ONNX's inference ------------

@case
def dynamic_matmul():
    w = numpy_helper.from_array(np.ones((3, 2), np.float32), "W")
    return model([H.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", T.FLOAT, ["n", 3])], [vi("y", T.FLOAT, ["n", 2])],
                 [w]), None, None


def write(d, name):
    m, inputs, expected = CASES[name]()
    with open(os.path.join(d, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())
    if inputs is not None:
        os.makedirs(os.path.join(d, name + ".inputs"), exist_ok=True)
        for k, v in inputs.items():
            np.save(os.path.join(d, name + ".inputs", k + ".npy"), v)
    if expected is not None:
        os.makedirs(os.path.join(d, name + ".expected"), exist_ok=True)
        for i, v in enumerate(expected):
            np.save(os.path.join(d, name + ".expected", "output_%d.npy" % i), np.asarray(v))


def compare(d, name):
    exp_dir, got_dir = os.path.join(d, name + ".expected"), os.path.join(d, name + ".out")
    problems = []
    for f in sorted(os.listdir(exp_dir)):
        want = np.load(os.path.join(exp_dir, f))
        path = os.path.join(got_dir, f)
        if not os.path.exists(path):
            problems.append("%s missing" % f)
            continue
        got = np.load(path)
        if got.dtype != want.dtype or got.shape != want.shape:
            problems.append("%s: %s %s, expected %s %s" % (f, got.dtype, got.shape, want.dtype, want.shape))
        elif want.dtype.kind == "f":
            finite = np.isfinite(want)
            same_special = np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(
                got[np.isinf(want)], want[np.isinf(want)]) and not np.isinf(got[finite]).any()
            if not same_special or not np.allclose(got[finite], want[finite], rtol=1e-6, atol=0):
                problems.append("%s: %s, expected %s" % (f, got.ravel().tolist(), want.ravel().tolist()))
        elif not np.array_equal(got, want):
            problems.append("%s: %s, expected %s" % (f, got.ravel().tolist(), want.ravel().tolist()))
    print("%s: %s" % (name, "as expected" if not problems else "; ".join(problems)))


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        for n in sys.argv[3:]:
            compare(sys.argv[2], n)
    else:
        os.makedirs(sys.argv[1], exist_ok=True)
        for n in sys.argv[2:] or sorted(CASES):
            write(sys.argv[1], n)
