"""samples/transformer.relay in float64 against the same block in PyTorch: the loss
and the gradient of every weight, through `gradc run --grad`, at relative 1e-6.
Usage: torch_transformer_sample_check.py GRADC SAMPLES WORKDIR"""
import math
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

gradc, samples, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
with open(os.path.join(samples, "transformer.relay")) as f:
    text = f.read()
model = os.path.join(work, "transformer64.relay")
with open(model, "w") as f:
    f.write(text.replace("float32", "float64").replace("0.25f", "0.25f64").replace("float64 -> float64", "float64"))

B, T, C, H, V = 4, 8, 32, 2, 16
rng = np.random.default_rng(5)
shapes = {"E": (V, C), "P": (T, C), "ln1_g": (C,), "ln1_b": (C,), "Wqkv": (3 * C, C), "bqkv": (3 * C,),
          "Wo": (C, C), "bo": (C,), "ln2_g": (C,), "ln2_b": (C,), "W1": (2 * C, C), "b1": (2 * C,), "W2": (C, 2 * C),
          "b2": (C,)}
weights = {k: rng.standard_normal(s) * (0.3 if len(s) == 2 else 0.5) + (1.0 if k.endswith("_g") else 0.0)
           for k, s in shapes.items()}
inputs = dict(weights)
inputs["tokens"] = rng.integers(0, V, (B, T)).astype(np.int64)
inputs["targets"] = rng.integers(0, V, B * T).astype(np.int64)
inputs["mask"] = np.triu(np.full((T, T), -1e9), 1)
for k, v in inputs.items():
    np.save(os.path.join(work, k + ".npy"), v)
wrt = list(shapes)
out = os.path.join(work, "out")
subprocess.run([gradc, "run", model, "--grad", "--wrt=" + ",".join("%" + k for k in wrt), "--output-dir", out] +
               ["--input=%s=%s" % (k, os.path.join(work, k + ".npy")) for k in inputs], check=True,
               stdout=subprocess.DEVNULL)

w = {k: torch.tensor(v, requires_grad=True) for k, v in weights.items()}
tokens, targets = torch.tensor(inputs["tokens"]), torch.tensor(inputs["targets"])
mask = torch.tensor(inputs["mask"])


def heads(t):  # [B*T, C] -> [B*H, T, C/H]
    return t.reshape(B, T, H, C // H).permute(0, 2, 1, 3).reshape(B * H, T, C // H)


x = (w["E"][tokens] + w["P"]).reshape(B * T, C)
ln1 = F.layer_norm(x, (C,), w["ln1_g"], w["ln1_b"], 1e-5)
q, k, v = (ln1 @ w["Wqkv"].T + w["bqkv"]).split(C, -1)
att = torch.softmax(heads(q) @ heads(k).transpose(1, 2) * 0.25 + mask, -1)
y = (att @ heads(v)).reshape(B, H, T, C // H).permute(0, 2, 1, 3).reshape(B * T, C)
h = x + y @ w["Wo"].T + w["bo"]
ln2 = F.layer_norm(h, (C,), w["ln2_g"], w["ln2_b"], 1e-5)
m = F.gelu(ln2 @ w["W1"].T + w["b1"]) @ w["W2"].T + w["b2"]
loss = F.nll_loss(torch.log_softmax((h + m) @ w["E"].T, -1), targets)
loss.backward()

got = np.load(os.path.join(out, "output_0.npy"))
assert np.allclose(got, loss.item(), rtol=1e-9), (got, loss.item())
for i, name in enumerate(wrt):
    g = np.load(os.path.join(out, "output_%d.npy" % (i + 1)))
    want = w[name].grad.numpy()
    assert g.shape == want.shape, (name, g.shape, want.shape)
    err = np.abs(g - want).max() / max(np.abs(want).max(), 1e-30)
    assert err < 1e-6, (name, err)
print("samples/transformer.relay in float64: the loss and %d gradients match PyTorch" % len(wrt))
