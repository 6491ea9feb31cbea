"""nn.nll_loss with weights and ignore_index, every reduction: value and
gradient against PyTorch in float64. Usage: torch_nll_check.py GRADC WORKDIR"""
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
    subprocess.run([gradc, "run", model, "--grad", "--wrt=%p", "--output-dir", out] +
                   [f"--input={n}={os.path.join(work, n + '.npy')}" for n in "ptw"], check=True, capture_output=True)
    P = torch.tensor(p, requires_grad=True)
    loss = torch.nn.functional.nll_loss(torch.log_softmax(P, -1), torch.tensor(t), weight=torch.tensor(w),
                                        reduction=red, ignore_index=-100).sum()
    loss.backward()
    np.testing.assert_allclose(np.load(os.path.join(out, "output_0.npy")), loss.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(np.load(os.path.join(out, "output_1.npy")), P.grad.numpy(), rtol=1e-10, atol=1e-14)
    print(f"reduction={red}: loss and gradient match PyTorch")
