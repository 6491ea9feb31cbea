"""A Hessian-vector product through a dumped adjoint (issue: second-order gradients).

hvp.relay's @main is a small network (dense, tanh, layer_norm, softmax cross entropy);
`gradc compile --grad --dump-ir=grad` writes @main_adjoint, which is appended to a file
with @hvp(inputs, v) = <gradient of @main, v> (calling @main_adjoint and projecting its
tuple result); `gradc run --grad=hvp` then gives H·v. It is compared, in float64, with
central finite differences of the gradient along v and with PyTorch's double backward.
Usage: hvp_check.py GRADC HVP.RELAY WORKDIR"""
import os
import re
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

gradc, source, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
WRT = ["w1", "g", "b", "w2"]


def run(args):
    return subprocess.run([gradc] + args, check=True, capture_output=True, text=True)


dump = run(["compile", source, "--grad", "--wrt=" + ",".join("%" + w for w in WRT), "--dump-ir=grad",
            "-o", os.path.join(work, "net")]).stderr
adjoint = dump[dump.index("def @main_adjoint"):]
adjoint = adjoint[:adjoint.index("\n}\n") + 3]
params = re.search(r"def @main_adjoint\((.*?)\) ->", adjoint).group(1)
params = re.sub(r', (role|primal)="\w+"', "", params)  # the adjoint's own attributes, not @hvp's
vs = ", ".join("%%v_%s: %s" % (w, re.search(r"%%%s: (Tensor\[[^\]]*\])" % w, params).group(1)) for w in WRT)
hvp = "\n".join([
    '#[version = "0.0.5"]', adjoint,
    "def @hvp(%s, %s) {" % (params, vs),
    "  %%a = @main_adjoint(%s);" % ", ".join(re.findall(r"(%\w+):", params)),
    "  %d = %a.1;",
    "  " + " + ".join("sum(%%d.%d * %%v_%s)" % (i, w) for i, w in enumerate(WRT)),
    "}"])
hvp_file = os.path.join(work, "hvp.relay")
with open(hvp_file, "w") as f:
    f.write(hvp)

rng = np.random.default_rng(3)
shapes = {"x": (4, 5), "w1": (6, 5), "g": (6,), "b": (6,), "w2": (3, 6)}
inputs = {k: rng.standard_normal(s) for k, s in shapes.items()}
inputs["y"] = np.array([0, 2, 1, 2], dtype=np.int64)
v = {w: rng.standard_normal(shapes[w]) for w in WRT}


def save(values, tag):
    args = []
    for k, a in values.items():
        path = os.path.join(work, "%s.%s.npy" % (tag, k))
        np.save(path, a)
        args.append("--input=%s=%s" % (k, path))
    return args


def outputs(directory, count):
    return [np.load(os.path.join(directory, "output_%d.npy" % i)) for i in range(count)]


out = os.path.join(work, "hvp.out")
run(["run", hvp_file, "--grad=hvp", "--wrt=" + ",".join("%" + w for w in WRT), "--output-dir", out] +
    save({**inputs, **{"v_" + w: a for w, a in v.items()}}, "hvp"))
hv = outputs(out, 1 + len(WRT))[1:]

eps = 1e-5
grads = []
for sign in (1, -1):
    moved = dict(inputs)
    for w in WRT:
        moved[w] = inputs[w] + sign * eps * v[w]
    d = os.path.join(work, "fd%+d" % sign)
    run(["run", source, "--grad", "--wrt=" + ",".join("%" + w for w in WRT), "--output-dir", d] + save(moved, d[-2:]))
    grads.append(outputs(d, 1 + len(WRT))[1:])
fd = [(p - m) / (2 * eps) for p, m in zip(*grads)]

t = {k: torch.tensor(a, requires_grad=k in WRT) for k, a in inputs.items()}
h = torch.tanh(t["x"] @ t["w1"].T)
n = F.layer_norm(h, (6,), t["g"], t["b"], 1e-5)
loss = F.nll_loss(torch.log_softmax(n @ t["w2"].T, -1), t["y"])
g = torch.autograd.grad(loss, [t[w] for w in WRT], create_graph=True)
dot = sum((gi * torch.tensor(v[w])).sum() for gi, w in zip(g, WRT))
ref = [r.numpy() for r in torch.autograd.grad(dot, [t[w] for w in WRT])]

scale = max(np.abs(r).max() for r in ref)
for w, a, b, c in zip(WRT, hv, fd, ref):
    assert a.shape == c.shape, (w, a.shape, c.shape)
    assert np.abs(a - b).max() < 1e-6 * scale, (w, "vs finite differences", np.abs(a - b).max())
    assert np.abs(a - c).max() < 1e-9 * scale, (w, "vs PyTorch", np.abs(a - c).max())
print("H.v through @main_adjoint matches finite differences of the gradient and PyTorch for %d weights" % len(WRT))
