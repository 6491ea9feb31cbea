"""A PyTorch CNN with batch norm exported to ONNX in training mode (float64)
and compiled directly (.onnx) with --train=sgd: the step updates the running
statistics in place too (@main returns them, written into their initializers).
Three steps through the C ABI against PyTorch's SGD loop: the losses and the
weights to 1e-10; the running mean PyTorch's and the running variance ONNX's
definition (the batch's population variance, where PyTorch keeps the unbiased
one), computed here from the batch statistics PyTorch saw, both to 1e-6:
ONNX holds the momentum as a float32, so 1 - momentum is 0.10000002.

Usage: onnx_batchnorm.py GRADC WORKDIR"""
import os
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
B, LR, STEPS = 4, 0.1, 3


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)
        self.fc = nn.Linear(3 * 4 * 4, 5)

    def forward(self, x, y):
        h = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return F.cross_entropy(self.fc(h.flatten(1)), y)


model = Net().double().train()
with torch.no_grad():
    model.bn.weight.uniform_(0.5, 1.5)
    model.bn.bias.uniform_(-0.5, 0.5)
    model.bn.running_mean.uniform_(-0.1, 0.1)
    model.bn.running_var.uniform_(0.9, 1.1)
onnx_path = os.path.join(work, "net.onnx")
x0, y0 = torch.randn(B, 1, 8, 8, dtype=torch.float64), torch.randint(0, 5, (B,))
start = {k: v.clone() for k, v in model.state_dict().items()}
torch.onnx.export(model, (x0, y0), onnx_path, opset_version=15, input_names=["x", "y"], output_names=["loss"],
                  do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING)
model.load_state_dict(start)  # the export ran the model once in training mode
base = os.path.join(work, "net")
manifest = compile_model(gradc, onnx_path, base, "--train=sgd(lr=%g)" % LR)
step = Function(base, manifest, "main_train_step")
main = [f for f in manifest["functions"] if f["name"] == "main"][0]
updates = {r["updates"] for r in main["results"] if r["role"] == "in_place"}
print("@main updates in place: %s" % ", ".join(sorted(updates)))

# Every parameter's starting value: gradc names an initializer after its ONNX
# name, which PyTorch takes from the state dict ("bn.running_mean").
named = {k.replace(".", "_"): k for k in model.state_dict()}
bufs, of = {}, {}
for p in step.params:
    if p.get("training") in ("parameter", "model_state"):
        assert p["name"] in named, p["name"]
        of[p["name"]] = named[p["name"]]
        bufs[p["name"]] = aligned(start[named[p["name"]]].numpy())
print("model state: %s" % ", ".join(sorted(of[n] for n in of if n in updates)))

seen = []
model.bn.register_forward_hook(lambda m, inp, out: seen.append(inp[0].detach()))
opt = torch.optim.SGD([p for p in model.parameters()], lr=LR)
rng = np.random.default_rng(3)
mean_ref = start["bn.running_mean"].numpy().copy()
var_ref = start["bn.running_var"].numpy().copy()
problems = []
for t in range(STEPS):
    x, y = rng.standard_normal((B, 1, 8, 8)), rng.integers(0, 5, B)
    bufs.update(x=aligned(x), y=aligned(y), lr=aligned(np.array(LR)))
    (loss,) = step(bufs)
    opt.zero_grad()
    ref = model(torch.tensor(x), torch.tensor(y))
    ref.backward()
    opt.step()
    batch = seen[-1]
    mean_ref = 0.9 * mean_ref + 0.1 * batch.mean((0, 2, 3)).numpy()
    var_ref = 0.9 * var_ref + 0.1 * batch.var((0, 2, 3), unbiased=False).numpy()
    if abs(float(loss) - ref.item()) > 1e-10 * abs(ref.item()):
        problems.append("step %d loss %r, PyTorch %r" % (t, float(loss), ref.item()))
for name, key in of.items():
    got = bufs[name]
    want = {"bn.running_mean": mean_ref, "bn.running_var": var_ref}.get(key, model.state_dict()[key].numpy())
    # ONNX writes the momentum as a float32 attribute (0.9 is 0.89999997...): the
    # running statistics agree to float32's rounding of it (1e-6), the rest to 1e-10.
    tol = 1e-6 if "running" in key else 1e-10
    if np.abs(got - want).max() > tol * max(np.abs(want).max(), 1):
        problems.append("%s (%s) differs by %.3g" % (name, key, np.abs(got - want).max()))
mean = bufs[[n for n in of if of[n] == "bn.running_mean"][0]]
torch_mean = model.bn.running_mean.numpy()
print("running mean equal to PyTorch's: %s" % (np.abs(mean - torch_mean).max() <= 1e-6 * np.abs(torch_mean).max()))
print("after %d steps: %s" % (STEPS, "equal" if not problems else "FAIL " + "; ".join(problems)))
