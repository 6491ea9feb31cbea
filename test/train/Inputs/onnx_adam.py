"""A PyTorch transformer block with dropout, exported to ONNX in training mode
(float32, dropout at p = 0: seedless), imported by gradc, compiled with
`--train=adam` (--wrt: the weights that are PyTorch's parameters, not the
attention mask, a buffer), and trained 20 steps through the C ABI, each step's
outputs and workspace filled with garbage first; PyTorch's own loop (Adam,
the same data and rate schedule) must follow the same loss trajectory to
1e-5 (relative), and end with the same weights.

Usage: onnx_adam.py GRADC WORKDIR"""
import math
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_abi import Function, aligned, compile_model  # noqa: E402

gradc, work = sys.argv[1:3]
os.makedirs(work, exist_ok=True)
torch.manual_seed(0)
torch.set_num_threads(1)
B, T, C, HEADS, CLASSES, STEPS, LR = 4, 8, 32, 4, 5, 20, 2e-3


class Block(nn.Module):
    """Pre-norm attention and MLP with dropout, mean-pooled into a classifier."""

    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc1, self.fc2 = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.head = nn.Linear(C, CLASSES)
        self.drop_attn, self.drop_mlp = nn.Dropout(0.0), nn.Dropout(0.0)
        self.register_buffer("mask", torch.triu(torch.full((T, T), -1e9), 1))

    def forward(self, x, y):
        d = C // HEADS
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (z.reshape(B, T, HEADS, d).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(d) + self.mask, dim=-1)
        x = x + self.drop_attn(self.proj((att @ v).transpose(1, 2).reshape(B, T, C)))
        x = x + self.drop_mlp(self.fc2(F.gelu(self.fc1(self.ln2(x)))))
        return F.cross_entropy(self.head(x.mean(1)), y)


model = Block()
with torch.no_grad():  # distinct norm weights: the exporter would merge equal initializers
    for norm in (model.ln1, model.ln2):
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
model.train()
onnx_path = os.path.join(work, "block.onnx")
torch.onnx.export(model, (torch.randn(B, T, C), torch.randint(0, CLASSES, (B,))), onnx_path, opset_version=15,
                  input_names=["x", "y"], output_names=["loss"], do_constant_folding=False,
                  training=torch.onnx.TrainingMode.TRAINING)
base = os.path.join(work, "block")
subprocess.run([gradc, "import", onnx_path, "-o", base], check=True)
# The weights `gradc import` wrote, each matched to the torch parameter it
# is; the attention mask (a buffer, also an initializer) is not trained.
weights = {f[:-4]: np.load(os.path.join(base + ".weights", f)) for f in os.listdir(base + ".weights")}
pairs = []
for n, t in model.named_parameters():
    match = [w for w, a in weights.items() if a.shape == tuple(t.shape) and np.array_equal(a, t.detach().numpy())]
    assert len(match) == 1, (n, match)
    pairs.append((match[0], t))
wrt = ",".join("%" + w for w, _ in pairs)
manifest = compile_model(gradc, base + ".relay", base, "--train=adam(lr=%g)" % LR, "--wrt=" + wrt)
step = Function(base, manifest, "main_train_step")

bufs = {w: aligned(a) for w, a in weights.items()}
for p in step.params:
    if p.get("training") in ("optimizer_state", "step"):
        bufs[p["name"]] = aligned(np.zeros(p["shape"], np.int64 if p["dtype"] == "int64" else np.float32))
trained = [p["name"] for p in step.params if p.get("training") == "parameter"]
assert sorted(trained) == sorted(w for w, _ in pairs), trained
print("trained: %d parameters, %d optimizer state buffers" % (
    len(pairs), sum(p.get("training") == "optimizer_state" for p in step.params)))

opt = torch.optim.Adam(model.parameters(), lr=LR)
rng = np.random.default_rng(5)
worst = 0.0
for t in range(STEPS):
    lr = LR * (0.5 + 0.5 * math.cos(math.pi * t / STEPS))
    x = rng.standard_normal((B, T, C)).astype(np.float32)
    y = rng.integers(0, CLASSES, B)
    bufs.update(x=aligned(x), y=aligned(y), lr=aligned(np.array(lr, np.float32)))
    (loss,) = step(bufs)
    for g in opt.param_groups:
        g["lr"] = lr
    opt.zero_grad()
    ref = model(torch.tensor(x), torch.tensor(y))
    ref.backward()
    opt.step()
    err = abs(float(loss) - ref.item()) / abs(ref.item())
    worst = max(worst, err)
    print("step %2d: loss %.6f, PyTorch %.6f, relative difference %.1e" % (t, float(loss), ref.item(), err))


def weight_difference(name, param):
    """Relative difference of a trained weight, leaving out the key bias
    (qkv's bias, middle third): softmax does not change when every score of a
    row moves alike, so its gradient is zero up to rounding and Adam's update
    of it is that rounding scaled to the rate, on either side."""
    got, ref = bufs[name], param.detach().numpy()
    if param is model.qkv.bias:
        got, ref = np.concatenate([got[:C], got[2 * C:]]), np.concatenate([ref[:C], ref[2 * C:]])
    return float(np.abs(got - ref).max() / np.abs(ref).max())


weights = max(weight_difference(n, p) for n, p in pairs)
print("weights after %d steps: largest relative difference %.1e" % (STEPS, weights))
print("trajectory %s" % ("equal to 1e-5" if worst <= 1e-5 and weights <= 1e-5 else "DIFFERS"))
