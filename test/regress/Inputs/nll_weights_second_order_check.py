"""Second order through the class weights of nn.nll_loss (each reduction): the
gradient of <d loss / d w, v> + <d loss / d p, u> with respect to p and w, through
the dumped @main_adjoint, against PyTorch's double backward of the loss's formula in float64.
Usage: nll_weights_second_order_check.py GRADC WORKDIR"""
import os
import subprocess
import sys

import numpy as np
import torch

gradc, work = sys.argv[1:3]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(4)
p, w = rng.standard_normal((5, 4)), rng.uniform(0.5, 1.5, 4)
t = np.array([0, 3, 1, 3, 2], dtype=np.int64)
u, v = rng.standard_normal((5, 4)), rng.standard_normal(4)
for name, a in [("p", p), ("w", w), ("t", t), ("u", u), ("v", v)]:
    np.save(os.path.join(work, name + ".npy"), a)
for reduction in ("mean", "sum"):
    model = ('def @main(%%p: Tensor[(5, 4), float64], %%t: Tensor[(5,), int64], %%w: Tensor[(4,), float64]) {\n'
             '  nn.nll_loss(%%p, %%t, %%w, reduction="%s", ignore_index=1)\n}\n' % reduction)
    src = os.path.join(work, "model_%s.relay" % reduction)
    with open(src, "w") as f:
        f.write('#[version = "0.0.5"]\n' + model)
    dump = subprocess.run([gradc, "compile", src, "--grad", "--wrt=%p,%w", "--dump-ir=grad", "-o",
                           os.path.join(work, "m")], check=True, capture_output=True, text=True).stderr
    adjoint = dump[dump.index("def @main_adjoint"):]
    adjoint = adjoint[:adjoint.index("\n}\n") + 3]
    second = os.path.join(work, "second_%s.relay" % reduction)
    with open(second, "w") as f:
        f.write('#[version = "0.0.5"]\n' + adjoint + "\n"
                "def @second(%p: Tensor[(5, 4), float64], %t: Tensor[(5,), int64], %w: Tensor[(4,), float64], "
                "%u: Tensor[(5, 4), float64], %v: Tensor[(4,), float64]) {\n"
                "  %d = @main_adjoint(%p, %t, %w).1;\n  sum(%d.0 * %u) + sum(%d.1 * %v)\n}\n")
    out = os.path.join(work, "out_" + reduction)
    subprocess.run([gradc, "run", second, "--grad=second", "--wrt=%p,%w", "--output-dir", out] +
                   ["--input=%s=%s" % (n, os.path.join(work, n + ".npy")) for n in "ptwuv"],
                   check=True, capture_output=True)
    tp, tw = torch.tensor(p, requires_grad=True), torch.tensor(w, requires_grad=True)
    # PyTorch does not differentiate nll_loss with respect to its weights: its formula, by hand
    m = torch.tensor(t != 1, dtype=torch.float64)
    wt = tw[torch.tensor(t)] * m
    total = -(wt * tp[torch.arange(5), torch.tensor(t)]).sum()
    loss = total / wt.sum() if reduction == "mean" else total
    dp, dw = torch.autograd.grad(loss, [tp, tw], create_graph=True)
    phi = (dp * torch.tensor(u)).sum() + (dw * torch.tensor(v)).sum()
    want = torch.autograd.grad(phi, [tp, tw])
    for k, ref in enumerate(want):
        got = np.load(os.path.join(out, "output_%d.npy" % (k + 1)))
        assert np.allclose(got, ref.numpy(), rtol=1e-10, atol=1e-12), (reduction, k, got, ref)
    print("reduction=%s: the second order through the weights matches PyTorch" % reduction)
