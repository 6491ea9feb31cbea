"""The same MLP training step as samples/mlp.relay in PyTorch CPU eager:
forward, nll loss, backward for w1, b1, w2, b2. Prints median ms per step.
Usage: torch_mlp.py [ITERATIONS [THREADS [BATCH]]]"""
import statistics
import sys
import time

import torch

iters = int(sys.argv[1]) if len(sys.argv) > 1 else 20
if len(sys.argv) > 2:
    torch.set_num_threads(int(sys.argv[2]))
batch = int(sys.argv[3]) if len(sys.argv) > 3 else 64
torch.manual_seed(0)
x = torch.rand(batch, 784)
y = torch.arange(batch) % 10
w1 = (torch.rand(256, 784) * 0.05).requires_grad_()
b1 = (torch.rand(256) * 0.01).requires_grad_()
w2 = (torch.rand(10, 256) * 0.05).requires_grad_()
b2 = (torch.rand(10) * 0.01).requires_grad_()


def step():
    for p in (w1, b1, w2, b2):
        p.grad = None
    h = torch.relu(x @ w1.t() + b1)
    loss = torch.nn.functional.nll_loss(torch.log_softmax(h @ w2.t() + b2, dim=-1), y)
    loss.backward()


warm = time.perf_counter()  # warm-up: steps for 20 ms at least, as bench/harness.c does
while time.perf_counter() - warm < 0.02:
    step()
times = []
for _ in range(iters):
    start = time.perf_counter()
    step()
    times.append((time.perf_counter() - start) * 1e3)
print(f"{statistics.median(times):.4f}")
