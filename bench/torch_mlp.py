"""torch_mlp.py - the same MLP training step as samples/mlp.relay in PyTorch CPU
eager (forward, nll loss, backward for w1, b1, w2, b2), timed in a process of
its own under the policy of bench/peer_timing.py; prints "MS SETTLED".
Usage: torch_mlp.py THREADS BATCH POLICY
bench/bench.py starts it with OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and
MKL_NUM_THREADS set to THREADS; PyTorch's own thread counts are set here before
any operation."""
import sys

import torch

import peer_timing

threads, batch, policy = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
torch.set_num_threads(threads)
torch.set_num_interop_threads(threads)
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


peer_timing.report(step, policy)
