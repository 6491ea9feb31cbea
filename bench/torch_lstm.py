"""torch_lstm.py - the PyTorch CPU eager peer of bench/lstm_step.relay: one training step of
an nn.LSTM layer (input and hidden 256, 64 steps, batch 32, float32): the forward from (h0, c0),
the loss mean(h * h) of the last step's hidden state, and the backward for the weights (x needs no gradient); timed in a process of
its own under the policy of bench/peer_timing.py; prints "MS SETTLED".
Usage: torch_lstm.py THREADS step POLICY [cuda]
bench/bench.py starts it with OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS set to
THREADS; PyTorch's own thread counts are set here before any operation."""
import sys

import torch

import peer_timing

threads, what, policy, device = peer_timing.torch_peer(sys.argv)
if what != "step":
    sys.exit("usage: torch_lstm.py THREADS step POLICY")

T, B, N = 64, 32, 256
lstm = torch.nn.LSTM(N, N).to(device)
x = torch.randn(T, B, N).to(device)
h0, c0 = torch.randn(1, B, N).to(device), torch.randn(1, B, N).to(device)


def step():
    for p in lstm.parameters():
        p.grad = None
    out, _ = lstm(x, (h0, c0))
    loss = (out[-1] * out[-1]).mean()
    loss.backward()
    return loss


peer_timing.report(peer_timing.on(device, step), policy)
