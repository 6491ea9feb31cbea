"""Checks gradc against PyTorch on the models of samples/pytorch_export.py:
each NAME.onnx is imported (gradc import), its loss and the gradient of every
PyTorch parameter computed with `gradc run NAME.onnx --grad` (inputs from
NAME.inputs/, weights from the model) and compared with PyTorch autograd in
float64 (NAME.expected/). Prints one PASS or FAIL line per model.

usage: check_pytorch_grads.py GRADC DIR NAME...
"""
import os
import re
import subprocess
import sys

import numpy as np

gradc, d = sys.argv[1:3]
for name in sys.argv[3:]:
    base = os.path.join(d, name)
    subprocess.run([gradc, "import", base + ".onnx", "-o", base], check=True, capture_output=True)
    text = open(base + ".relay").read()
    onnx_name = dict(re.findall(r'^//   %(\S+) <- "(.*)"$', text, re.M))
    sig = text[text.index("def @main("):text.index(") {")]
    params = re.findall(r"%(\w+): Tensor\[\(([^)]*)\), (\w+)\]", sig)
    out = base + ".out"
    subprocess.run([gradc, "run", base + ".onnx", "--grad", "--inputs-dir", base + ".inputs", "--output-dir", out],
                   check=True, capture_output=True)
    ok, worst = True, 0.0
    loss = np.load(os.path.join(out, "output_0.npy"))
    want = np.load(os.path.join(base + ".expected", "loss.npy"))
    ok = ok and loss.dtype == np.float64 and abs(float(loss) - float(want)) <= 1e-10 * max(1, abs(float(want)))
    checked = 0
    grads = [p for p in params if p[2].startswith("float")]
    for i, (relay, _, _) in enumerate(grads):
        ref = os.path.join(base + ".expected", onnx_name.get(relay, relay) + ".npy")
        if not os.path.exists(ref):
            continue  # an input, or a buffer (batch norm's running statistics)
        got, exp = np.load(os.path.join(out, "output_%d.npy" % (i + 1))), np.load(ref)
        # Relative to the gradient's largest entry; a gradient that is zero in
        # exact arithmetic (a bias before batch norm) within 1e-12 absolute.
        scale = float(np.max(np.abs(exp)))
        err = float(np.max(np.abs(got - exp)))
        good = got.shape == exp.shape and (err <= 1e-9 * scale or err <= 1e-12)
        if scale > 1e-9:
            worst = max(worst, err / scale)
        ok = ok and good
        if not good:
            print("  %s (%s): error %.2g, largest entry %.2g" % (relay, onnx_name.get(relay, relay), err, scale))
        checked += 1
    expected = len([f for f in os.listdir(base + ".expected") if f != "loss.npy"])
    ok = ok and checked == expected
    print("%s %s: loss %.12g (PyTorch %.12g), %d of %d parameter gradients, worst relative error %.2g" % (
        "PASS" if ok else "FAIL", name, float(loss), float(want), checked, expected, worst))
