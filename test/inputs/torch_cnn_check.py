"""CNN operators against PyTorch in float64: for each case, the forward value and the
gradient of sum(out * r) (r a random cotangent) for every listed input, through
`gradc run --grad`, compared at relative 1e-6 (TVM's numeric-gradient matrix,
rechecked tighter, and more). Usage: torch_cnn_check.py GRADC WORKDIR [NAME...]"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from gradc_run import run_model  # noqa: E402

gradc, work = sys.argv[1], sys.argv[2]
only = set(sys.argv[3:])
os.makedirs(work, exist_ok=True)


def pad4(padding):
    """Relay's 1, 2 or 4 padding values as (top, left, bottom, right)."""
    if len(padding) == 1:
        return [padding[0]] * 4
    if len(padding) == 2:
        return [padding[0], padding[1], padding[0], padding[1]]
    return list(padding)


def conv(x, w, strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """Relay's padding (1, 2 or 4 values: top, left, bottom, right) through F.pad."""
    p = pad4(padding)
    x = F.pad(x, (p[1], p[3], p[0], p[2]))
    return F.conv2d(x, w, stride=strides, dilation=dilation, groups=groups)


def relay_list(v):
    return "[" + ", ".join(str(i) for i in v) + "]"


# (name, {param: shape}, wrt, relay expression of the output, torch function of the inputs, ties)
CASES = []


def conv_case(name, xs, ws, strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    body = "nn.conv2d(%%x, %%w, strides=%s, padding=%s, dilation=%s, groups=%d)" % (
        relay_list(strides), relay_list(padding), relay_list(dilation), groups)
    CASES.append((name, {"x": xs, "w": ws}, ["x", "w"], body,
                  lambda t: conv(t["x"], t["w"], strides, padding, dilation, groups), False))


# TVM's test_conv2d_grad matrix (tests/python/relay/test_op_grad_level2.py).
conv_case("tvm_conv_3x3", (3, 2, 10, 10), (3, 2, 3, 3))
conv_case("tvm_conv_1x2", (3, 2, 10, 10), (3, 2, 1, 2))
conv_case("tvm_conv_s22_p32", (3, 2, 10, 10), (3, 2, 3, 3), strides=(2, 2), padding=(3, 2))
conv_case("tvm_conv_s21_p22", (3, 2, 10, 10), (3, 2, 3, 3), strides=(2, 1), padding=(2, 2))
conv_case("tvm_conv_groups2", (3, 6, 10, 10), (4, 3, 3, 3), groups=2)
conv_case("tvm_conv_groups2_s22_p22", (3, 6, 10, 10), (4, 3, 3, 3), strides=(2, 2), padding=(2, 2), groups=2)
# Beyond it: dilation, asymmetric padding, depthwise (with a multiplier), and
# products large enough for several packed panels and K blocks.
conv_case("dilated_asym", (2, 3, 11, 9), (5, 3, 3, 2), strides=(1, 2), padding=(2, 0, 1, 3), dilation=(2, 3))
conv_case("depthwise", (2, 8, 9, 9), (8, 1, 3, 3), padding=(1, 1), groups=8)
conv_case("depthwise_x2_s2", (2, 4, 10, 10), (8, 1, 3, 3), strides=(2, 2), padding=(1, 1), groups=4)
conv_case("depthwise_rows_of_16", (2, 4, 10, 32), (8, 1, 3, 3), padding=(1, 1), groups=4)
conv_case("depthwise_dilated_s2", (2, 3, 11, 12), (3, 1, 3, 3), strides=(2, 2), padding=(2, 2), dilation=(2, 2),
          groups=3)
# strided products over chunks of images (with the host's L2, 2 images a chunk and 1 left over)
conv_case("strided_chunks", (3, 16, 40, 40), (8, 16, 3, 3), strides=(2, 2), padding=(1, 1))
conv_case("packed_panels", (2, 40, 14, 13), (36, 40, 3, 3), padding=(1, 1))
conv_case("pointwise", (4, 64, 7, 7), (48, 64, 1, 1))


def conv_t_case(name, xs, ws, strides=(1, 1), padding=(0, 0, 0, 0), output_padding=(0, 0), dilation=(1, 1),
                groups=1):
    body = ("nn.conv2d_transpose(%%x, %%w, strides=%s, padding=%s, output_padding=%s, dilation=%s, groups=%d)" %
            (relay_list(strides), relay_list(padding), relay_list(output_padding), relay_list(dilation), groups))

    def torch_fn(t):
        # The unpadded transposed convolution (every tap's contribution), zeros
        # past its end, then Relay's output window [top, top + OH) x [left, left + OW).
        y = F.conv_transpose2d(t["x"], t["w"], stride=strides, dilation=dilation, groups=groups)
        H, W = xs[2], xs[3]
        oh = (H - 1) * strides[0] - padding[0] - padding[2] + dilation[0] * (ws[2] - 1) + output_padding[0] + 1
        ow = (W - 1) * strides[1] - padding[1] - padding[3] + dilation[1] * (ws[3] - 1) + output_padding[1] + 1
        y = F.pad(y, (0, max(0, padding[1] + ow - y.shape[3]), 0, max(0, padding[0] + oh - y.shape[2])))
        return y[:, :, padding[0]:padding[0] + oh, padding[1]:padding[1] + ow]

    CASES.append((name, {"x": xs, "w": ws}, ["x", "w"], body, torch_fn, False))


conv_t_case("transpose_s2", (2, 4, 5, 5), (4, 3, 3, 3), strides=(2, 2), padding=(1, 1, 1, 1), output_padding=(1, 1))
conv_t_case("transpose_groups", (2, 6, 4, 5), (6, 2, 3, 2), strides=(2, 3), groups=3)
conv_t_case("transpose_dilated", (1, 3, 6, 4), (3, 5, 2, 3), dilation=(2, 2), padding=(1, 1, 1, 1))



def pool_case(name, kind, xs, pool, strides=(1, 1), padding=(0, 0), ceil_mode=False, count_include_pad=False,
              ties=False, dilation=(1, 1)):
    attrs = "pool_size=%s, strides=%s, padding=%s, dilation=%s, ceil_mode=%s" % (
        relay_list(pool), relay_list(strides), relay_list(padding), relay_list(dilation), ceil_mode)
    if kind == "avg":
        attrs += ", count_include_pad=%s" % count_include_pad
    body = "nn.%s_pool2d(%%x, %s)" % (kind, attrs)
    p = pad4(padding)
    own = p[0] == p[2] and p[1] == p[3] and 2 * p[0] <= pool[0] and 2 * p[1] <= pool[1]

    def torch_fn(t):
        x = t["x"]
        if own:  # PyTorch's own padding: its ceil_mode and divisor rules exactly
            if kind == "max":
                return F.max_pool2d(x, pool, strides, (p[0], p[1]), dilation, ceil_mode=ceil_mode)
            return F.avg_pool2d(x, pool, strides, (p[0], p[1]), ceil_mode=ceil_mode,
                                count_include_pad=count_include_pad)
        assert not ceil_mode  # explicit padding: the floor-mode windows are the same
        if kind == "max":
            return F.max_pool2d(F.pad(x, (p[1], p[3], p[0], p[2]), value=-math.inf), pool, strides, 0, dilation)
        total = F.avg_pool2d(F.pad(x, (p[1], p[3], p[0], p[2])), pool, strides) * (pool[0] * pool[1])
        if count_include_pad:
            return total / (pool[0] * pool[1])
        ones = F.pad(torch.ones_like(x), (p[1], p[3], p[0], p[2]))
        return total / (F.avg_pool2d(ones, pool, strides) * (pool[0] * pool[1]))

    CASES.append((name, {"x": xs}, ["x"], body, torch_fn, ties))


# TVM's test_max_pool2d_grad / test_avg_pool2d_grad matrix.
for kind in ("max", "avg"):
    pool_case("tvm_%s_3x3" % kind, kind, (3, 2, 10, 10), (3, 3))
    pool_case("tvm_%s_3x3_s2_p12" % kind, kind, (3, 2, 10, 10), (3, 3), (2, 2), (1, 2), count_include_pad=True)
    pool_case("tvm_%s_5x5_s2_p21_ceil" % kind, kind, (3, 2, 10, 10), (5, 5), (2, 2), (2, 1), ceil_mode=True)
pool_case("avg_exclude_pad_ceil", "avg", (2, 3, 9, 8), (3, 2), (2, 2), (1, 1), ceil_mode=True)
pool_case("avg_asym_exclude_pad", "avg", (2, 3, 9, 8), (3, 3), (2, 1), (0, 2, 1, 1))
pool_case("max_ties_first", "max", (2, 3, 8, 8), (3, 3), (1, 1), (1, 1), ties=True)
pool_case("max_2x2_s2_ties", "max", (2, 3, 8, 7), (2, 2), (2, 2), ties=True)  # disjoint windows
pool_case("max_2x2_s3_pad_ceil", "max", (2, 3, 9, 10), (2, 2), (3, 3), (1, 1), ceil_mode=True, ties=True)
pool_case("max_dilated_ceil", "max", (1, 2, 11, 10), (2, 3), (2, 2), (1, 1), ceil_mode=True, dilation=(2, 2))
# ceil_mode with a window longer than the padded data: one output row (as PyTorch; regression: it was refused)
pool_case("regress_avg_window_over_data_ceil", "avg", (1, 3, 2, 7), (3, 1), (3, 1), ceil_mode=True)
pool_case("regress_avg_window_over_data_ceil_pad", "avg", (1, 2, 2, 5), (4, 2), (3, 2), (1, 1), ceil_mode=True,
          count_include_pad=True)
pool_case("regress_max_window_over_data_ceil", "max", (2, 2, 3, 4), (5, 2), (4, 2), (1, 0), ceil_mode=True)
CASES.append(("global_avg", {"x": (2, 5, 6, 7)}, ["x"], "nn.global_avg_pool2d(%x)",
              lambda t: F.adaptive_avg_pool2d(t["x"], 1), False))
CASES.append(("global_max_ties", {"x": (2, 5, 6, 7)}, ["x"], "nn.global_max_pool2d(%x)",
              lambda t: F.adaptive_max_pool2d(t["x"], 1), True))
CASES.append(("adaptive_avg_uneven", {"x": (2, 3, 10, 7)}, ["x"], "nn.adaptive_avg_pool2d(%x, output_size=[4, 3])",
              lambda t: F.adaptive_avg_pool2d(t["x"], (4, 3)), False))
CASES.append(("adaptive_avg_upsample", {"x": (1, 2, 3, 5)}, ["x"], "nn.adaptive_avg_pool2d(%x, output_size=[7, 5])",
              lambda t: F.adaptive_avg_pool2d(t["x"], (7, 5)), False))


# Batch norm: inference (given statistics, every input differentiated) and
# training (the batch's own statistics through mean and variance).
def bn_formula(t):
    """F.batch_norm with running statistics, written out: PyTorch does not differentiate those."""
    c = lambda v: v[:, None, None]  # noqa: E731
    y = F.batch_norm(t["x"].detach(), t["m"].detach(), t["v"].detach(), t["g"].detach(), t["b"].detach(), eps=1e-3)
    z = (t["x"] - c(t["m"])) / torch.sqrt(c(t["v"]) + 1e-3) * c(t["g"]) + c(t["b"])
    np.testing.assert_allclose(y.numpy(), z.detach().numpy(), rtol=1e-12)
    return z


CASES.append(("batch_norm_inference", {"x": (4, 3, 5, 6), "g": (3,), "b": (3,), "m": (3,), "v": (3,)},
              ["x", "g", "b", "m", "v"], "nn.batch_norm(%x, %g, %b, %m, %v, epsilon=0.001f).0",
              bn_formula, False))
CASES.append(("batch_norm_training", {"x": (4, 3, 5, 6), "g": (3,), "b": (3,)}, ["x", "g", "b"],
              "nn.batch_norm(%x, %g, %b, mean(%x, axis=[0, 2, 3]), variance(%x, axis=[0, 2, 3])).0",
              lambda t: F.batch_norm(t["x"], None, None, t["g"], t["b"], training=True), False))
CASES.append(("variance_unbiased", {"x": (3, 4, 5)}, ["x"], "variance(%x, axis=[1], keepdims=True, unbiased=True)",
              lambda t: t["x"].var(dim=1, keepdim=True, unbiased=True), False))
CASES.append(("pad_constant", {"x": (2, 3, 4, 5)}, ["x"],
              "nn.pad(%x, pad_width=[[0, 0], [1, 0], [2, 1], [0, 3]], pad_value=0.5f)",
              lambda t: F.pad(t["x"], (0, 3, 2, 1, 1, 0), value=0.5), False))
CASES.append(("leaky_relu", {"x": (3, 7)}, ["x"], "nn.leaky_relu(%x, alpha=0.1f)",
              lambda t: F.leaky_relu(t["x"], 0.1), False))
CASES.append(("prelu", {"x": (2, 4, 3, 3), "a": (4,)}, ["x", "a"], "nn.prelu(%x, %a)",
              lambda t: F.prelu(t["x"], t["a"]), False))
CASES.append(("dropout_inference", {"x": (3, 4)}, ["x"], "nn.dropout(%x, rate=0.25f).0", lambda t: t["x"], False))
# A ResNet basic block in training mode: conv-bn-relu-conv-bn, the skip, relu.
RESNET = """%c1 = nn.conv2d(%x, %w1, padding=[1, 1]);
  %n1 = nn.batch_norm(%c1, %g1, %b1, mean(%c1, axis=[0, 2, 3]), variance(%c1, axis=[0, 2, 3]));
  %r1 = nn.relu(%n1.0);
  %c2 = nn.conv2d(%r1, %w2, padding=[1, 1]);
  %n2 = nn.batch_norm(%c2, %g2, %b2, mean(%c2, axis=[0, 2, 3]), variance(%c2, axis=[0, 2, 3]));
  nn.relu(add(%n2.0, %x))"""


def resnet_block(t):
    y = F.relu(F.batch_norm(F.conv2d(t["x"], t["w1"], padding=1), None, None, t["g1"], t["b1"], training=True))
    y = F.batch_norm(F.conv2d(y, t["w2"], padding=1), None, None, t["g2"], t["b2"], training=True)
    return F.relu(y + t["x"])


CASES.append(("resnet_basic_block", {"x": (4, 8, 6, 6), "w1": (8, 8, 3, 3), "g1": (8,), "b1": (8,),
                                     "w2": (8, 8, 3, 3), "g2": (8,), "b2": (8,)},
              ["x", "w1", "g1", "b1", "w2", "g2", "b2"], RESNET, resnet_block, False))

results = []
rng = np.random.default_rng(7)
for name, shapes, wrt, body, torch_fn, ties in CASES:
    if only and name not in only:
        continue
    # ties: small integers, so windows hold equal maxima (the first one takes the gradient)
    inputs = {k: (rng.integers(-2, 3, s).astype(np.float64) if ties else rng.standard_normal(s))
              for k, s in shapes.items()}
    if "v" in inputs:  # a variance
        inputs["v"] = np.abs(inputs["v"]) + 0.5
    tensors = {k: torch.tensor(v, requires_grad=k in wrt) for k, v in inputs.items()}
    expected = torch_fn(tensors)
    r = rng.standard_normal(tuple(expected.shape))
    (expected * torch.tensor(r)).sum().backward()
    params = ", ".join("%%%s: Tensor[(%s), float64]" % (k, ", ".join(map(str, s))) for k, s in shapes.items())
    params += ", %%r: Tensor[(%s), float64]" % ", ".join(map(str, r.shape))
    out = run_model(gradc, work, name + "_fwd", params, body, dict(inputs, r=r))
    np.testing.assert_allclose(out[0], expected.detach().numpy(), rtol=1e-6, atol=1e-9, err_msg=name + " forward")
    *bindings, result = body.split("\n")  # a body may bind values before its result
    grad_body = "\n".join(bindings + ["  sum(multiply(%s, %%r))" % result.strip()])
    grads = run_model(gradc, work, name + "_grad", params, grad_body, dict(inputs, r=r),
                      flags=["--grad", "--wrt=" + ",".join("%" + k for k in wrt)])
    for k, g in zip(wrt, grads[1:]):
        np.testing.assert_allclose(g, tensors[k].grad.numpy(), rtol=1e-6, atol=1e-9, err_msg=name + " d" + k)
    print("%s: forward and gradients match PyTorch" % name)
