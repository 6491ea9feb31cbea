"""Second order through nn.nll_loss (found by the differential tester): the gradient of
sum(d loss / d p) with respect to p and w, through the dumped @main_adjoint, against PyTorch's
double backward in float64. Usage: nll_second_order.py GRADC WORKDIR."""
import os
import subprocess
import sys

import numpy as np
import torch

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(3)
p = rng.standard_normal((4, 5))
t = np.array([0, 4, 2, 4], np.int64)
w = rng.random(5) + 0.5
for reduction in ["mean", "sum"]:
    model = os.path.join(work, "nll_%s.relay" % reduction)
    with open(model, "w") as f:
        f.write('#[version = "0.0.5"]\ndef @main(%%p: Tensor[(4, 5), float64], %%t: Tensor[(4,), int64], '
                '%%w: Tensor[(5,), float64]) {\n  nn.nll_loss(%%p * %%p, %%t, %%w, reduction="%s")\n}\n' % reduction)
    dumps = os.path.join(work, "dumps_" + reduction)
    subprocess.run([gradc, "compile", model, "--grad", "--emit=obj", "-o", os.path.join(work, "first"),
                    "--dump-ir=grad", "--dump-dir=" + dumps], check=True)
    second = os.path.join(work, "second_%s.relay" % reduction)
    with open(os.path.join(dumps, "03-grad.relay")) as f, open(second, "w") as g:
        g.write(f.read() + "def @second(%p: Tensor[(4, 5), float64], %t: Tensor[(4,), int64], "
                "%w: Tensor[(5,), float64]) {\n  %r = @main_adjoint(%p, %t, %w);\n  sum((%r.1).0)\n}\n")
    for name, value in {"p": p, "t": t, "w": w}.items():
        np.save(os.path.join(work, name + ".npy"), value)
    out = os.path.join(work, "out_" + reduction)
    subprocess.run([gradc, "run", second, "--grad=second", "--inputs-dir=" + work, "--output-dir=" + out],
                   check=True, stdout=subprocess.DEVNULL)
    tp, tw = torch.tensor(p, requires_grad=True), torch.tensor(w, requires_grad=True)
    # nll_loss written out (PyTorch's own does not differentiate its weights)
    tt = torch.tensor(t)
    picked = -(tp * tp).gather(1, tt[:, None])[:, 0] * tw[tt]
    loss = picked.sum() / tw[tt].sum() if reduction == "mean" else picked.sum()
    (dp,) = torch.autograd.grad(loss, tp, create_graph=True)
    want_p, want_w = torch.autograd.grad(dp.sum(), (tp, tw))
    got_p, got_w = np.load(os.path.join(out, "output_1.npy")), np.load(os.path.join(out, "output_2.npy"))
    err = max(np.abs(got_p - want_p.numpy()).max(), np.abs(got_w - want_w.numpy()).max())
    print("%s nll_loss second order, reduction=%s: max error %.2e" % ("PASS" if err < 1e-12 else "FAIL", reduction, err))
