"""samples/cnn.relay in float64 against the same network in PyTorch: the loss and
the gradient of every weight, through `gradc run --grad`, at relative 1e-6.
Usage: torch_cnn_sample_check.py GRADC SAMPLES WORKDIR"""
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

gradc, samples, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
with open(os.path.join(samples, "cnn.relay")) as f:
    text = f.read()
model = os.path.join(work, "cnn64.relay")
with open(model, "w") as f:
    f.write(text.replace("float32", "float64"))

rng = np.random.default_rng(11)
shapes = {"x": (16, 1, 28, 28), "w1": (6, 1, 5, 5), "g1": (6,), "b1": (6,), "w2": (16, 6, 5, 5), "g2": (16,),
          "b2": (16,), "w3": (120, 400), "b3": (120,), "w4": (10, 120), "b4": (10,)}
inputs = {k: rng.standard_normal(s) * (0.2 if k.startswith("w") else 1.0) for k, s in shapes.items()}
inputs["y"] = rng.integers(0, 10, 16).astype(np.int64)
for k, v in inputs.items():
    np.save(os.path.join(work, k + ".npy"), v)
wrt = ["w1", "g1", "b1", "w2", "g2", "b2", "w3", "b3", "w4", "b4"]
out = os.path.join(work, "out")
subprocess.run([gradc, "run", model, "--grad", "--wrt=" + ",".join("%" + k for k in wrt), "--output-dir", out] +
               ["--input=%s=%s" % (k, os.path.join(work, k + ".npy")) for k in inputs], check=True)

t = {k: torch.tensor(v, requires_grad=k in wrt) for k, v in inputs.items()}


def stage(x, w, g, b, padding):
    y = F.batch_norm(F.conv2d(x, w, padding=padding), None, None, g, b, training=True)
    return F.max_pool2d(F.relu(y), 2, 2)


h = stage(stage(t["x"], t["w1"], t["g1"], t["b1"], 2), t["w2"], t["g2"], t["b2"], 0)
h = F.relu(h.flatten(1) @ t["w3"].T + t["b3"])
loss = F.nll_loss(F.log_softmax(h @ t["w4"].T + t["b4"], -1), t["y"])
loss.backward()
np.testing.assert_allclose(np.load(os.path.join(out, "output_0.npy")), loss.detach().numpy(), rtol=1e-6)
for i, k in enumerate(wrt):
    np.testing.assert_allclose(np.load(os.path.join(out, "output_%d.npy" % (i + 1))), t[k].grad.numpy(), rtol=1e-6,
                               atol=1e-10, err_msg="d" + k)
print("samples/cnn.relay in float64: the loss and %d gradients match PyTorch" % len(wrt))
