"""Checks gradc's training-mode dropout (nn.dropout_mask): writes the models and
inputs (`make DIR`), then checks what `gradc run` wrote (`check DIR`):

* stats: a 2^20-element mask of rate 0.3 drops 0.3 of its elements (within 6
  standard deviations), two streams of one seed agree as independent masks
  do, and neighbouring elements are uncorrelated;
* grad: y = where(mask, x / (1 - p), 0) and loss = sum(y * y): the forward
  output is x scaled where the mask keeps it, and d loss / dx is
  2 y / (1 - p) where it keeps it, 0 elsewhere (the gradient with the mask
  fixed, against its closed form);
* onnx: ONNX Dropout(ratio 0.25, training_mode) imports, its mask output is
  bool, and y is x / 0.75 where the mask is true, 0 elsewhere.

Bitwise equality across thread counts, remat modes and seeds is checked by
the .test with cmp.
"""
import os
import sys

import numpy as np

SHAPE = (64, 257)


def make(d):
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(5)
    np.save(os.path.join(d, "x.npy"), rng.uniform(-2, 2, SHAPE).astype(np.float32))
    np.save(os.path.join(d, "seed.npy"), np.array(0x5DEECE66D, dtype=np.int64))
    np.save(os.path.join(d, "seed2.npy"), np.array(-7, dtype=np.int64))
    from onnx import TensorProto as T, helper as H
    node = H.make_node("Dropout", ["x", "ratio", "training"], ["y", "mask"])
    g = H.make_graph([node], "drop", [H.make_tensor_value_info("x", T.FLOAT, list(SHAPE))],
                     [H.make_tensor_value_info("y", T.FLOAT, list(SHAPE)),
                      H.make_tensor_value_info("mask", T.BOOL, list(SHAPE))],
                     [H.make_tensor("ratio", T.FLOAT, [], [0.25]), H.make_tensor("training", T.BOOL, [], [True])])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 15)])
    with open(os.path.join(d, "dropout.onnx"), "wb") as f:
        f.write(m.SerializeToString())


def check_stats(d):
    a = np.load(os.path.join(d, "stats", "output_0.npy"))
    b = np.load(os.path.join(d, "stats", "output_1.npy"))
    n, p = a.size, 0.3
    sigma = (p * (1 - p) / n) ** 0.5
    dropped = 1 - a.mean()
    agree = (a == b).mean()  # independent masks agree with probability p^2 + (1-p)^2
    want = p * p + (1 - p) ** 2
    x = a.astype(np.float64) - a.mean()
    corr = float((x[1:] * x[:-1]).mean() / x.var())
    ok = abs(dropped - p) < 6 * sigma and abs(agree - want) < 6 * (want * (1 - want) / n) ** 0.5 and abs(corr) < 6 / n ** 0.5
    print("stats: %s (dropped %.5f of %d, want 0.3 +- %.5f; streams agree %.5f, want %.5f; lag-1 correlation %.5f)"
          % ("PASS" if ok else "FAIL", dropped, n, 6 * sigma, agree, want, corr))
    return ok


def check_grad(d):
    x = np.load(os.path.join(d, "x.npy")).astype(np.float64)
    fwd = os.path.join(d, "fwd")
    loss, mask = np.load(os.path.join(fwd, "output_0.npy")), np.load(os.path.join(fwd, "output_1.npy"))
    grad_loss, dx = (np.load(os.path.join(d, "grad", "output_%d.npy" % i)) for i in range(2))
    scale = np.float32(1 / (1 - 0.25))
    y = np.where(mask, (x.astype(np.float32) * scale).astype(np.float64), 0)
    want_dx = np.where(mask, 2 * y * np.float64(scale), 0)
    ok = mask.dtype == np.bool_ and 0.2 < 1 - mask.mean() < 0.3
    ok = ok and abs(float(loss) - float((y * y).sum())) <= 1e-4 * float((y * y).sum())
    ok = ok and float(grad_loss) == float(loss)
    ok = ok and np.allclose(dx, want_dx, rtol=1e-5, atol=1e-6) and not np.any(dx[~mask])
    print("grad: %s (dropped %.3f; loss %.6g; max |dx - closed form| %.3g)" % (
        "PASS" if ok else "FAIL", 1 - mask.mean(), float(loss), float(np.max(np.abs(dx - want_dx)))))
    return ok


def check_onnx(d):
    x = np.load(os.path.join(d, "x.npy"))
    y, mask = (np.load(os.path.join(d, "onnx", "output_%d.npy" % i)) for i in range(2))
    ok = mask.dtype == np.bool_ and 0.2 < 1 - mask.mean() < 0.3
    ok = ok and np.array_equal(y, np.where(mask, x * np.float32(1 / 0.75), np.float32(0)))
    print("onnx: %s (dropped %.3f)" % ("PASS" if ok else "FAIL", 1 - mask.mean()))
    return ok


if __name__ == "__main__":
    what, d = sys.argv[1], sys.argv[2]
    if what == "make":
        make(d)
    else:
        sys.exit(0 if {"stats": check_stats, "grad": check_grad, "onnx": check_onnx}[what](d) else 1)
