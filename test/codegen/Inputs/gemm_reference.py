"""The CPU matrix products (op/Gemm.h: packed panels, register tiles, K blocks)
against numpy in float64, for every layout the gradients use and for shapes
that do not divide the tiles. Usage: gemm_reference.py GRADC WORKDIR [gradc
compile flags...]; prints one line per case."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs"))
from gradc_run import run_model  # noqa: E402

gradc, work, flags = sys.argv[1], sys.argv[2], sys.argv[3:]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(11)
DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int32": np.int32}


def run(name, params, body, inputs):
    return run_model(gradc, work, name, params, body, inputs, flags)[0]


def operand(shape, dtype):
    if dtype == "int32":
        return rng.integers(-5, 6, shape).astype(np.int32)
    return rng.uniform(-1, 1, shape).astype(DTYPES[dtype])


def check(name, got, want, dtype, k):
    want = np.asarray(want, dtype=np.float64)
    if dtype == "int32":
        ok, detail = np.array_equal(got, want), "exact"
    else:
        # k products of values in [-1, 1): each step rounds once (fused) or twice.
        eps = {"float32": 2.0 ** -24, "float64": 2.0 ** -53, "float16": 2.0 ** -11}[dtype]
        bound = (2 * k + 2) * eps * max(1.0, np.abs(want).max()) + (eps if dtype == "float16" else 0)
        err = float(np.abs(got.astype(np.float64) - want).max()) if want.size else 0.0
        ok, detail = err <= bound, "max error %.3g (bound %.3g)" % (err, bound)
    print("%s %s: %s" % ("PASS" if ok and got.shape == want.shape else "FAIL", name, detail))


def t(shape):
    return "Tensor[(%s), %%s]" % ", ".join(map(str, shape))


# (M, N, K): tiles and panels that divide, ragged edges on every side, one row,
# one column, K past several L1 blocks with a remainder, an empty sum, and row
# tiles split into groups (for the L2 and for the cores) with a last group, a
# partial tile and a partial panel, or a single partial panel, and a short K
# whose jobs are whole groups against every panel (row jobs); and dyT·b with
# 8 or more panels, whose rows (read across) are packed a chunk of tiles at a
# time, with chunks, tiles and panels left over, over two K blocks on AVX2;
# and a product whose last panel would be nearly empty (98 columns: 2 of 32),
# which runs transposed (codegen/gemm_orientation.relay).
shapes = [(64, 256, 784), (37, 29, 301), (1, 47, 50), (45, 1, 33), (13, 70, 1000), (100, 17, 5), (6, 5, 0),
          (301, 40, 1000), (301, 9, 1000), (301, 40, 20), (301, 260, 1000), (128, 98, 930)]
for m, n, k in shapes:
    for dtype in ("float32", "float64"):
        x, w = operand((m, k), dtype), operand((n, k), dtype)
        got = run("dense_%d_%d_%d_%s" % (m, n, k, dtype), "%%x: %s, %%w: %s" % (t((m, k)) % dtype, t((n, k)) % dtype),
                  "nn.dense(%x, %w)", {"x": x, "w": w})
        check("dense x·wT %dx%dx%d %s" % (m, n, k, dtype), got, x.astype(np.float64) @ w.astype(np.float64).T, dtype, k)
    a, b = operand((m, k), "float32"), operand((k, n), "float32")
    got = run("matmul_%d_%d_%d" % (m, n, k), "%%a: %s, %%b: %s" % (t((m, k)) % "float32", t((k, n)) % "float32"),
              "matmul(%a, %b)", {"a": a, "b": b})
    check("matmul a·b %dx%dx%d float32" % (m, n, k), got, a.astype(np.float64) @ b.astype(np.float64), "float32", k)
    dy = operand((k, m), "float32")
    got = run("tn_%d_%d_%d" % (m, n, k), "%%dy: %s, %%b: %s" % (t((k, m)) % "float32", t((k, n)) % "float32"),
              "matmul(transpose(%dy), %b)", {"dy": dy, "b": b})
    check("matmul dyT·b %dx%dx%d float32" % (m, n, k), got, dy.astype(np.float64).T @ b.astype(np.float64), "float32", k)

# float16 accumulates in float32 over all of K (one block); integers exactly.
x, w = operand((20, 600), "float16"), operand((40, 600), "float16")
got = run("dense_f16", "%%x: %s, %%w: %s" % (t((20, 600)) % "float16", t((40, 600)) % "float16"), "nn.dense(%x, %w)",
          {"x": x, "w": w})
check("dense x·wT 20x40x600 float16", got, x.astype(np.float64) @ w.astype(np.float64).T, "float16", 1)
# float16 over many K blocks: partial sums kept in float32 scratch, never
# rounded to float16 between blocks; K = 2^20 (the register tile's packed
# panel stays a few KiB on the thread's stack however long K is).
for m, n, k in ((5, 37, 5000), (1, 3, 1 << 20)):
    scale = 1.0 if k < 10000 else 1.0 / 32  # sums well inside float16's range
    x, w = (rng.uniform(0, scale, s).astype(np.float16) for s in ((m, k), (n, k)))
    got = run("dense_f16_%d" % k, "%%x: %s, %%w: %s" % (t((m, k)) % "float16", t((n, k)) % "float16"),
              "nn.dense(%x, %w)", {"x": x, "w": w})
    want = x.astype(np.float64) @ w.astype(np.float64).T
    # Accumulated in float32: within float32's error bound, then one float16 rounding.
    err = float(np.abs(got.astype(np.float64) - want).max())
    bound = float(np.abs(want).max()) * (2.0 ** -11 + (2 * k + 2) * 2.0 ** -24)
    print("%s dense x·wT %dx%dx%d float16 over K blocks: max error %.3g (bound %.3g)" % (
        "PASS" if err <= bound else "FAIL", m, n, k, err, bound))
a, b = operand((9, 300), "int32"), operand((300, 11), "int32")
got = run("matmul_i32", "%%a: %s, %%b: %s" % (t((9, 300)) % "int32", t((300, 11)) % "int32"), "matmul(%a, %b)",
          {"a": a, "b": b})
check("matmul 9x11x300 int32", got, a.astype(np.int64) @ b.astype(np.int64), "int32", 300)

# A batched product with broadcast batch axes: the panels are shared scratch,
# so the batch runs in order.
a, b = operand((3, 1, 20, 70), "float32"), operand((4, 70, 33), "float32")
got = run("batched", "%%a: %s, %%b: %s" % (t((3, 1, 20, 70)) % "float32", t((4, 70, 33)) % "float32"),
          "matmul(%a, %b)", {"a": a, "b": b})
check("batched matmul (3,1,20,70)·(4,70,33) float32", got, np.matmul(a.astype(np.float64), b.astype(np.float64)),
      "float32", 70)

# Fused epilogues (transform/Fuse.h): bias and relu stored by the product's
# kernel, K blocked, partial sums kept in the output; a cast to float16 keeps
# its partial sums in scratch; relu's gradient folded into dy·w.
x, w, bias = operand((37, 1000), "float32"), operand((29, 1000), "float32"), operand((29,), "float32")
got = run("dense_bias_relu", "%%x: %s, %%w: %s, %%b: %s" % (t((37, 1000)) % "float32", t((29, 1000)) % "float32",
                                                          t((29,)) % "float32"),
          "nn.relu(nn.bias_add(nn.dense(%x, %w), %b))", {"x": x, "w": w, "b": bias})
check("relu(bias_add(dense)) 37x29x1000 float32", got,
      np.maximum(x.astype(np.float64) @ w.astype(np.float64).T + bias, 0), "float32", 1000)
got = run("dense_cast16", "%%x: %s, %%w: %s" % (t((37, 1000)) % "float32", t((29, 1000)) % "float32"),
          "cast(nn.dense(%x, %w), dtype=\"float16\")", {"x": x, "w": w})
check("cast(dense, float16) 37x29x1000", got, (x.astype(np.float64) @ w.astype(np.float64).T), "float16", 1)
# A small batch against a wider weight is computed transposed (the weight's
# rows are the tile rows): the stores and the epilogue's reads of %y run
# along the output's rows, a tile column at a time.
for m, n in ((16, 96), (13, 29)):
    x, w, y = operand((m, 64), "float32"), operand((n, 64), "float32"), operand((m, n), "float32")
    got = run("dense_add_%d" % m, "%%x: %s, %%w: %s, %%y: %s" % (t((m, 64)) % "float32", t((n, 64)) % "float32",
                                                               t((m, n)) % "float32"),
              "nn.dense(%x, %w) + %y", {"x": x, "w": w, "y": y})
    check("dense(x, w) + y %dx%dx64 float32" % (m, n), got, x.astype(np.float64) @ w.astype(np.float64).T + y,
          "float32", 64)
dy, wt, h = operand((64, 10), "float32"), operand((10, 256), "float32"), operand((64, 256), "float32")
got = run("relu_grad", "%%dy: %s, %%w: %s, %%h: %s" % (t((64, 10)) % "float32", t((10, 256)) % "float32",
                                                     t((64, 256)) % "float32"),
          "where(greater(%h, 0f), matmul(%dy, %w), 0f)", {"dy": dy, "w": wt, "h": h})
check("where(h > 0, dy·w, 0) 64x256x10 float32", got,
      np.where(h > 0, dy.astype(np.float64) @ wt.astype(np.float64), 0), "float32", 10)
