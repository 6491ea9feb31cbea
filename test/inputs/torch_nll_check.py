"""nn.nll_loss with weights and ignore_index, every reduction: value and
gradients (predictions and weights) against PyTorch in float64. Usage: torch_nll_check.py GRADC WORKDIR"""
import os
import subprocess
import sys

import numpy as np
import torch

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(3)
p, t, w = rng.standard_normal((5, 4)), np.array([0, 3, -100, 2, 3], np.int64), rng.random(4) + 0.5
for name, a in (("p", p), ("t", t), ("w", w)):
    np.save(os.path.join(work, name + ".npy"), a)
for red in ["mean", "sum", "none"]:
    model = os.path.join(work, red + ".relay")
    with open(model, "w") as f:
        f.write(f"""#[version = "0.0.5"]
def @main(%p: Tensor[(5, 4), float64], %t: Tensor[(5,), int64], %w: Tensor[(4,), float64]) {{
  sum(nn.nll_loss(nn.log_softmax(%p), %t, %w, reduction="{red}", ignore_index=-100))
}}
""")
    out = os.path.join(work, red)
    subprocess.run([gradc, "run", model, "--grad", "--wrt=%p,%w", "--output-dir", out] +
                   [f"--input={n}={os.path.join(work, n + '.npy')}" for n in "ptw"], check=True, capture_output=True)
    P, W = torch.tensor(p, requires_grad=True), torch.tensor(w, requires_grad=True)
    loss = torch.nn.functional.nll_loss(torch.log_softmax(P, -1), torch.tensor(t), weight=W.detach(),
                                        reduction=red, ignore_index=-100).sum()
    loss.backward()
    # PyTorch's nll_loss does not differentiate its weights: the same loss
    # written out with gather, which autograd differentiates in both.
    T = torch.tensor(t)
    counted = T != -100
    T_safe = torch.where(counted, T, 0)
    picked = torch.log_softmax(P, -1).gather(1, T_safe[:, None])[:, 0]
    wt = W[T_safe] * counted
    per_item = -wt * picked
    explicit = {"none": per_item, "sum": per_item.sum(), "mean": per_item.sum() / wt.sum()}[red].sum()
    np.testing.assert_allclose(explicit.detach().numpy(), loss.detach().numpy(), rtol=1e-12)
    p_grad = P.grad.clone()
    explicit.backward(inputs=[W])
    np.testing.assert_allclose(np.load(os.path.join(out, "output_0.npy")), loss.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(np.load(os.path.join(out, "output_1.npy")), p_grad.numpy(), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(np.load(os.path.join(out, "output_2.npy")), W.grad.numpy(), rtol=1e-10, atol=1e-14)
    print(f"reduction={red}: loss and gradients for predictions and weights match PyTorch")
