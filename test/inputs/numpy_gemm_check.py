"""nn.dense and matmul at shapes that exercise full register tiles, partial
tiles and the k tail, in float32 and float64, through `gradc run` against
numpy. Usage: numpy_gemm_check.py GRADC WORKDIR"""
import os
import subprocess
import sys

import numpy as np

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(7)
cases = [  # (op, a shape, b shape)
    ("nn.dense", (64, 784), (256, 784)),
    ("nn.dense", (9, 37), (13, 37)),
    ("nn.dense", (2, 3, 21), (5, 21)),
    ("nn.dense", (1, 1), (1, 1)),
    ("matmul", (256, 64), (64, 784)),
    ("matmul", (7, 19), (19, 70)),
    ("matmul", (3, 5, 17), (17, 33)),
    ("matmul", (2, 1, 6, 9), (3, 9, 4)),
    ("matmul", (19,), (19, 70)),
    ("matmul", (3, 5, 17), (17,)),
    ("matmul", (33,), (33,)),
    ("matmul", (6,), (2, 6, 5)),
]
tolerance = {"float32": 2e-5, "float64": 1e-12}
for dtype, rtol in tolerance.items():
    for i, (op, sa, sb) in enumerate(cases):
        a = rng.standard_normal(sa).astype(dtype)
        b = rng.standard_normal(sb).astype(dtype)
        expect = np.asarray(a @ (b.T if op == "nn.dense" else b))
        name = f"{dtype}_{i}"
        np.save(os.path.join(work, name + "_a.npy"), a)
        np.save(os.path.join(work, name + "_b.npy"), b)
        model = os.path.join(work, name + ".relay")
        ta, tb = f"Tensor[{tuple(sa)}, {dtype}]", f"Tensor[{tuple(sb)}, {dtype}]"
        with open(model, "w") as f:
            f.write(f'#[version = "0.0.5"]\ndef @main(%a: {ta}, %b: {tb}) {{\n  {op}(%a, %b)\n}}\n')
        out = os.path.join(work, name)
        subprocess.run([gradc, "run", model, "--output-dir", out, f"--input=a={out}_a.npy",
                        f"--input=b={out}_b.npy"], check=True)
        got = np.load(os.path.join(out, "output_0.npy"))
        assert got.shape == expect.shape, (name, got.shape, expect.shape)
        scale = np.abs(a).max() * np.abs(b).max() * sa[-1]
        np.testing.assert_allclose(got, expect, rtol=rtol, atol=rtol * scale, err_msg=f"{op} {sa} {sb} {dtype}")
    print(f"{dtype}: {len(cases)} products match numpy")
