#!/usr/bin/env python3
"""tf32_check.py GRADC: the tensor-core products of --gpu-math=tf32, checked without a GPU.

Each program below is one float32 product (nn.dense, matmul in both layouts and both tile
sizes, batch_matmul with an odd depth, a convolution as implicit GEMM) run with
`gradc run --target=cuda --simulate --gpu-math=tf32` (the warps' m16n8k8 products simulated
lane by lane, operands rounded to TensorFloat-32 as cvt.rna does) and compared with:
  * the CPU target run on the same inputs rounded to tf32 beforehand: a product of tf32 values
    accumulated in float32, so the two may differ by float32 rounding only (1e-5 of the
    output's scale); a wrong fragment layout is off by the output's scale;
  * the CPU target on the inputs as they are: the simulation must differ from it (tf32 was
    applied) by no more than tf32's bound, 2^-10 of the sum of |a||b| per output;
a float16 product, which tf32 leaves alone, must equal its exact simulation; and the gradient of
a dense layer (its backward products on tensor cores too) must stay within tf32's bound of the
float64 twin. Prints one line per case and `N passed, M failed`; exits 1 on a failure.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

CASES = [
    # name, parameters (name, shape, dtype), body, products' depth K (for the bound)
    ("dense", [("x", (200, 136)), ("w", (260, 136))], "nn.dense(%x, %w)", 136),
    ("matmul", [("a", (200, 136)), ("b", (136, 260))], "matmul(%a, %b)", 136),
    ("matmul small tile", [("a", (40, 52)), ("b", (52, 70))], "matmul(%a, %b)", 52),
    ("matmul transposed A", [("a", (96, 150))], "matmul(transpose(%a), %a)", 96),
    ("batch_matmul odd depth", [("a", (3, 70, 33)), ("b", (3, 90, 33))], "nn.batch_matmul(%a, %b)", 33),
    ("conv2d", [("x", (2, 8, 12, 12)), ("w", (48, 8, 3, 3))], "nn.conv2d(%x, %w, padding=[1, 1, 1, 1])", 72),
]


def tf32(x):
    """float32 rounded to TensorFloat-32: to nearest, ties away from zero (cvt.rna)."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    finite = (bits & 0x7F800000) != 0x7F800000
    rounded = np.where(finite, (bits + 0x1000) & 0xFFFFE000, bits).astype(np.uint32)
    return rounded.view(np.float32)


def program(params, body, dtype="float32"):
    ps = ", ".join("%%%s: Tensor[(%s), %s]" % (n, ", ".join(map(str, s)), dtype) for n, s in params)
    return '#[version = "0.0.5"]\ndef @main(%s) { %s }\n' % (ps, body)


def run(gradc, d, name, text, inputs, *flags):
    path = os.path.join(d, name + ".relay")
    with open(path, "w") as f:
        f.write(text)
    args = []
    for k, (n, v) in enumerate(inputs.items()):
        p = os.path.join(d, "%s_%d.npy" % (name, k))
        np.save(p, v)
        args += ["--input", "%s=%s" % (n, p)]
    out = os.path.join(d, name + "_" + "_".join(f.strip("-").replace("=", "") for f in flags))
    proc = subprocess.run([gradc, "run", path, *flags, *args, "--output-dir", out], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError("gradc %s: %s" % (" ".join(flags), proc.stderr.strip()[-400:]))
    outputs = []
    while os.path.exists(os.path.join(out, "output_%d.npy" % len(outputs))):
        outputs.append(np.load(os.path.join(out, "output_%d.npy" % len(outputs))).astype(np.float64))
    return outputs


def check_forward(gradc, d, rng, name, params, body, depth):
    inputs = {n: rng.uniform(-1, 1, s).astype(np.float32) for n, s in params}
    text = program(params, body)
    key = name.replace(" ", "_")
    (sim,) = run(gradc, d, key, text, inputs, "--target=cuda", "--simulate", "--gpu-math=tf32")
    (emulated,) = run(gradc, d, key, text, {n: tf32(v) for n, v in inputs.items()})
    (exact,) = run(gradc, d, key, text, inputs)
    scale = max(1.0, float(np.max(np.abs(exact))))
    err = float(np.max(np.abs(sim - emulated)))
    if err > 1e-5 * scale:
        return "off the tf32-emulated product by %.3g (scale %.3g)" % (err, scale)
    off = float(np.max(np.abs(sim - exact)))
    bound = 2.0 ** -10 * depth  # |a|, |b| <= 1: the sum of |a||b| is at most the depth
    if not 0 < off <= bound:
        return "off the exact product by %.3g (tf32 applied: more than 0, at most %.3g)" % (off, bound)
    return None


def check_float16(gradc, d, rng):
    params = [("a", (64, 40)), ("b", (40, 96))]
    inputs = {n: rng.uniform(-1, 1, s).astype(np.float16) for n, s in params}
    text = program(params, "matmul(%a, %b)", "float16")
    (tf,) = run(gradc, d, "f16", text, inputs, "--target=cuda", "--simulate", "--gpu-math=tf32")
    (ex,) = run(gradc, d, "f16", text, inputs, "--target=cuda", "--simulate")
    return None if np.array_equal(tf, ex) else "a float16 product changed under tf32"


def check_gradient(gradc, d, rng):
    params = [("x", (64, 48)), ("w", (96, 48))]
    inputs = {n: rng.uniform(-1, 1, s).astype(np.float32) for n, s in params}
    body = "sum(multiply(nn.dense(%x, %w), nn.dense(%x, %w)))"
    got = run(gradc, d, "grad", program(params, body), inputs, "--grad", "--target=cuda", "--simulate",
              "--gpu-math=tf32")
    truth = run(gradc, d, "grad64", program(params, body, "float64"),
                {n: v.astype(np.float64) for n, v in inputs.items()}, "--grad")
    for g, t in zip(got, truth):
        scale = max(1.0, float(np.max(np.abs(t))))
        err = float(np.max(np.abs(g - t)))
        if err > 1e-2 * scale:
            return "gradient off float64 by %.3g (scale %.3g)" % (err, scale)
    return None


def main():
    gradc = sys.argv[1]
    rng = np.random.default_rng(20261129)
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="gradc-tf32-") as d:
        checks = [(name, lambda c=c: check_forward(gradc, d, rng, *c)) for c in CASES for name in [c[0]]]
        checks += [("float16 untouched", lambda: check_float16(gradc, d, rng)),
                   ("dense gradient", lambda: check_gradient(gradc, d, rng))]
        for name, check in checks:
            try:
                why = check()
            except RuntimeError as e:
                why = str(e)
            if why:
                failed += 1
                print("FAIL %s: %s" % (name, why))
            else:
                passed += 1
                print("PASS %s" % name)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
