"""A PyTorch MLP with Dropout(0.5), exported to ONNX in training mode and
compiled with --train=sgd: the dropout seed is an input of the step (its
manifest part "data", int64), the same seed gives the same step, another seed
another mask (another loss), and the weights the step writes are those of the
loss it returns (a second run from the same start agrees bitwise).

Usage: dropout_seed.py GRADC WORKDIR"""
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


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.drop = nn.Linear(6, 16), nn.Linear(16, 3), nn.Dropout(0.5)

    def forward(self, x, y):
        return F.cross_entropy(self.fc2(self.drop(F.relu(self.fc1(x)))), y)


model = Net().train()
x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
path = os.path.join(work, "net.onnx")
torch.onnx.export(model, (x, y), path, opset_version=15, input_names=["x", "y"], output_names=["loss"],
                  do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING)
base = os.path.join(work, "net")
step = Function(base, compile_model(gradc, path, base, "--train=sgd(lr=0.1)"), "main_train_step")
parts = {p["name"]: p.get("training") for p in step.params}
seed = [p for p in step.params if p["dtype"] == "int64" and p["shape"] == []]
print("seed input: %s (%s)" % (seed[0]["name"], parts[seed[0]["name"]]) if seed else "no seed input")
print("trained: %s" % ", ".join(sorted(n for n, part in parts.items() if part == "parameter")))

start = {n: t.detach().numpy().copy() for n, t in model.state_dict().items()}


def run(seed_value):
    bufs = {n.replace(".", "_"): aligned(v) for n, v in start.items()}
    bufs.update(x=aligned(x.numpy()), y=aligned(y.numpy()), lr=aligned(np.array(0.1, np.float32)))
    bufs[seed[0]["name"]] = aligned(np.array(seed_value, np.int64))
    loss = float(step(bufs)[0])
    return loss, bufs["fc1_weight"].copy()


a, b, c = run(1234), run(1234), run(99)
print("same seed, same step: %s" % (a[0] == b[0] and np.array_equal(a[1], b[1])))
print("another seed, another mask: %s" % (a[0] != c[0] and not np.array_equal(a[1], c[1])))
